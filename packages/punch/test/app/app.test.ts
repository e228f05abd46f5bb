/**
 * The broker as app.ts builds it (docs/ARCHITECTURE.md "One skeleton"), on a `ManualClock` with the memory
 * store and fastify's inject, so no socket and no file: nothing listens before `start`, the context's clock
 * reaches the session domain (a TTL passes when the clock says so), `describe()` names no secret, `close` is
 * safe twice without a start, and a missing secret is a `ConfigError` (one line, exit 2 from `runService`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, ManualClock, serviceContext } from '@broadcast-ops/core';
import { createPunchApp } from '../../src/app.ts';
import { punchConfigSchema } from '../../src/config.ts';
import { MemoryStore } from '../../src/domain/store.ts';

const SECRET = 'app-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOP';

function config(extra: Record<string, unknown> = {}) {
  return punchConfigSchema.parse({
    secret: SECRET,
    host: '127.0.0.1',
    port: 0,
    logLevel: 'silent',
    ...extra,
  });
}

test('app.ts: the sessions run on the context clock; nothing listens before start; describe() keeps the secret', async () => {
  const clock = new ManualClock();
  const punch = createPunchApp(serviceContext(config(), { clock }), { store: new MemoryStore() });
  try {
    assert.equal(punch.app.server.listening, false);
    assert.equal(punch.health()['status'], 'starting');
    assert.throws(() => punch.url(), /not been started/);
    const described = punch.describe();
    assert.equal(described['url'], null);
    assert.equal(described['store'], 'sqlite');
    assert.equal(described['tls'], false);
    assert.ok(!JSON.stringify(described).includes(SECRET));

    const headers = { host: '127.0.0.1', 'content-type': 'application/json' };
    const created = await punch.app.inject({
      method: 'POST',
      url: '/api/session',
      headers,
      payload: JSON.stringify({ name: 'cam1', ttl: 60 }),
    });
    assert.equal(created.statusCode, 201, created.body);
    const { token, expiresAt } = created.json<{ token: string; expiresAt: number }>();
    // The expiry is the context's clock plus the TTL, not the wall clock's.
    assert.equal(expiresAt, clock.now() + 60_000);
    const read = () =>
      punch.app.inject({
        method: 'GET',
        url: '/api/session/cam1',
        headers: { host: '127.0.0.1', authorization: `Bearer ${token}` },
      });
    assert.equal((await read()).statusCode, 200);
    assert.equal(punch.health()['sessions'], 1);

    clock.advance(61_000);
    // The close is saved to the store before it is final: let those promises settle (no time passes).
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    assert.equal(punch.broker.get('cam1')?.closeReason, 'ttl_expired');
    const gone = await read();
    assert.equal(gone.statusCode, 410, gone.body);
    assert.equal(gone.json<{ error: string }>().error, 'SESSION_EXPIRED');
    assert.equal(punch.health()['sessions'], 0);
    const metrics = await punch.app.inject({
      method: 'GET',
      url: '/metrics',
      headers: { host: '127.0.0.1' },
    });
    assert.match(metrics.body, /^punch_sessions_total\{path="direct"\} 0$/m);
  } finally {
    await punch.close();
    await punch.close();
  }
  assert.equal(punch.app.server.listening, false);
});

test('app.ts: without PUNCH_SECRET (and without --demo) building the broker is a ConfigError naming the variable', () => {
  const { secret: _secret, ...rest } = config();
  assert.throws(
    () => createPunchApp(serviceContext({ ...rest, secret: undefined }), { store: new MemoryStore() }),
    (err: unknown) =>
      err instanceof ConfigError && /^PUNCH_SECRET is not set\. .*HMAC key/s.test(err.message),
  );
});
