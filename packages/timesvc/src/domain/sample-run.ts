import type { ReferenceSample } from './reference-source.ts';

/**
 * Statistics over a source's current run of samples (consecutive samples with no silence longer than its
 * gap limit): the delay gate and the jitter the discipline and selection use.
 */

/** runJitter's differences (at most 7), kept. */
const DIFFS = new Float64Array(7);

/**
 * Samples with a delay above this are left out of the estimate: three times the lowest of the run's last 8
 * (those before `end`, read in place) + 500 µs.
 */
export function delayGate(run: readonly ReferenceSample[], end = run.length): number {
  let min = Number.POSITIVE_INFINITY;
  for (let i = Math.max(0, end - 8); i < end; i++) min = Math.min(min, run[i]?.delayS ?? 0);
  return Number.isFinite(min) ? 3 * min + 500e-6 : Number.POSITIVE_INFINITY;
}

/**
 * Jitter of a run of samples (the noise of its offsets; RFC 5905 §10 peer jitter plays this role), over the
 * current run only so that samples from before a silence do not count. Estimated robustly, from the median
 * of the successive differences, so that a level change or a single spike does not pass for noise (which
 * would widen the spike gate and the root distance exactly when they matter).
 */
export function runJitter(run: readonly ReferenceSample[], floorS: number, end = run.length): number {
  // The last 8 samples before `end`, read in place (no copy: this runs on every sample, once a second with
  // a GPSDO), their differences sorted in a kept array (an insertion sort of at most 7): median's answer.
  const from = Math.max(0, end - 8);
  if (end - from < 2) return Math.max(floorS, (from < end ? run[from]?.jitterS : undefined) ?? floorS);
  const diffs = DIFFS;
  const n = end - from - 1;
  for (let k = 0; k < n; k++) {
    const d = Math.abs((run[from + k + 1]?.offsetS ?? 0) - (run[from + k]?.offsetS ?? 0));
    let j = k;
    for (; j > 0 && (diffs[j - 1] ?? 0) > d; j--) diffs[j] = diffs[j - 1] ?? 0;
    diffs[j] = d;
  }
  const mid = n >> 1;
  const med = n % 2 ? (diffs[mid] ?? 0) : ((diffs[mid - 1] ?? 0) + (diffs[mid] ?? 0)) / 2;
  return Math.max(floorS, (1.4826 * med) / Math.SQRT2);
}
