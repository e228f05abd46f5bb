import { correctionAt, leapAt, type Correction } from './correction.ts';

/**
 * sourcestats-style history per reference (what `chronyc sourcestats` shows). Each source's samples are
 * kept as offsets against the raw clock, and every report compares them with the served clock's *current*
 * correction line (its phase with the slew still to come, and its frequency), extended over the whole
 * history: as chronyd slews its stored samples whenever it corrects the clock (sourcestats.c
 * SST_SlewSamples), so the line through them is the source's rate against the clock as it is corrected
 * now. A least-squares line through these residuals gives `frequencyPpm` (the residual frequency,
 * ≈ 0 when the discipline follows the source), `skewPpm` its standard error, `offsetS` the line at the
 * newest sample, `stddevS` the residuals' standard deviation and `runs` the number of runs of residuals of
 * one sign (chronyc's NR; regress.c). Signs are timesvc's: source − served clock (docs/cli.md turns them
 * into chronyc's). Bounded to `maxSamples` per source and to the sources seen in the last `update`.
 */
export interface SourceStats {
  samples: number;
  runs: number;
  spanS: number;
  frequencyPpm: number | null;
  skewPpm: number | null;
  offsetS: number | null;
  stddevS: number | null;
}

interface RawSample {
  atMs: number;
  /** Source − raw clock, seconds. */
  rawS: number;
}

/** The served clock's intended line at tMs: phase plus the slew still to come, plus frequency, seconds. */
export function correctionLine(c: Correction, tMs: number): number {
  return c.phaseS + c.slewS + (c.freq * (tMs - c.t0Ms)) / 1000;
}

export class SourceStatsTracker {
  readonly #history = new Map<string, RawSample[]>();
  readonly #max: number;
  #correction: Correction | undefined;

  constructor(maxSamples = 64) {
    this.#max = maxSamples;
  }

  /**
   * Feed the latest sample of each source (monotonic ms; `offsetS` = source − served clock at the
   * sample, as the clock manager's snapshot gives it) with the served clock's correction at that moment.
   * Repeated samples are ignored.
   */
  update(
    sources: readonly { id: string; lastSampleMs: number | undefined; offsetS: number | undefined }[],
    correction: Correction,
  ): void {
    this.#correction = correction;
    const seen = new Set<string>();
    for (const s of sources) {
      seen.add(s.id);
      if (s.lastSampleMs === undefined || s.offsetS === undefined || !Number.isFinite(s.offsetS)) continue;
      let h = this.#history.get(s.id);
      if (!h) this.#history.set(s.id, (h = []));
      if (h.length && (h[h.length - 1]?.atMs ?? 0) >= s.lastSampleMs) continue;
      // The snapshot's offset is against the served clock without its leap terms (served-correction.ts).
      const served = correctionAt(correction, s.lastSampleMs) - leapAt(correction, s.lastSampleMs);
      h.push({ atMs: s.lastSampleMs, rawS: s.offsetS + served });
      if (h.length > this.#max) h.shift();
    }
    for (const id of this.#history.keys()) if (!seen.has(id)) this.#history.delete(id);
  }

  stats(id: string): SourceStats {
    const c = this.#correction;
    const h = this.#history.get(id) ?? [];
    return sourceStats(
      h.map((s) => ({ atMs: s.atMs, offsetS: s.rawS - (c ? correctionLine(c, s.atMs) : 0) })),
    );
  }
}

/** Runs of residuals with the same sign (chrony regress.c n_runs_from_residuals). */
export function signRuns(residuals: readonly number[]): number {
  let runs = residuals.length ? 1 : 0;
  for (let i = 1; i < residuals.length; i++) {
    if ((residuals[i] ?? 0) < 0 !== (residuals[i - 1] ?? 0) < 0) runs++;
  }
  return runs;
}

export function sourceStats(h: readonly { atMs: number; offsetS: number }[]): SourceStats {
  const n = h.length;
  const first = h[0];
  const last = h[n - 1];
  const spanS = first && last ? (last.atMs - first.atMs) / 1000 : 0;
  const empty = { samples: n, spanS, frequencyPpm: null, skewPpm: null };
  if (n === 0) return { ...empty, runs: 0, offsetS: null, stddevS: null };
  const t0 = last?.atMs ?? 0;
  const xs = h.map((s) => (s.atMs - t0) / 1000);
  const ys = h.map((s) => s.offsetS);
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  if (n < 3 || spanS <= 0) {
    const sd = n > 1 ? Math.sqrt(ys.reduce((a, y) => a + (y - my) ** 2, 0) / (n - 1)) : null;
    return { ...empty, runs: signRuns(ys.map((y) => y - my)), offsetS: last?.offsetS ?? null, stddevS: sd };
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
  const residuals = ys.map((y, i) => y - (intercept + slope * (xs[i] ?? 0)));
  const sd = Math.sqrt(residuals.reduce((a, r) => a + r * r, 0) / (n - 2));
  return {
    samples: n,
    runs: signRuns(residuals),
    spanS,
    frequencyPpm: slope * 1e6,
    skewPpm: (sd / Math.sqrt(sxx)) * 1e6,
    offsetS: intercept,
    stddevS: sd,
  };
}
