import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, systemClock } from '../../src/clock.ts';
import { AppError, defineErrors, errorFactory } from '../../src/errors.ts';
import { createHttpApp } from '../../src/http.ts';
import { silentLogger } from '../../src/logger.ts';
import { createMetricsRegistry, metricValue } from '../../src/metrics.ts';
import { Counter } from 'prom-client';

test('ManualClock fires timers in due order, each seeing its own due time', () => {
  const clock = new ManualClock(1_000_000);
  const seen: [string, number][] = [];
  clock.setTimer(300, () => seen.push(['c', clock.now()]));
  clock.setTimer(100, () => {
    seen.push(['a', clock.now()]);
    clock.setTimer(50, () => seen.push(['a2', clock.now()]));
  });
  const cancelled = clock.setTimer(200, () => seen.push(['b', clock.now()]));
  cancelled.cancel();
  clock.advance(250);
  assert.deepEqual(seen, [
    ['a', 1_000_100],
    ['a2', 1_000_150],
  ]);
  assert.equal(clock.pendingTimers, 1);
  clock.advance(50);
  assert.deepEqual(seen.at(-1), ['c', 1_000_300]);
  assert.equal(clock.monotonicMs(), 300);
});

test('ManualClock wall steps do not move monotonic time', () => {
  const clock = new ManualClock(0);
  clock.stepWall(-5000);
  assert.equal(clock.now(), -5000);
  assert.equal(clock.monotonicMs(), 0);
});

test('systemClock monotonic time does not go backwards and timers fire', async () => {
  const a = systemClock.monotonicNs();
  const keepAlive = setTimeout(() => undefined, 1000); // systemClock timers are unref'd
  await new Promise<void>((resolve) => systemClock.setTimer(5, resolve));
  clearTimeout(keepAlive);
  assert.ok(systemClock.monotonicNs() > a);
});

test('error catalogue: factory gives the status and the {error, message} body; the HTTP app sends it', async () => {
  const catalogue = defineErrors({ THING_MISSING: { status: 404, message: 'no such thing' } });
  const fail = errorFactory(catalogue);
  const err = fail('THING_MISSING', undefined, { headers: { 'Retry-After': '3' } });
  assert.ok(err instanceof AppError);
  assert.equal(err.status, 404);
  assert.deepEqual(err.toBody(), { error: 'THING_MISSING', message: 'no such thing' });

  const app = createHttpApp({ logger: silentLogger() });
  app.get('/x', () => {
    throw err;
  });
  app.get('/boom', () => {
    throw new Error('secret internals');
  });
  const res = await app.inject({ method: 'GET', url: '/x' });
  assert.equal(res.statusCode, 404);
  assert.equal(res.headers['retry-after'], '3');
  assert.deepEqual(res.json(), { error: 'THING_MISSING', message: 'no such thing' });
  const boom = await app.inject({ method: 'GET', url: '/boom' });
  assert.equal(boom.statusCode, 500);
  assert.deepEqual(boom.json(), { error: 'SERVER_ERROR', message: 'internal server error' });
  await app.close();
});

test('metrics registries are per instance', async () => {
  const a = createMetricsRegistry();
  const b = createMetricsRegistry();
  const ca = new Counter({ name: 'x_total', help: 'x', registers: [a], labelNames: ['k'] });
  new Counter({ name: 'x_total', help: 'x', registers: [b] });
  ca.inc({ k: 'v' }, 3);
  assert.equal(await metricValue(a, 'x_total', { k: 'v' }), 3);
  assert.equal(await metricValue(b, 'x_total'), 0);
  assert.equal(await metricValue(b, 'y_total'), undefined);
});
