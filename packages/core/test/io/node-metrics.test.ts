/**
 * registerNodeMetrics (src/node-metrics.ts): prom-client's default set, every metric of it, with the
 * event-loop-lag histogram running only while asked (docs/at-rest.md). The histogram is a libuv timer, so
 * this is the io tier.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { collectDefaultMetrics } from 'prom-client';
import { Registry, metricValue, registerNodeMetrics } from '../../src/index.ts';

const HISTOGRAM_GAUGES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map(
  (s) => `nodejs_eventloop_lag_${s}_seconds`,
);

function names(registry: Registry): Set<string> {
  return new Set(registry.getMetricsAsArray().map((m) => m.name));
}

test("every metric of prom-client's default set is registered, the eight lag gauges among them", () => {
  const theirs = new Registry();
  collectDefaultMetrics({ register: theirs, eventLoopMonitoringPrecision: 1_000_000 });
  const ours = new Registry();
  const node = registerNodeMetrics(ours);
  try {
    const got = names(ours);
    for (const name of names(theirs)) assert.ok(got.has(name), `${name} missing`);
    for (const name of ['nodejs_eventloop_lag_seconds', ...HISTOGRAM_GAUGES]) assert.ok(got.has(name), name);
    assert.equal(got.size, names(theirs).size, 'no metric beyond the default set');
  } finally {
    node.close();
    theirs.clear();
  }
});

test('the lag histogram samples only while active; stopped for a whole interval its gauges read 0', async () => {
  const registry = new Registry();
  const node = registerNodeMetrics(registry);
  try {
    assert.equal(node.active, false, 'stopped from the start');
    await registry.metrics();
    await registry.metrics(); // a whole interval stopped
    for (const g of HISTOGRAM_GAUGES) assert.equal(await metricValue(registry, g), 0, g);

    node.setActive(true);
    assert.equal(node.active, true);
    let max = 0;
    for (let i = 0; i < 200 && max === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      await registry.metrics();
      max = (await metricValue(registry, 'nodejs_eventloop_lag_max_seconds')) ?? 0;
    }
    assert.ok(max > 0, 'samples taken while running');

    node.setActive(false);
    assert.equal(node.active, false);
    await registry.metrics();
    await registry.metrics();
    for (const g of HISTOGRAM_GAUGES) assert.equal(await metricValue(registry, g), 0, g);

    node.close();
    node.setActive(true);
    assert.equal(node.active, false, 'closed for good: setActive no longer starts it');
  } finally {
    node.close();
  }
});
