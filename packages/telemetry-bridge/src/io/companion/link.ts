/**
 * One Satellite API connection, over WebSocket (Companion ≥ 3.5, port 16623) or TCP (port 16622). Both carry
 * the same `\n`-terminated lines (docs/companion.md "Wire format"); this module only moves lines and reports
 * the end of the link. A WebSocket frame carries exactly one line, terminated by `\n` as Companion requires.
 */
import { connect, type Socket } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import WebSocket from 'ws';
import { LineSplitter } from '../../protocol/satellite.ts';

export type SatelliteTransport = 'ws' | 'tcp';

export interface LinkHandlers {
  line(line: string): void;
  /** Called once, when the link ends for any reason. */
  closed(reason: string): void;
}

export interface SatelliteLink {
  send(line: string): void;
  close(reason?: string): void;
  readonly bytesBuffered: number;
}

export interface LinkOptions {
  transport: SatelliteTransport;
  host: string;
  port: number;
  connectTimeoutMs: number;
  maxLineLength: number;
}

/** Open a link; resolves once connected, rejects on refusal or timeout. */
export function openLink(o: LinkOptions, h: LinkHandlers): Promise<SatelliteLink> {
  return o.transport === 'tcp' ? openTcp(o, h) : openWs(o, h);
}

function makeEnd(h: LinkHandlers): (reason: string) => void {
  let done = false;
  return (reason) => {
    if (done) return;
    done = true;
    h.closed(reason);
  };
}

function feed(
  splitter: LineSplitter,
  text: string,
  h: LinkHandlers,
  end: (r: string) => void,
  kill: () => void,
): void {
  let lines: string[];
  try {
    lines = splitter.push(text);
  } catch (err) {
    kill();
    end(err instanceof Error ? err.message : String(err));
    return;
  }
  for (const l of lines) h.line(l);
}

function openTcp(o: LinkOptions, h: LinkHandlers): Promise<SatelliteLink> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ host: o.host, port: o.port });
    socket.setNoDelay(true);
    const splitter = new LineSplitter(o.maxLineLength);
    const decoder = new StringDecoder('utf8');
    const end = makeEnd(h);
    let open = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connect timeout after ${o.connectTimeoutMs} ms`));
    }, o.connectTimeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      open = true;
      resolve({
        send: (line) => void socket.write(line),
        close: (reason = 'closed by adapter') => {
          socket.destroy();
          end(reason);
        },
        get bytesBuffered() {
          return socket.writableLength;
        },
      });
    });
    socket.on('data', (d) => feed(splitter, decoder.write(d), h, end, () => socket.destroy()));
    socket.on('error', (err) => {
      if (!open) {
        clearTimeout(timer);
        reject(err);
      } else end(err.message);
    });
    socket.on('close', () => {
      if (open) end('connection closed by Companion');
    });
  });
}

function openWs(o: LinkOptions, h: LinkHandlers): Promise<SatelliteLink> {
  return new Promise((resolve, reject) => {
    const host = o.host.includes(':') ? `[${o.host}]` : o.host;
    const ws = new WebSocket(`ws://${host}:${o.port}/`, {
      perMessageDeflate: false,
      handshakeTimeout: o.connectTimeoutMs,
      maxPayload: o.maxLineLength + 1024,
    });
    const splitter = new LineSplitter(o.maxLineLength);
    const end = makeEnd(h);
    let open = false;
    ws.once('open', () => {
      open = true;
      resolve({
        send: (line) => {
          if (ws.readyState === WebSocket.OPEN) ws.send(line);
        },
        close: (reason = 'closed by adapter') => {
          ws.terminate();
          end(reason);
        },
        get bytesBuffered() {
          return ws.bufferedAmount;
        },
      });
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      feed(splitter, isBinary ? data.toString('utf8') : data.toString('utf8'), h, end, () => ws.terminate());
    });
    ws.on('error', (err) => {
      if (!open) reject(err);
      else end(err.message);
    });
    ws.on('close', () => {
      if (open) end('connection closed by Companion');
      else reject(new Error('connection closed before open'));
    });
  });
}
