import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { parseClientMessage } from '../../src/protocol/ws-messages.ts';
import { startTestServer } from '../helpers.ts';
import { wsUrl } from '../ws-helpers.ts';

test('a message nested 7000 deep is INVALID_MESSAGE, checked before anything recurses', () => {
  const deep = `{"type":"register","port":9000,"meta":{"x":${'['.repeat(7000)}${']'.repeat(7000)}}}`;
  const r = parseClientMessage(deep);
  assert.equal(r.ok, false);
  assert.match(!r.ok ? r.error.message : '', /nested deeper than 16/);
  // Brackets inside strings do not count.
  const r2 = parseClientMessage(`{"type":"register","port":9000,"meta":{"label":"${'['.repeat(40)}"}}`);
  assert.equal(r2.ok, true);
});

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
