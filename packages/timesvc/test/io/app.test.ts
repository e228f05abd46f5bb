/**
 * The time service as app.ts builds it (docs/ARCHITECTURE.md "One skeleton"), on 127.0.0.1 ephemeral ports:
 * the clock manager's timers and the service's wall time come from the context's `Clock` (README "Clock"),
 * `describe()` names the NTP addresses and the web URL main.ts logs, `health()` agrees with /api/health,
 * `reload` without NTS is harmless, and `close` is safe twice.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceContext, systemClock, type Clock } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { createTimesvcApp } from '../../src/app.ts';
import { configSchema } from '../../src/config.ts';
import { queryServer } from '../../src/io/query.ts';
import { JWT_SECRET, PASSWORDS, testUsers } from '../helpers/web.ts';

test('app.ts: the context clock reaches the clock manager; describe(), health() and close as main.ts uses them', async () => {
  const timers: number[] = [];
  // The system clock, 1 h ahead, counting the timers set through it.
  const clock: Clock = {
    now: () => systemClock.now() + 3_600_000,
    monotonicMs: () => systemClock.monotonicMs(),
    monotonicNs: () => systemClock.monotonicNs(),
    setTimer: (ms, fn) => {
      timers.push(ms);
      return systemClock.setTimer(ms, fn);
    },
  };
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', local_stratum: true, stratum: 9 },
    web: { port: 0, bind_address: '127.0.0.1', jwt_secret: JWT_SECRET, users: await testUsers() },
  });
  const app = await createTimesvcApp(serviceContext(config, { clock }));
  try {
    await app.start();
    assert.ok(timers.length > 0, 'the clock manager runs on the context clock');
    const described = app.describe();
    const ntp = described['ntp'] as { family: string; address: string; port: number }[];
    assert.equal(ntp[0]?.address, '127.0.0.1');
    assert.match(String(described['web']), /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(described['localStratum'], 9);
    assert.deepEqual(described['peers'], []);
    await waitFor(() => app.timesvc.manager.state === 'LOCKED', { timeoutMs: 15_000, intervalMs: 50 });
    assert.equal((await queryServer('127.0.0.1', ntp[0]?.port ?? 0)).stratum, 9);
    const res = await fetch(`${String(described['web'])}/api/health`);
    const body = (await res.json()) as { status: string; clock_state: string };
    assert.equal(app.health().status, body.status);
    assert.equal(app.health()['clock_state'], 'LOCKED');
    // Uptime is counted on the context's wall clock (1 h ahead) from start to now, in the API and the metrics.
    const login = await app.timesvc.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { username: 'viewer', password: PASSWORDS.viewer },
    });
    const { token } = login.json<{ token: string }>();
    const status = (
      await app.timesvc.app.inject({ url: '/api/status', headers: { authorization: `Bearer ${token}` } })
    ).json<{ uptime_seconds: number }>();
    assert.ok(status.uptime_seconds >= 0 && status.uptime_seconds < 600, `${status.uptime_seconds} s`);
    const uptime = /^timesvc_uptime_seconds (\S+)$/m.exec(await app.timesvc.registry.metrics());
    assert.ok(uptime && Number(uptime[1]) >= 0 && Number(uptime[1]) < 600, uptime?.[0]);
    app.reload('test');
  } finally {
    await app.close();
    await app.close();
  }
});
