import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assessHealth } from '../../src/domain/health.ts';
import { healthStatus } from '../../src/io/http-app.ts';
import { startService } from '../helpers/service.ts';

test('health reflects the clock: healthy only when LOCKED or in HOLDOVER within the bound', () => {
  const h = (state: Parameters<typeof healthStatus>[0]['state'], estimatedErrorS: number): string =>
    healthStatus(
      { state, estimatedErrorS, selected: undefined, hostClockSteps: 0, kernelStampsReplaced: 0 },
      0.01,
    );
  assert.equal(h('LOCKED', 0.0002), 'healthy');
  assert.equal(h('HOLDOVER', 0.004), 'healthy');
  assert.equal(h('HOLDOVER', 0.02), 'degraded', 'a long holdover is still served, but not healthy');
  assert.equal(h('SYNCING', 0.015), 'degraded', 'slewing to a new estimate');
  assert.equal(h('SYNCING', Number.POSITIVE_INFINITY), 'unsynchronised');
  assert.equal(h('FAULT', Number.POSITIVE_INFINITY), 'unsynchronised');
  assert.equal(h('INIT', Number.POSITIVE_INFINITY), 'unsynchronised');
});

test('health means accuracy: degraded beyond the error limit, unhealthy while a reference disagrees, reason named', () => {
  const limits = { maxErrorS: 0.01, holdoverMaxErrorS: 0.02 };
  const locked = assessHealth({ state: 'LOCKED', estimatedErrorS: 0.0004 }, limits);
  assert.equal(locked.status, 'healthy');
  const wide = assessHealth({ state: 'LOCKED', estimatedErrorS: 0.0309 }, limits);
  assert.equal(wide.status, 'degraded', 'LOCKED but advertising 30.9 ms');
  assert.match(wide.reason, /estimated error 30\.900 ms exceeds 10\.000 ms/);
  assert.equal(assessHealth({ state: 'HOLDOVER', estimatedErrorS: 0.015 }, limits).status, 'healthy');
  assert.equal(assessHealth({ state: 'HOLDOVER', estimatedErrorS: 0.025 }, limits).status, 'degraded');
  const disagree = assessHealth(
    {
      state: 'LOCKED',
      estimatedErrorS: 1.0002,
      nowMs: 50_000,
      disagreements: [
        { source: 'GPSDO:SerialPPS', offsetS: -1.000001, sinceMs: 40_000, stepoutEndsMs: 340_000 },
      ],
    },
    limits,
  );
  assert.equal(disagree.status, 'unhealthy');
  assert.match(disagree.reason, /GPSDO:SerialPPS is -1\.000001 s from the served clock/);
  assert.match(disagree.reason, /stepout in 290 s/);
  assert.equal(
    assessHealth({ state: 'SYNCING', estimatedErrorS: Number.POSITIVE_INFINITY }, limits).status,
    'unsynchronised',
  );
});

test('/api/health answers 503 while unsynchronised (an upstream that never answers), 200 in local stratum', async () => {
  const dead = await startService({ upstream_peers: [{ address: '127.0.0.1:9', minpoll: 0, maxpoll: 0 }] });
  const local = await startService({ local_stratum: true });
  try {
    const res = await dead.service.app.inject({ method: 'GET', url: '/api/health' });
    assert.equal(res.statusCode, 503);
    const body = res.json<{ status: string; clock_state: string; estimated_error_s: number | null }>();
    assert.equal(body.status, 'unsynchronised');
    assert.equal(body.clock_state, 'init');
    assert.equal(body.estimated_error_s, null);
    await new Promise((r) => setTimeout(r, 1200));
    const ok = await local.service.app.inject({ method: 'GET', url: '/api/health' });
    assert.equal(ok.statusCode, 200, ok.body);
    const b = ok.json<{ status: string; clock_state: string; estimated_error_s: number }>();
    assert.equal(b.status, 'healthy');
    assert.equal(b.clock_state, 'locked');
    assert.ok(b.estimated_error_s >= 0 && b.estimated_error_s < 0.0005, ok.body);
  } finally {
    await dead.service.close();
    await local.service.close();
  }
});
