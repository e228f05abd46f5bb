/**
 * sourcestats-style history per reference (what `chronyc sourcestats` shows): the last samples of each
 * source's offset against the served clock, and a least-squares line through them. `frequencyPpm` is the
 * slope (the source's rate against the served clock), `skewPpm` its standard error, `stddevS` the
 * standard deviation of the residuals, `spanS` the time the samples cover. Bounded to `maxSamples` per
 * source and to the sources seen in the last `update`.
 */
export interface SourceStats {
  samples: number;
  spanS: number;
  frequencyPpm: number | null;
  skewPpm: number | null;
  offsetS: number | null;
  stddevS: number | null;
}

export class SourceStatsTracker {
  readonly #history = new Map<string, { atMs: number; offsetS: number }[]>();
  readonly #max: number;

  constructor(maxSamples = 64) {
    this.#max = maxSamples;
  }

  /** Feed the latest sample of each source (monotonic ms); repeated samples are ignored. */
  update(
    sources: readonly { id: string; lastSampleMs: number | undefined; offsetS: number | undefined }[],
  ): void {
    const seen = new Set<string>();
    for (const s of sources) {
      seen.add(s.id);
      if (s.lastSampleMs === undefined || s.offsetS === undefined || !Number.isFinite(s.offsetS)) continue;
      let h = this.#history.get(s.id);
      if (!h) this.#history.set(s.id, (h = []));
      if (h.length && (h[h.length - 1]?.atMs ?? 0) >= s.lastSampleMs) continue;
      h.push({ atMs: s.lastSampleMs, offsetS: s.offsetS });
      if (h.length > this.#max) h.shift();
    }
    for (const id of this.#history.keys()) if (!seen.has(id)) this.#history.delete(id);
  }

  stats(id: string): SourceStats {
    return sourceStats(this.#history.get(id) ?? []);
  }
}

export function sourceStats(h: readonly { atMs: number; offsetS: number }[]): SourceStats {
  const n = h.length;
  const first = h[0];
  const last = h[n - 1];
  const spanS = first && last ? (last.atMs - first.atMs) / 1000 : 0;
  if (n === 0) return { samples: 0, spanS, frequencyPpm: null, skewPpm: null, offsetS: null, stddevS: null };
  const t0 = last?.atMs ?? 0;
  const xs = h.map((s) => (s.atMs - t0) / 1000);
  const ys = h.map((s) => s.offsetS);
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  if (n < 3 || spanS <= 0) {
    const sd = n > 1 ? Math.sqrt(ys.reduce((a, y) => a + (y - my) ** 2, 0) / (n - 1)) : null;
    return {
      samples: n,
      spanS,
      frequencyPpm: null,
      skewPpm: null,
      offsetS: last?.offsetS ?? null,
      stddevS: sd,
    };
  }
  let sxx = 0;
  let sxy = 0;
  for (let i = 0; i < n; i++) {
    const dx = (xs[i] ?? 0) - mx;
    sxx += dx * dx;
    sxy += dx * ((ys[i] ?? 0) - my);
  }
  const slope = sxy / sxx;
  const intercept = my - slope * mx;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += ((ys[i] ?? 0) - (intercept + slope * (xs[i] ?? 0))) ** 2;
  const sd = Math.sqrt(ss / (n - 2));
  return {
    samples: n,
    spanS,
    frequencyPpm: slope * 1e6,
    skewPpm: (sd / Math.sqrt(sxx)) * 1e6,
    offsetS: intercept,
    stddevS: sd,
  };
}
