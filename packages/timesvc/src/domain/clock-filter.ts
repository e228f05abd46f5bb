import { MAXDISP, PHI } from '../protocol/ntp-packet.ts';

/**
 * RFC 5905 §10 clock filter: an 8-stage shift register of (offset, delay, dispersion, time) samples. The
 * sample with the lowest delay is the peer's estimate (delay is the best quality indicator on a path whose
 * asymmetry we cannot see); peer dispersion and jitter summarise the register.
 *
 * Two documented deviations (README "Selection"): stages not filled yet count as absent rather than as
 * MAXDISP samples, so the four samples of an iburst give a usable dispersion (selection instead waits for
 * enough samples explicitly); and every new sample is reported (the RFC passes on only samples newer than
 * the last one used, which starves the discipline for several polls when an old sample has the lowest
 * delay). The discipline does its own spike rejection.
 */
export const NSTAGE = 8;

export interface FilterSample {
  offsetS: number;
  delayS: number;
  dispersionS: number;
  /** Monotonic ms at which the sample was taken. */
  atMs: number;
}

export interface FilterOutput {
  offsetS: number;
  delayS: number;
  /** Peer dispersion ε (RFC 5905 eq. in §10: Σ ε_i / 2^(i+1)). */
  dispersionS: number;
  /** Peer jitter ψ: RMS of offset differences to the chosen sample. */
  jitterS: number;
  /** Time of the chosen sample. */
  atMs: number;
}

export class ClockFilter {
  readonly #stages: FilterSample[] = [];
  readonly #precisionS: number;

  constructor(precisionS = 2 ** -20) {
    this.#precisionS = precisionS;
  }

  get size(): number {
    return this.#stages.length;
  }

  clear(): void {
    this.#stages.length = 0;
  }

  /** Add a sample taken at `sample.atMs` and return the filter's estimate. */
  add(sample: FilterSample): FilterOutput {
    this.#stages.unshift({ ...sample });
    if (this.#stages.length > NSTAGE) this.#stages.length = NSTAGE;
    // Older stages are aged: their dispersion grows at PHI since they were taken (RFC 5905 §10).
    const all = this.#stages.map((s) => ({
      offsetS: s.offsetS,
      delayS: s.delayS,
      dispersionS: s.dispersionS + (PHI * Math.max(0, sample.atMs - s.atMs)) / 1000,
      takenMs: s.atMs,
    }));
    const fresh = all[0] ?? { ...sample, takenMs: sample.atMs };
    // Sort by delay, stages with MAXDISP dispersion last (they are "invalid").
    const sorted = [...all].sort((a, b) => {
      const ia = a.dispersionS >= MAXDISP ? 1 : 0;
      const ib = b.dispersionS >= MAXDISP ? 1 : 0;
      return ia - ib || a.delayS - b.delayS;
    });
    const best = sorted[0] ?? fresh;
    let dispersion = 0;
    for (let i = 0; i < sorted.length; i++) {
      dispersion += Math.min(MAXDISP, sorted[i]?.dispersionS ?? MAXDISP) / 2 ** (i + 1);
    }
    const valid = sorted.filter((s) => s.dispersionS < MAXDISP);
    let sq = 0;
    for (const s of valid) sq += (s.offsetS - best.offsetS) ** 2;
    const jitter = Math.max(this.#precisionS, valid.length > 1 ? Math.sqrt(sq / (valid.length - 1)) : 0);
    return {
      offsetS: best.offsetS,
      delayS: best.delayS,
      dispersionS: dispersion,
      jitterS: jitter,
      atMs: best.takenMs,
    };
  }
}
