/**
 * The state API (docs/console.md "State API") through `inject` on the console app as app.ts builds it, on a
 * hub on a `ManualClock` (quick tier): a pattern snapshot with the hub's epoch and offset, one key by path,
 * paging by count (and the byte bound), bad input refused with 400, the Host header checked, and with
 * requireAuth the same bearer tokens as the WebSocket. That it answers on the client transport's port:
 * test/io/state-api.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { STATE_PAGE_MAX_BYTES } from '../../src/io/console-http.ts';
import { injectConsole } from '../quick-fixtures.ts';

interface Res {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | number | undefined>;
}

/** A GET as a client on this machine sends it (Host: 127.0.0.1 unless the test names another). */
async function get(app: FastifyInstance, path: string, headers: Record<string, string> = {}): Promise<Res> {
  const r = await app.inject({ method: 'GET', url: path, headers: { host: '127.0.0.1', ...headers } });
  return { status: r.statusCode, body: r.json<Record<string, unknown>>(), headers: r.headers };
}

test('pattern snapshot, single path, paging and the byte bound, bad input', async () => {
  const t = await injectConsole();
  try {
    const app = t.app;
    for (let i = 0; i < 25; i++) t.adapter.set(`fake.key.k${String(i).padStart(2, '0')}`, { n: i });
    t.adapter.set('fake.other.x', 1);

    const all = await get(app, '/api/state?pattern=fake.key.*');
    assert.equal(all.status, 200);
    assert.equal(all.body['epoch'], t.hub.epoch);
    assert.equal(all.body['offset'], t.hub.offset);
    assert.equal(all.body['total'], 25);
    assert.equal((all.body['entries'] as unknown[]).length, 25);
    assert.equal(all.body['next'], undefined);

    // Paging: 10 at a time, in path order, `after` the last path of the previous page.
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 5; page++) {
      const r = await get(
        app,
        `/api/state?pattern=fake.**&limit=10${after === undefined ? '' : `&after=${after}`}`,
      );
      const entries = r.body['entries'] as { path: string }[];
      seen.push(...entries.map((e) => e.path));
      after = r.body['next'] as string | undefined;
      if (after === undefined) break;
      assert.equal(after, entries.at(-1)?.path);
    }
    assert.equal(seen.length, 26);
    assert.deepEqual(seen, [...seen].sort());

    const one = await get(app, '/api/state/fake.key.k07');
    assert.equal(one.status, 200);
    assert.deepEqual(one.body['value'], { n: 7 });
    assert.equal(one.body['owner'], 'fake.device');
    assert.equal(one.body['stale'], false);
    assert.equal((await get(app, '/api/state/fake.key.nope')).status, 404);
    assert.equal((await get(app, '/api/state/Bad..path')).status, 400);
    assert.equal((await get(app, '/api/state?pattern=a.**.b')).status, 400);
    assert.equal((await get(app, '/api/state?limit=100000')).status, 400);
    const foreign = await get(app, '/api/state', { host: 'evil.example' });
    assert.equal(foreign.status, 421, 'Host checked');
    assert.equal(foreign.body['error'], 'HOST_NOT_ALLOWED');
    assert.equal((await get(app, '/api/state/Bad..path')).body['error'], 'INVALID_REQUEST');

    // Byte bound: values of 300 KiB each, so a page stops after about 1 MiB.
    const big = 'x'.repeat(300 * 1024);
    for (let i = 0; i < 6; i++) t.adapter.set(`fake.big.b${i}`, big);
    const b = await get(app, '/api/state?pattern=fake.big.*&limit=1000');
    const n = (b.body['entries'] as unknown[]).length;
    assert.ok(n >= 1 && n * 300 * 1024 <= STATE_PAGE_MAX_BYTES + 300 * 1024, `${n} entries`);
    assert.ok(n < 6);
    assert.equal(b.body['next'], `fake.big.b${n - 1}`);
  } finally {
    await t.close();
  }
});

test('requireAuth: the API refuses without a token or with a wrong one, answers with a configured one', async () => {
  const t = await injectConsole({
    clientTransport: { requireAuth: true, authTokens: ['s3cret-token-0123456789'] },
  });
  try {
    const app = t.app;
    t.adapter.set('fake.key.a', 1);
    const none = await get(app, '/api/state?pattern=**');
    assert.equal(none.status, 401);
    assert.equal(none.body['error'], 'UNAUTHORIZED');
    assert.equal(none.headers['www-authenticate'], 'Bearer');
    assert.equal((await get(app, '/api/state/fake.key.a', { authorization: 'Bearer wrong' })).status, 401);
    assert.equal((await get(app, '/api/hub')).status, 401);
    const ok = await get(app, '/api/state/fake.key.a', { authorization: 'Bearer s3cret-token-0123456789' });
    assert.equal(ok.status, 200);
    assert.equal(ok.body['value'], 1);
    const hub = await get(app, '/api/hub', { authorization: 'Bearer s3cret-token-0123456789' });
    assert.equal(hub.status, 200);
    assert.ok(Array.isArray(hub.body['clients']));
  } finally {
    await t.close();
  }
});
