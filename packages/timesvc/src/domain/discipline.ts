/**
 * The estimate of the selected reference: offset θ(t) = reference − raw local clock, as a phase and a
 * frequency fitted by least squares to the reference's samples since the last reset, each with an error
 * estimate (README "Discipline"). The clock manager turns the estimate into a correction of the served
 * clock; this module only estimates.
 *
 * - Reset (the window is emptied) on a reference change, on leaving HOLDOVER or FAULT and on a level
 *   change; after a reset the previous frequency is kept as a prior with its error, and replaced as soon
 *   as the new window's own fit is better (FAULT also forgets the frequency).
 * - Level change: a residual beyond the gate — 3× the recent spread (RFC 5905 §10 popcorn spike gate,
 *   SGATE = 3) plus the estimate's own prediction error at that age, so that the samples which reveal a
 *   frequency error are not taken for spikes — is first left out; a second one in a row means the
 *   reference moved, and the window restarts from the two samples at the new level.
 * - A frequency from a short window is not taken as known: the window's slope replaces the prior only
 *   where it differs from it beyond its own coverage (Student's t); otherwise the prior stays, with the
 *   window's error (docs/clock-discipline.md "Acquisition").
 * - A runs test on the residual signs (as chrony's regression does) drops the older half of a window that
 *   no longer fits a straight line, so a frequency change is not averaged into a wrong slope.
 * - The frequency is bounded to ±MAXFREQ (RFC 5905, 500 ppm); a fit that hits the bound is not trusted.
 */

/** RFC 5905 MAXFREQ: the largest frequency the discipline accepts. */
export const MAXFREQ = 500e-6;
/** Frequency error assumed while the frequency has never been measured: anything up to MAXFREQ. */
export const UNKNOWN_FREQ_ERROR = MAXFREQ;
/** Spike gate (RFC 5905 §10 SGATE). */
export const SGATE = 3;
/** Coverage factor of the error estimates (about 3 standard deviations) once the window is large. */
export const K_SIGMA = 3;

/**
 * Coverage factor for an error estimated from a window with `dof` degrees of freedom: Student's t at 99 %
 * (two-sided), at least K_SIGMA. With the four samples of a burst (2 degrees of freedom) the standard
 * error itself is poorly known, and 3σ would cover far less than intended.
 */
export function coverage(dof: number): number {
  const T99 = [Infinity, 63.66, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.25, 3.169];
  if (dof < 1) return K_SIGMA;
  return Math.max(K_SIGMA, T99[Math.min(dof, 10)] ?? K_SIGMA);
}

/**
 * Coverage factor for the phase noise in the advertised bound: one standard deviation, as ntpd (the jitter
 * in its root dispersion, RFC 5905 A.5.5.4) and chrony (the regression's offset SD, `sourcestats.c`)
 * advertise it, widened for a small window by Student's t at the same 68.3 % (two-sided) for its degrees
 * of freedom. The frequency error keeps the wider coverage of `coverage` (docs/clock-discipline.md "The
 * advertised bound").
 */
export function phaseCoverage(dof: number): number {
  const T68 = [Infinity, 1.837, 1.321, 1.197, 1.142, 1.11, 1.09, 1.077, 1.067, 1.059, 1.053];
  if (dof < 1) return T68[1] ?? 2;
  return Math.max(1, T68[Math.min(dof, 10)] ?? 1);
}

export interface FitPoint {
  /** Monotonic seconds. */
  t: number;
  /** reference − raw, seconds. */
  offset: number;
  /** Round-trip delay of the exchange, seconds (0 where not known: every point weighs the same). */
  delay?: number;
}

export interface Estimate {
  /** θ at `t`, seconds. */
  phaseS: number;
  /** Monotonic seconds of the estimate (the newest sample). */
  t: number;
  freq: number;
  /** Standard error of the phase at `t`, seconds. */
  phaseErrorS: number;
  /** Standard error of the frequency (dimensionless). */
  freqError: number;
  /** Samples in the window. */
  samples: number;
  /** Coverage factor for freqError and the spike gate (Student's t at 99 % for the window's degrees of freedom). */
  k: number;
  /** Coverage factor for phaseErrorS in the advertised bound (phaseCoverage: one SD, Student's t). */
  kPhase: number;
}

export type AddOutcome =
  | { kind: 'accepted'; residualS: number }
  | { kind: 'spike'; residualS: number }
  | { kind: 'level'; residualS: number };

export class Discipline {
  #points: FitPoint[] = [];
  #freq = 0;
  #freqError = UNKNOWN_FREQ_ERROR;
  #phase = 0;
  #phaseError = 0;
  #t = 0;
  #recentResiduals: number[] = [];
  #pendingSpike: FitPoint | undefined;
  /** The frequency before the current window (0 for the host's own clock rate until measured). */
  #priorFreq = 0;
  #priorFreqError = UNKNOWN_FREQ_ERROR;
  /** Whether the frequency comes from this window's own slope (else it is the prior from before the reset). */
  #ownSlope = false;
  readonly #window: number;
  #noiseFloorS = 1e-6;
  /** The fit's weights (#weighted), kept between refits. */
  #w = new Float64Array(0);
  /** |recent residuals| sorted, for their median (add), kept between samples. */
  readonly #absSorted = new Float64Array(8);

  constructor(options: { window?: number } = {}) {
    this.#window = options.window ?? 32;
  }

  get samples(): number {
    return this.#points.length;
  }

  get frequency(): number {
    return this.#freq;
  }

  get frequencyError(): number {
    return this.#freqError;
  }

  /**
   * Empty the window. With `keepFrequency` the last frequency stays as a prior (its error at least
   * 0.1 ppm); without it the frequency is forgotten (FAULT).
   */
  reset(keepFrequency: boolean): void {
    this.#recentResiduals = [];
    this.#pendingSpike = undefined;
    if (!keepFrequency) {
      this.#freq = 0;
      this.#freqError = UNKNOWN_FREQ_ERROR;
    } else {
      // The error was stated for the window's coverage factor; carried over as a prior it keeps that
      // coverage under K_SIGMA (a frequency from four samples stays as uncertain as it was).
      const k = this.#ownSlope ? coverage(this.#points.length - 2) : K_SIGMA;
      this.#freqError = Math.min(UNKNOWN_FREQ_ERROR, Math.max((this.#freqError * k) / K_SIGMA, 0.1e-6));
    }
    this.#points = [];
    this.#ownSlope = false;
    this.#priorFreq = this.#freq;
    this.#priorFreqError = this.#freqError;
  }

  /** A frequency known from elsewhere (e.g. 0 for the host clock itself) with its error, as the prior. */
  assumeFrequency(freq: number, error: number): void {
    this.#freq = freq;
    this.#freqError = error;
    this.#priorFreq = freq;
    this.#priorFreqError = error;
    this.#ownSlope = false;
  }

  /**
   * The estimate's own error (its coverage factor × the standard error) when extrapolated to monotonic
   * seconds t: phase error and frequency error × age.
   */
  predictionError(t: number): number {
    if (this.#points.length === 0) return 0;
    const k = this.#ownSlope ? coverage(this.#points.length - 2) : K_SIGMA;
    return k * Math.hypot(this.#phaseError, this.#freqError * (t - this.#t));
  }

  /** θ extrapolated to monotonic seconds t. */
  predict(t: number): number {
    return this.#phase + this.#freq * (t - this.#t);
  }

  estimate(): Estimate | undefined {
    if (this.#points.length === 0) return undefined;
    return {
      phaseS: this.#phase,
      t: this.#t,
      freq: this.#freq,
      phaseErrorS: this.#phaseError,
      freqError: this.#freqError,
      samples: this.#points.length,
      k: this.#ownSlope ? coverage(this.#points.length - 2) : K_SIGMA,
      kPhase: phaseCoverage(this.#points.length - 2),
    };
  }

  /**
   * Add a sample (monotonic seconds t, offset, the source's jitter as noise floor). Samples of a fresh
   * window are never spikes.
   */
  add(t: number, offset: number, jitterS: number, delayS = 0): AddOutcome {
    this.#noiseFloorS = Math.max(1e-6, jitterS);
    if (this.#points.length === 0) {
      this.#points.push({ t, offset, delay: delayS });
      this.#refit();
      return { kind: 'accepted', residualS: 0 };
    }
    const residual = offset - this.predict(t);
    const spread = Math.max(3 * this.#noiseFloorS, 50e-6, 1.4826 * this.#recentAbsMedian());
    if (this.#points.length >= 2 && Math.abs(residual) > SGATE * spread + this.predictionError(t)) {
      const held = this.#pendingSpike;
      if (held === undefined) {
        this.#pendingSpike = { t, offset, delay: delayS };
        return { kind: 'spike', residualS: residual };
      }
      // Two in a row: the reference moved. Restart the window from both samples at the new level; the
      // frequency stays only as a prior with the error it had (reset).
      this.reset(true);
      this.#points.push(held, { t, offset, delay: delayS });
      this.#refit();
      return { kind: 'level', residualS: residual };
    }
    this.#pendingSpike = undefined;
    this.#recentResiduals.push(residual);
    if (this.#recentResiduals.length > 8) this.#recentResiduals.shift();
    this.#points.push({ t, offset, delay: delayS });
    if (this.#points.length > this.#window) this.#points.shift();
    this.#refit();
    return { kind: 'accepted', residualS: residual };
  }

  /**
   * median(|recent residuals|) without the mapped and sorted copies: the same values sorted in a kept
   * array (an insertion sort of at most 8), the same median.
   */
  #recentAbsMedian(): number {
    const r = this.#recentResiduals;
    const n = r.length;
    if (n === 0) return 0;
    const a = this.#absSorted;
    for (let i = 0; i < n; i++) {
      const v = Math.abs(r[i] as number);
      let j = i;
      for (; j > 0 && (a[j - 1] as number) > v; j--) a[j] = a[j - 1] as number;
      a[j] = v;
    }
    const mid = n >> 1;
    return n % 2 ? (a[mid] as number) : ((a[mid - 1] as number) + (a[mid] as number)) / 2;
  }

  /**
   * Weights of the window's points (mean 1). A sample's offset can be off by up to half its delay above
   * the true one-way delays (RFC 5905 §8: θ is exact only for a symmetric path), and the excess over the
   * window's lowest delay is what that asymmetry can be; so a point weighs 1 / (1 + excess / 2 / σ)², σ
   * the offsets' noise, as chrony weights its regression by a sample's distance above the lowest in the
   * register (docs/clock-discipline.md "Discipline"). A first datagram through cold caches or a send
   * delayed by the scheduler then counts for little instead of a quarter of a burst. The weights of
   * `pts[i]` are the first `pts.length` entries of the array returned (kept: valid until the next call).
   */
  #weighted(pts: readonly FitPoint[]): Float64Array {
    let min = Number.POSITIVE_INFINITY;
    for (const p of pts) min = Math.min(min, p.delay ?? 0);
    const sd = Math.max(this.#noiseFloorS, 1e-6);
    const n = pts.length;
    // Kept between refits (this runs at every sample: docs/performance.md "Fourth pass"); the same
    // arithmetic in the same order as a mapped array and its reduce.
    if (this.#w.length < n) this.#w = new Float64Array(Math.max(n, this.#window));
    const w = this.#w;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const wi = 1 / (1 + Math.max(0, ((pts[i] as FitPoint).delay ?? 0) - min) / 2 / sd) ** 2;
      w[i] = wi;
      sum += wi;
    }
    const mean = sum / n;
    for (let i = 0; i < n; i++) w[i] = (w[i] as number) / mean;
    return w;
  }

  /** Weighted least squares over the window; the phase is the fitted line at the newest sample. */
  #refit(): void {
    for (;;) {
      const pts = this.#points;
      const n = pts.length;
      const newest = pts[n - 1];
      if (newest === undefined) return;
      const tNow = newest.t;
      const w = this.#weighted(pts);
      let mt = 0;
      let mo = 0;
      for (let i = 0; i < n; i++) {
        const p = pts[i] as FitPoint;
        const wi = w[i] as number;
        mt += wi * p.t;
        mo += wi * p.offset;
      }
      mt /= n;
      mo /= n;
      let stt = 0;
      let sto = 0;
      for (let i = 0; i < n; i++) {
        const p = pts[i] as FitPoint;
        const wi = w[i] as number;
        stt += wi * (p.t - mt) ** 2;
        sto += wi * (p.t - mt) * (p.offset - mo);
      }
      let freq = this.#priorFreq;
      let freqError = this.#priorFreqError;
      this.#ownSlope = false;
      if (n >= 3 && stt > 0) {
        const slope = sto / stt;
        let ss = 0;
        for (let i = 0; i < n; i++) {
          const p = pts[i] as FitPoint;
          ss += (w[i] as number) * (p.offset - mo - slope * (p.t - mt)) ** 2;
        }
        const s = Math.max(this.#noiseFloorS, Math.sqrt(ss / (n - 2)));
        const slopeError = s / Math.sqrt(stt);
        // The window decides once its slope is better known than the prior. Its value replaces the prior
        // only where the two differ beyond the window's coverage: four samples 1 s apart with 25 µs of
        // noise cannot tell 10 ppm from 0, and serving such a slope as if known would carry the served
        // clock away for a whole poll. Kept, the prior's error is what the window says (plus the
        // difference), so the advertised bound covers the slope's possibility too.
        if (slopeError < this.#priorFreqError) {
          this.#ownSlope = true;
          const k = coverage(n - 2);
          const bounded = Math.max(-MAXFREQ, Math.min(MAXFREQ, slope));
          if (Math.abs(bounded - this.#priorFreq) > k * slopeError) {
            freq = bounded;
            freqError = Math.max(slopeError, Math.abs(slope - bounded));
          } else {
            freq = this.#priorFreq;
            freqError = slopeError + Math.abs(slope - freq) / k;
          }
        }
      }
      // Phase: the mean offset projected to the newest sample with the chosen frequency.
      const phase = mo + freq * (tNow - mt);
      let ss = 0;
      for (let i = 0; i < n; i++) {
        const p = pts[i] as FitPoint;
        ss += (w[i] as number) * (p.offset - (phase + freq * (p.t - tNow))) ** 2;
      }
      const s = Math.max(this.#noiseFloorS, n > 2 ? Math.sqrt(ss / (n - 2)) : this.#noiseFloorS);
      const lever = tNow - mt;
      this.#freq = freq;
      this.#freqError = freqError;
      this.#phase = phase;
      this.#t = tNow;
      this.#phaseError = Math.sqrt((s * s) / n + (freqError * lever) ** 2);
      if (n < 8) return;
      // Runs test: with random residual signs the number of runs is about (n + 1) / 2, sd √(n − 1) / 2.
      let runs = 1;
      let prev = 0;
      for (const p of pts) {
        const sign = p.offset - this.predict(p.t) >= 0 ? 1 : -1;
        if (prev !== 0 && sign !== prev) runs++;
        prev = sign;
      }
      if (runs >= (n + 1) / 2 - Math.sqrt(n - 1)) return;
      this.#points = pts.slice(Math.floor(n / 2));
    }
  }
}
