import { Registry, collectDefaultMetrics } from 'prom-client';

export { Registry, Counter, Gauge, Histogram } from 'prom-client';

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
