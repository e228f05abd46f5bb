import { median } from './discipline.ts';
import type { ReferenceSample } from './reference-source.ts';

/**
 * Statistics over a source's current run of samples (consecutive samples with no silence longer than its
 * gap limit): the delay gate and the jitter the discipline and selection use.
 */

/** Samples with a delay above this are left out of the estimate: three times the run's lowest + 500 µs. */
export function delayGate(run: readonly ReferenceSample[]): number {
  let min = Number.POSITIVE_INFINITY;
  for (const s of run.slice(-8)) min = Math.min(min, s.delayS);
  return Number.isFinite(min) ? 3 * min + 500e-6 : Number.POSITIVE_INFINITY;
}

/**
 * Jitter of a run of samples (the noise of its offsets; RFC 5905 §10 peer jitter plays this role), over the
 * current run only so that samples from before a silence do not count. Estimated robustly, from the median
 * of the successive differences, so that a level change or a single spike does not pass for noise (which
 * would widen the spike gate and the root distance exactly when they matter).
 */
export function runJitter(run: readonly ReferenceSample[], floorS: number): number {
  // The last 8 samples, read in place (no copy: this runs on every sample, once a second with a GPSDO).
  const from = Math.max(0, run.length - 8);
  if (run.length - from < 2) return Math.max(floorS, run[from]?.jitterS ?? floorS);
  const diffs: number[] = [];
  for (let i = from + 1; i < run.length; i++) {
    diffs.push(Math.abs((run[i]?.offsetS ?? 0) - (run[i - 1]?.offsetS ?? 0)));
  }
  return Math.max(floorS, (1.4826 * median(diffs)) / Math.SQRT2);
}
