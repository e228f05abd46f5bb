/**
 * The few samples the status service reads from a service's /metrics, from the Prometheus text exposition
 * format (https://prometheus.io/docs/instrumenting/exposition_formats/): `name{label="v",...} value`.
 * Only the names asked for are kept; comment lines, timestamps and malformed lines are skipped.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseSamples(text: string, names: ReadonlySet<string>): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m || !names.has(m[1] ?? '')) continue;
    const value = Number(m[3]);
    if (Number.isNaN(value) && m[3] !== 'NaN') continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL))
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1] ?? '', labels, value });
  }
  return out;
}

/** The value of the first sample of `name` whose labels include `match`. */
export function sampleValue(
  samples: readonly Sample[],
  name: string,
  match: Record<string, string> = {},
): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    ?.value;
}
