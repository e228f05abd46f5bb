import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

/*
 * prom-client's four classes the toolkit uses, each from its own file. The package's index also loads every
 * default metric (one of them loads @opentelemetry/api, 51 modules), Summary, the Pushgateway and the
 * cluster aggregator at start, in every service, which only the services asking for the default metrics
 * need (docs/at-rest.md). The files are the ones the index exports (prom-client 15: `lib/registry.js`,
 * `lib/counter.js`, ...), so the classes are the same objects either way; the core test
 * test/app/metrics.test.ts checks that.
 */
// Each required by name with the module's own `createRequire`, written out in full: the start file bundles
// a package required that way (scripts/bundle-start.mjs, docs/at-rest.md "One start file").
export const Registry = createRequire(import.meta.url)(
  'prom-client/lib/registry',
) as typeof PromClient.Registry;
export type Registry<T extends PromClient.RegistryContentType = PromClient.PrometheusContentType> =
  PromClient.Registry<T>;
export const Counter = createRequire(import.meta.url)('prom-client/lib/counter') as typeof PromClient.Counter;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export const Gauge = createRequire(import.meta.url)('prom-client/lib/gauge') as typeof PromClient.Gauge;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export const Histogram = createRequire(import.meta.url)(
  'prom-client/lib/histogram',
) as typeof PromClient.Histogram;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;

/** prom-client's default metrics, loaded by the first registry that asks for them. */
function collectDefaultMetrics(
  config: PromClient.DefaultMetricsCollectorConfiguration<PromClient.PrometheusContentType>,
): void {
  (
    createRequire(import.meta.url)(
      'prom-client/lib/defaultMetrics',
    ) as typeof PromClient.collectDefaultMetrics
  )(config);
}

/**
 * One registry per service instance (never prom-client's global one), so two services or two test
 * servers in one process do not share counters.
 */
export function createMetricsRegistry(options: { defaultMetrics?: boolean; prefix?: string } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics) {
    collectDefaultMetrics(
      options.prefix === undefined ? { register: registry } : { register: registry, prefix: options.prefix },
    );
  }
  return registry;
}

/** Read one sample of a metric from a registry (tests and health pages). */
export async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return undefined;
  const data = await metric.get();
  const sample = data.values.find((v) =>
    Object.entries(labels).every(([k, val]) => String((v.labels as Record<string, unknown>)[k]) === val),
  );
  return sample?.value;
}
