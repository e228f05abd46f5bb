/**
 * Nesting limit on client frames over the wire (docs/protocol.md "Errors"): the deep frame gets
 * INVALID_MESSAGE and the connection stays usable. The codec's limit and depth scan: test/protocol/depth.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBridge } from '../helpers.ts';
import WebSocket from 'ws';
import { deepState } from '../frames.ts';

test('over the wire: the deep frame gets error INVALID_MESSAGE, the connection stays usable', async () => {
  const t = await startTestBridge({ clientTransport: { maxMessageSize: 1024 * 1024 } });
  const ws = new WebSocket(t.bridge.clientUrl);
  try {
    const msgs: Record<string, unknown>[] = [];
    ws.on('message', (d: Buffer) => msgs.push(JSON.parse(d.toString()) as Record<string, unknown>));
    await new Promise((res, rej) => {
      ws.once('open', res);
      ws.once('error', rej);
    });
    ws.send(JSON.stringify({ type: 'handshake', name: 'deep', version: '1' }));
    const until = async (pred: () => boolean): Promise<void> => {
      const end = Date.now() + 5000;
      while (!pred()) {
        if (Date.now() > end) throw new Error(`timed out: ${JSON.stringify(msgs).slice(0, 500)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await until(() => msgs.some((m) => m['type'] === 'handshake_response'));
    ws.send(deepState(5000));
    await until(() => msgs.some((m) => m['type'] === 'error'));
    const err = msgs.find((m) => m['type'] === 'error') as { payload?: { code?: string }; code?: string };
    assert.equal(err.payload?.code ?? err.code, 'INVALID_MESSAGE');
    ws.send(JSON.stringify({ type: 'ping' }));
    await until(() => msgs.some((m) => m['type'] === 'pong'));
  } finally {
    ws.close();
    await t.close();
  }
});
