/**
 * The anchor for bench/bridge-fanout: a bare `ws` server that broadcasts every text frame it receives to every
 * other connected client, sending the same string to all (no parsing, no state, no log). Prints its port.
 */
import { WebSocketServer, WebSocket } from 'ws';

const wss = new WebSocketServer({
  host: '127.0.0.1',
  port: 0,
  perMessageDeflate: false,
  maxPayload: 1 << 20,
});
wss.on('listening', () => {
  const addr = wss.address();
  if (addr !== null && typeof addr === 'object') process.stdout.write(`bare-ws listening ${addr.port}\n`);
});
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => {
    const text = isBinary ? data : (data as Buffer).toString('utf8');
    for (const c of wss.clients) if (c !== ws && c.readyState === WebSocket.OPEN) c.send(text);
  });
});
const stop = (): void => {
  for (const c of wss.clients) c.terminate();
  wss.close(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
