/**
 * The 101 Switching Protocols answer carries Punch-Version (a real upgrade). The codec's nesting bound:
 * test/protocol/ws-messages.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { startTestServer } from '../helpers.ts';
import { wsUrl } from '../ws-helpers.ts';

test('the 101 Switching Protocols answer carries Punch-Version', async () => {
  const t = await startTestServer();
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'v101' } })).json;
    const ws = new WebSocket(wsUrl(t.url, 'v101'), { headers: { authorization: `Bearer ${s.token}` } });
    const version = await new Promise<string | undefined>((resolve, reject) => {
      ws.once('upgrade', (res) => resolve(res.headers['punch-version'] as string | undefined));
      ws.once('error', reject);
    });
    assert.equal(version, '1.0');
    ws.close();
  } finally {
    await t.close();
  }
});
