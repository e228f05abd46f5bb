/**
 * The median filter a GPSDO's samples go through before the clock manager sees them (docs/gpsdo.md "Samples:
 * a median filter per poll"), as chrony's refclock driver filters a reference clock's samples: every sample
 * is stored, and once per poll the stored ones become ONE sample. The rules are chrony's `samplefilt.c`
 * (`SPF_AccumulateSample`, `select_samples`, `combine_selected_samples`, as `refclock.c` creates the filter:
 * `SPF_CreateInstance(1, filter_length, max_dispersion, 0.6)`):
 *
 * - at most `length` samples are kept (chrony's `filter` option, default 64); when more arrive between polls
 *   the oldest are overwritten; a sample not later than the previous one is refused;
 * - with more than 4 samples, those whose dispersion exceeds 1.5× the lowest are left out (unless fewer
 *   than 4 would remain);
 * - the rest are sorted by offset and the `combine_ratio` (60 %) closest to the median are kept: from each
 *   end ⌊n·(1 − 0.6)/2⌋ are dropped, at least 1 and at most ⌊(n − 1)/2⌋ once n > 2;
 * - the result is their mean offset at their mean time; its dispersion is the larger of the kept samples'
 *   mean dispersion and the spread: with 4 or more kept, the standard error of a weighted line's intercept
 *   at the mean time (`RGR_WeightedRegression`, weights 1/dispersion); with 2-3 their standard deviation;
 *   with 1 the long-term average below. A spread whose chi-square test (90 %) does not show it larger than
 *   the long-term exponential average of the variance is replaced by that average (scaled), as chrony does
 *   to keep the weights steady;
 * - the stored samples are dropped once combined (the last one is kept for `last()`).
 *
 * One rule is ours, not chrony's (`maxSpanS`): a poll whose kept samples span more than the step threshold
 * gives no sample. A level change inside a poll otherwise gives the mean of both levels, a level the
 * reference never had: within the step threshold of the served clock it would be followed as the
 * reference's own (the stepout rule of docs/clock-discipline.md judges levels, and chrony has no such
 * rule). The next poll, wholly at one level, gives the sample.
 *
 * Everything is preallocated (typed arrays of `length`): adding a sample allocates nothing, and the filter
 * is bounded by construction.
 */

/** chrony's `MAX_SAMPLES` in samplefilt.c. */
export const REFCLOCK_FILTER_MAX = 256;
/** chrony's default `filter` length for a refclock (conf.c `filter_length = 64`). */
export const REFCLOCK_FILTER_LENGTH = 64;
/** chrony combines 60 % of the samples closest to the median (refclock.c). */
export const REFCLOCK_COMBINE_RATIO = 0.6;

/** One combined sample: the mean offset of the kept samples at their mean time. */
export interface FilteredSample {
  offsetS: number;
  dispersionS: number;
  /** Mean monotonic time of the kept samples, ms. */
  atMs: number;
  /** How many samples were stored, and how many of them were combined. */
  stored: number;
  kept: number;
}

export interface RefclockFilterOptions {
  /** Samples stored between polls at most (chrony's `filter`, 1-256). */
  length?: number;
  /** Share kept around the median (chrony: 0.6). */
  combineRatio?: number;
  /** A combined sample whose spread (standard deviation) exceeds this is dropped (0 = no limit). */
  maxDispersionS?: number;
  /** The first estimate of the variance: the clock's precision, seconds (chrony: the system precision). */
  precisionS?: number;
  /**
   * Not chrony's: a poll whose kept samples span more than this (the step threshold) straddles a level
   * change, and their mean would be a level the reference never had; it gives no sample (0 = no limit).
   */
  maxSpanS?: number;
}

/** chi-square's 90 % quantile for 1-64 degrees of freedom (chrony's regress.c `RGR_GetChi2Coef`). */
const CHI2_90 = [
  2.706, 4.605, 6.251, 7.779, 9.236, 10.645, 12.017, 13.362, 14.684, 15.987, 17.275, 18.549, 19.812, 21.064,
  22.307, 23.542, 24.769, 25.989, 27.204, 28.412, 29.615, 30.813, 32.007, 33.196, 34.382, 35.563, 36.741,
  37.916, 39.087, 40.256, 41.422, 42.585, 43.745, 44.903, 46.059, 47.212, 48.363, 49.513, 50.66, 51.805,
  52.949, 54.09, 55.23, 56.369, 57.505, 58.641, 59.774, 60.907, 62.038, 63.167, 64.295, 65.422, 66.548,
  67.673, 68.796, 69.919, 71.04, 72.16, 73.279, 74.397, 75.514, 76.63, 77.745, 78.86,
];

function chi2Coef(dof: number): number {
  return dof <= 64 ? (CHI2_90[dof - 1] ?? 1.2 * dof) : 1.2 * dof;
}

export class RefclockFilter {
  readonly length: number;
  readonly #ratio: number;
  readonly #maxVar: number;
  readonly #maxSpan: number;
  // The ring: times (ms), offsets and dispersions (s), in arrival order from #first.
  readonly #at: Float64Array;
  readonly #offset: Float64Array;
  readonly #disp: Float64Array;
  // Working space for a poll: indices selected, sorted by offset.
  readonly #sel: Int32Array;
  #next = 0;
  #used = 0;
  #lastAtMs = Number.NEGATIVE_INFINITY;
  #lastOffsetS = 0;
  #hasLast = false;
  #avgVar: number;
  #avgVarN = 0;

  constructor(options: RefclockFilterOptions = {}) {
    this.length = Math.min(
      REFCLOCK_FILTER_MAX,
      Math.max(1, Math.floor(options.length ?? REFCLOCK_FILTER_LENGTH)),
    );
    this.#ratio = Math.min(1, Math.max(0, options.combineRatio ?? REFCLOCK_COMBINE_RATIO));
    const maxDisp = options.maxDispersionS ?? 0;
    this.#maxVar = maxDisp * maxDisp;
    this.#maxSpan = options.maxSpanS ?? 0;
    const p = options.precisionS ?? 1e-9;
    this.#avgVar = p * p;
    this.#at = new Float64Array(this.length);
    this.#offset = new Float64Array(this.length);
    this.#disp = new Float64Array(this.length);
    this.#sel = new Int32Array(this.length);
  }

  /** Samples stored since the last poll. */
  get count(): number {
    return this.#used;
  }

  /** Store a sample; false (and nothing stored) when its time is not after the previous one's. */
  add(atMs: number, offsetS: number, dispersionS: number): boolean {
    if (this.#hasLast && atMs <= this.#lastAtMs) return false;
    const i = this.#next;
    this.#at[i] = atMs;
    this.#offset[i] = offsetS;
    // A zero dispersion would make an infinite weight (chrony's samples always carry one).
    this.#disp[i] = Math.max(dispersionS, 1e-9);
    this.#next = (i + 1) % this.length;
    if (this.#used < this.length) this.#used++;
    this.#lastAtMs = atMs;
    this.#lastOffsetS = offsetS;
    this.#hasLast = true;
    return true;
  }

  /** The newest sample stored (also after a poll combined it), or undefined before any. */
  last(): { atMs: number; offsetS: number } | undefined {
    return this.#hasLast ? { atMs: this.#lastAtMs, offsetS: this.#lastOffsetS } : undefined;
  }

  /** Forget the stored samples (a lock loss: none of them may reach the clock manager later). */
  drop(): void {
    this.#used = 0;
    this.#next = 0;
  }

  /** Forget everything, the time order included (a reconnected receiver starts afresh). */
  reset(): void {
    this.drop();
    this.#hasLast = false;
    this.#lastAtMs = Number.NEGATIVE_INFINITY;
  }

  /** Ring index of the k-th stored sample, oldest first. */
  #idx(k: number): number {
    return (this.#next - this.#used + k + this.length) % this.length;
  }

  /**
   * The poll: combine the stored samples into one (chrony's `SPF_GetFilteredSample`) and drop them.
   * Undefined when none is stored or the spread exceeds `maxDispersionS`.
   */
  take(): FilteredSample | undefined {
    const used = this.#used;
    if (used < 1) return undefined;
    const sel = this.#sel;
    const at = this.#at;
    const off = this.#offset;
    const disp = this.#disp;
    // With more than 4 samples, those of dispersion ≤ 1.5× the lowest (chrony: peer dispersion).
    let j = 0;
    if (used > 4) {
      let min = Number.POSITIVE_INFINITY;
      for (let k = 0; k < used; k++) min = Math.min(min, disp[this.#idx(k)] ?? 0);
      for (let k = 0; k < used; k++) {
        const i = this.#idx(k);
        if ((disp[i] ?? 0) <= 1.5 * min) sel[j++] = i;
      }
    }
    if (j < 4) {
      j = 0;
      for (let k = 0; k < used; k++) sel[j++] = this.#idx(k);
    }
    // Sorted by offset (insertion sort in place: at most 256, once a poll).
    for (let a = 1; a < j; a++) {
      const v = sel[a] ?? 0;
      const ov = off[v] ?? 0;
      let b = a;
      for (; b > 0 && (off[sel[b - 1] ?? 0] ?? 0) > ov; b--) sel[b] = sel[b - 1] ?? 0;
      sel[b] = v;
    }
    let from = 0;
    if (j > 2) {
      from = Math.trunc((j * (1 - this.#ratio)) / 2);
      from = Math.min(Math.max(1, from), Math.trunc((j - 1) / 2));
    }
    const to = j - from;
    const n = to - from;
    const span = (off[sel[to - 1] ?? 0] ?? 0) - (off[sel[from] ?? 0] ?? 0);
    if (this.#maxSpan > 0 && span > this.#maxSpan) {
      this.drop();
      return undefined;
    }
    // The kept samples' times relative to the newest of them (chrony: x relative to the last sample).
    let lastAt = Number.NEGATIVE_INFINITY;
    for (let a = from; a < to; a++) lastAt = Math.max(lastAt, at[sel[a] ?? 0] ?? 0);
    let meanX = 0;
    let meanY = 0;
    let meanDisp = 0;
    for (let a = from; a < to; a++) {
      const i = sel[a] ?? 0;
      meanX += ((at[i] ?? 0) - lastAt) / 1000;
      meanY += off[i] ?? 0;
      meanDisp += disp[i] ?? 0;
    }
    meanX /= n;
    meanY /= n;
    meanDisp /= n;
    let variance: number;
    let dispersion: number;
    let dof: number;
    if (n >= 4) {
      // RGR_WeightedRegression over x − mean x, weights 1/dispersion: s2 and the intercept's error sb0.
      let W = 0;
      let U = 0;
      for (let a = from; a < to; a++) {
        const i = sel[a] ?? 0;
        const w = disp[i] ?? 1;
        U += (((at[i] ?? 0) - lastAt) / 1000 - meanX) / w;
        W += 1 / w;
      }
      const u = U / W;
      let P = 0;
      let Q = 0;
      let V = 0;
      for (let a = from; a < to; a++) {
        const i = sel[a] ?? 0;
        const w = disp[i] ?? 1;
        const ui = ((at[i] ?? 0) - lastAt) / 1000 - meanX - u;
        const y = off[i] ?? 0;
        P += y / w;
        Q += (y * ui) / w;
        V += (ui * ui) / w;
      }
      const b1 = V > 0 ? Q / V : 0;
      const b0 = P / W - b1 * u;
      let s2 = 0;
      for (let a = from; a < to; a++) {
        const i = sel[a] ?? 0;
        const w = disp[i] ?? 1;
        const d = (off[i] ?? 0) - b0 - b1 * (((at[i] ?? 0) - lastAt) / 1000 - meanX);
        s2 += (d * d) / w;
      }
      s2 /= n - 2;
      const sb1 = V > 0 ? Math.sqrt(s2 / V) : 0;
      const aa = u * sb1;
      dispersion = Math.sqrt(s2 / W + aa * aa);
      variance = s2 * (n / W);
      dof = n - 2;
    } else if (n >= 2) {
      let ss = 0;
      for (let a = from; a < to; a++) {
        const d = (off[sel[a] ?? 0] ?? 0) - meanY;
        ss += d * d;
      }
      variance = ss / (n - 1);
      dispersion = Math.sqrt(variance);
      dof = n - 1;
    } else {
      variance = this.#avgVar;
      dispersion = Math.sqrt(variance);
      dof = 1;
    }
    if (variance < 1e-20) {
      variance = 1e-20;
      dispersion = Math.sqrt(variance);
    }
    this.drop();
    if (this.#maxVar > 0 && variance > this.#maxVar) return undefined;
    let prevAvg = this.#avgVar;
    if (this.#avgVarN > 50) {
      this.#avgVar += (dof / (dof + 50)) * (variance - this.#avgVar);
    } else {
      this.#avgVar = (this.#avgVar * this.#avgVarN + variance * dof) / (dof + this.#avgVarN);
      if (this.#avgVarN === 0) prevAvg = this.#avgVar;
      this.#avgVarN += dof;
    }
    if ((variance * dof) / chi2Coef(dof) < prevAvg)
      dispersion = (Math.sqrt(this.#avgVar) * dispersion) / Math.sqrt(variance);
    return {
      offsetS: meanY,
      dispersionS: Math.max(dispersion, meanDisp),
      atMs: lastAt + meanX * 1000,
      stored: used,
      kept: n,
    };
  }
}
