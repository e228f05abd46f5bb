// The discipline's estimator as it was before its refit stopped allocating per point (docs/performance.md
// "Fourth pass"), kept as the reference test/app/tick-work.test.ts checks the rewritten one against.
import {
  K_SIGMA,
  MAXFREQ,
  SGATE,
  UNKNOWN_FREQ_ERROR,
  coverage,
  phaseCoverage,
  type AddOutcome,
  type Estimate,
  type FitPoint,
} from '../../src/domain/discipline.ts';

export class DisciplineBefore {
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
    const spread = Math.max(
      3 * this.#noiseFloorS,
      50e-6,
      1.4826 * median(this.#recentResiduals.map((r) => Math.abs(r))),
    );
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
   * Weights of the window's points (mean 1). A sample's offset can be off by up to half its delay above
   * the true one-way delays (RFC 5905 §8: θ is exact only for a symmetric path), and the excess over the
   * window's lowest delay is what that asymmetry can be; so a point weighs 1 / (1 + excess / 2 / σ)², σ
   * the offsets' noise, as chrony weights its regression by a sample's distance above the lowest in the
   * register (docs/clock-discipline.md "Discipline"). A first datagram through cold caches or a send
   * delayed by the scheduler then counts for little instead of a quarter of a burst.
   */
  #weighted(pts: readonly FitPoint[]): (FitPoint & { w: number })[] {
    let min = Number.POSITIVE_INFINITY;
    for (const p of pts) min = Math.min(min, p.delay ?? 0);
    const sd = Math.max(this.#noiseFloorS, 1e-6);
    const w = pts.map((p) => 1 / (1 + Math.max(0, (p.delay ?? 0) - min) / 2 / sd) ** 2);
    const mean = w.reduce((a, b) => a + b, 0) / w.length;
    return pts.map((p, i) => ({ ...p, w: (w[i] ?? 0) / mean }));
  }

  /** Weighted least squares over the window; the phase is the fitted line at the newest sample. */
  #refit(): void {
    for (;;) {
      const pts = this.#points;
      const n = pts.length;
      const newest = pts[n - 1];
      if (newest === undefined) return;
      const tNow = newest.t;
      const wp = this.#weighted(pts);
      let mt = 0;
      let mo = 0;
      for (const p of wp) {
        mt += p.w * p.t;
        mo += p.w * p.offset;
      }
      mt /= n;
      mo /= n;
      let stt = 0;
      let sto = 0;
      for (const p of wp) {
        stt += p.w * (p.t - mt) ** 2;
        sto += p.w * (p.t - mt) * (p.offset - mo);
      }
      let freq = this.#priorFreq;
      let freqError = this.#priorFreqError;
      this.#ownSlope = false;
      if (n >= 3 && stt > 0) {
        const slope = sto / stt;
        let ss = 0;
        for (const p of wp) ss += p.w * (p.offset - mo - slope * (p.t - mt)) ** 2;
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
      for (const p of wp) ss += p.w * (p.offset - (phase + freq * (p.t - tNow))) ** 2;
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

/** The median of `values` (sorted copy), as the estimator before used it. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}
