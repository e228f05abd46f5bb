/**
 * The bridge's use of core's registerNodeMetrics (core's test/io/node-metrics.test.ts has the metrics
 * themselves): the event-loop-lag histogram runs only while a client is connected or a device link is up
 * (README "Logs and metrics"; docs/at-rest.md at the repository root).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { metricValue, silentLogger } from '@broadcast-ops/core';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { startBridge } from '../../src/app.ts';
import { createBridgeMetrics } from '../../src/io/observability.ts';
import { testConfig } from '../helpers.ts';

const HISTOGRAM_GAUGES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map(
  (s) => `nodejs_eventloop_lag_${s}_seconds`,
);

test('the lag histogram runs while a device link is up and stops at rest; stopped for a whole interval its gauges read 0', async () => {
  const metrics = createBridgeMetrics();
  try {
    assert.equal(metrics.eventLoopLag.active, false, 'at rest from the start');
    await metrics.registry.metrics();
    await metrics.registry.metrics(); // a whole interval stopped
    for (const g of HISTOGRAM_GAUGES) assert.equal(await metricValue(metrics.registry, g), 0, g);

    metrics.adapterState('companion', true);
    assert.equal(metrics.eventLoopLag.active, true, 'a link up starts it');
    // Samples every 10 ms while enabled: wait for some, with a bound. (A scrape sets all eight gauges from
    // the collect of `nodejs_eventloop_lag_seconds`, as prom-client's does.)
    let max = 0;
    for (let i = 0; i < 200 && max === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      await metrics.registry.metrics();
      max = (await metricValue(metrics.registry, 'nodejs_eventloop_lag_max_seconds')) ?? 0;
    }
    assert.ok(max > 0, 'samples taken while running');

    metrics.adapterState('companion', false);
    assert.equal(metrics.eventLoopLag.active, false, 'the last link down stops it');
    await metrics.registry.metrics();
    await metrics.registry.metrics();
    for (const g of HISTOGRAM_GAUGES) assert.equal(await metricValue(metrics.registry, g), 0, g);
  } finally {
    metrics.close();
  }
});

test('a bridge with no adapter and no client keeps the lag histogram stopped; a client connected starts it, its leaving stops it', async () => {
  const bridge = await startBridge({ config: testConfig(), logger: silentLogger(), adapters: [] });
  let client: BridgeClient | undefined;
  try {
    assert.equal(bridge.metrics.eventLoopLag.active, false);
    client = new BridgeClient({ url: bridge.clientUrl, name: 'lag', reconnect: { enabled: false } });
    await client.connect();
    assert.equal(bridge.metrics.eventLoopLag.active, true, 'a connected client starts it');
    await client.close();
    client = undefined;
    for (let i = 0; i < 200 && bridge.metrics.eventLoopLag.active; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(bridge.metrics.eventLoopLag.active, false, 'the last client gone stops it');
  } finally {
    await client?.close();
    await bridge.close();
  }
  assert.equal(bridge.metrics.eventLoopLag.active, false, 'close stops it');
});
