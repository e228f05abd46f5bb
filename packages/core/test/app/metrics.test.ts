// core's metrics.ts takes prom-client's classes from their own files, not the package index (docs/at-rest.md):
// they must be the very classes the index exports, and the default metrics must still come when asked for.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as promClient from 'prom-client';
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  createMetricsRegistry,
  metricValue,
} from '../../src/metrics.ts';

test("the classes are prom-client's own (the index's exports)", () => {
  assert.equal(Registry, promClient.Registry);
  assert.equal(Counter, promClient.Counter);
  assert.equal(Gauge, promClient.Gauge);
  assert.equal(Histogram, promClient.Histogram);
});

test('a registry counts, and has the default metrics only when asked for', async () => {
  const plain = createMetricsRegistry();
  const counter = new Counter({ name: 'things_total', help: 'things', registers: [plain] });
  counter.inc(3);
  assert.equal(await metricValue(plain, 'things_total'), 3);
  assert.equal(plain.getSingleMetric('process_cpu_seconds_total'), undefined);

  const withDefaults = createMetricsRegistry({ defaultMetrics: true, prefix: 'svc_' });
  assert.ok(withDefaults.getSingleMetric('svc_process_cpu_seconds_total'));
  assert.match(await withDefaults.metrics(), /^svc_nodejs_heap_size_used_bytes \d/m);
});
