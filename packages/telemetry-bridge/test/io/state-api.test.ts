/**
 * The state API on the client transport's port (docs/console.md "State API"): the console's URL is the
 * WebSocket's port on 127.0.0.1, and the API answers there. What it answers (snapshots, paging, the byte
 * bound, bad input, the Host check, requireAuth) is tested through `inject` in test/app/state-api.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBridge } from '../helpers.ts';

test('the state API answers on the WebSocket port', async () => {
  const t = await startTestBridge();
  try {
    const base = t.bridge.consoleUrl as string;
    assert.match(base, /^http:\/\/127\.0\.0\.1:\d+\/$/);
    assert.equal(new URL(base).port, new URL(t.bridge.clientUrl).port, 'same port as the WebSocket');
    t.adapter.set('fake.key.k07', { n: 7 });
    const res = await fetch(new URL('/api/state/fake.key.k07', base));
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown>;
    assert.deepEqual(body['value'], { n: 7 });
    assert.equal(body['owner'], 'fake.device');
  } finally {
    await t.close();
  }
});
