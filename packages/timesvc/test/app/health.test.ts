import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assessHealth } from '../../src/domain/health.ts';
import { healthStatus } from '../../src/io/http-app.ts';

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
