/**
 * Node's default metrics (prom-client's set) with an event-loop-lag histogram that runs only while the
 * service says there is work a stall could delay (docs/at-rest.md at the repository root).
 *
 * prom-client's default set samples `perf_hooks.monitorEventLoopDelay` every 10 ms from start to exit: a
 * libuv timer that wakes an idle service 100 times a second (about 10 ms of CPU per second at rest, measured
 * in docs/at-rest.md). Here every other default metric is prom-client's own (its `collectDefaultMetrics`
 * list, module by module), and the eight `nodejs_eventloop_lag_*` gauges keep their names, help texts and
 * meaning with one difference: the histogram behind the min/max/mean/stddev/p50/p90/p99 gauges is enabled
 * only while `setActive(true)` and disabled otherwise. A scrape reports the samples taken since the previous
 * scrape, as prom-client does; when the histogram took none (it was stopped the whole interval) those seven
 * gauges read 0. `nodejs_eventloop_lag_seconds` is measured at every scrape, as before (a `setImmediate`
 * round trip, reported by the next scrape).
 */
import { createRequire } from 'node:module';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from './metrics.ts';

/** prom-client's default sampling period of the histogram (`eventLoopMonitoringPrecision`), in ms. */
export const LAG_RESOLUTION_MS = 10;

/** prom-client's name for its event-loop-lag default metric (lib/defaultMetrics.js). */
const PROM_LAG_METRIC = 'eventLoopLag';

type DefaultMetric = (registry: Registry, config: Record<string, unknown>) => void;

/*
 * prom-client's files, not its index (which loads every default metric and @opentelemetry/api): metrics.ts.
 * Each is required by name with the module's own `createRequire`, written out in full, so the start file
 * bundles them (scripts/bundle-start.mjs; loaded by Node, they cost the bridge's start about 20 ms).
 */
const DEFAULT_METRICS: Readonly<Record<string, () => DefaultMetric>> = {
  processCpuTotal: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processCpuTotal') as DefaultMetric,
  processStartTime: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processStartTime') as DefaultMetric,
  osMemoryHeap: () => createRequire(import.meta.url)('prom-client/lib/metrics/osMemoryHeap') as DefaultMetric,
  processOpenFileDescriptors: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processOpenFileDescriptors') as DefaultMetric,
  processMaxFileDescriptors: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processMaxFileDescriptors') as DefaultMetric,
  processResources: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processResources') as DefaultMetric,
  processHandles: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processHandles') as DefaultMetric,
  processRequests: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/processRequests') as DefaultMetric,
  heapSizeAndUsed: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/heapSizeAndUsed') as DefaultMetric,
  heapSpacesSizeAndUsed: () =>
    createRequire(import.meta.url)('prom-client/lib/metrics/heapSpacesSizeAndUsed') as DefaultMetric,
  version: () => createRequire(import.meta.url)('prom-client/lib/metrics/version') as DefaultMetric,
  gc: () => createRequire(import.meta.url)('prom-client/lib/metrics/gc') as DefaultMetric,
};

/** prom-client's list of its default metrics (`metricsList`, lib/defaultMetrics.js), its lag metric too. */
function promClientDefaultMetrics(): readonly string[] {
  return (createRequire(import.meta.url)('prom-client/lib/defaultMetrics') as { metricsList: string[] })
    .metricsList;
}

/**
 * prom-client's default metrics but its event-loop lag, registered in `registry` (prom-client 15 has no
 * option to leave one out; each is a module of its own under lib/metrics, listed in `metricsList`). A name
 * prom-client lists that is not in DEFAULT_METRICS (a newer prom-client) is refused, not skipped: core's
 * test/io/node-metrics.test.ts registers the whole set beside prom-client's own.
 */
function registerDefaultsButLag(registry: Registry): void {
  for (const name of promClientDefaultMetrics()) {
    if (name === PROM_LAG_METRIC) continue;
    const load = DEFAULT_METRICS[name];
    if (load === undefined)
      throw new Error(`prom-client's default metric ${name} is not in core's node-metrics.ts`);
    load()(registry, {});
  }
}

export interface NodeMetrics {
  /** Run the histogram (true) or stop it (false); idempotent. */
  setActive(active: boolean): void;
  readonly active: boolean;
  /** Stop the histogram for good (the service closing). */
  close(): void;
}

/** Register Node's default metrics in `registry`, the lag histogram stopped until `setActive(true)`. */
export function registerNodeMetrics(registry: Registry): NodeMetrics {
  registerDefaultsButLag(registry);
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  let active = false;
  const seconds = (ns: number): number => ns / 1e9;
  const gauge = (name: string, help: string, aggregator: 'min' | 'max' | 'average'): Gauge =>
    new Gauge({ name, help, registers: [registry], aggregator });
  const lag = new Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of event loop in seconds.',
    registers: [registry],
    aggregator: 'average',
    collect() {
      const start = process.hrtime.bigint();
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / 1e9));
      const any = histogram.count > 0;
      lagMin.set(any ? seconds(histogram.min) : 0);
      lagMax.set(any ? seconds(histogram.max) : 0);
      lagMean.set(any ? seconds(histogram.mean) : 0);
      lagStddev.set(any ? seconds(histogram.stddev) : 0);
      lagP50.set(any ? seconds(histogram.percentile(50)) : 0);
      lagP90.set(any ? seconds(histogram.percentile(90)) : 0);
      lagP99.set(any ? seconds(histogram.percentile(99)) : 0);
      histogram.reset();
    },
  });
  const lagMin = gauge('nodejs_eventloop_lag_min_seconds', 'The minimum recorded event loop delay.', 'min');
  const lagMax = gauge('nodejs_eventloop_lag_max_seconds', 'The maximum recorded event loop delay.', 'max');
  const lagMean = gauge(
    'nodejs_eventloop_lag_mean_seconds',
    'The mean of the recorded event loop delays.',
    'average',
  );
  const lagStddev = gauge(
    'nodejs_eventloop_lag_stddev_seconds',
    'The standard deviation of the recorded event loop delays.',
    'average',
  );
  const lagP50 = gauge(
    'nodejs_eventloop_lag_p50_seconds',
    'The 50th percentile of the recorded event loop delays.',
    'average',
  );
  const lagP90 = gauge(
    'nodejs_eventloop_lag_p90_seconds',
    'The 90th percentile of the recorded event loop delays.',
    'average',
  );
  const lagP99 = gauge(
    'nodejs_eventloop_lag_p99_seconds',
    'The 99th percentile of the recorded event loop delays.',
    'average',
  );
  let closed = false;
  return {
    get active() {
      return active;
    },
    setActive(next) {
      if (closed || next === active) return;
      active = next;
      if (next) histogram.enable();
      else histogram.disable();
    },
    close() {
      closed = true;
      active = false;
      histogram.disable();
    },
  };
}
