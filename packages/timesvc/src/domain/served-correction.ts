import {
  ZERO_CORRECTION,
  correctionAt,
  remainingSlew,
  slewTowards,
  stepTo,
  type Correction,
} from './correction.ts';

/**
 * The served clock's correction and the rules for changing it (docs/clock-discipline.md "Guarantees"):
 * step while replies say "unsynchronised" (LI 3), or forwards beyond the step threshold; never step
 * backwards while replies say LI 0 — ask for LI 3 first; otherwise slew at the bounded rate. The clock
 * manager decides what the estimate is and what the state becomes; this decides how served time moves.
 */
export type PlanOutcome =
  | { kind: 'wait' }
  | { kind: 'step'; stepS: number }
  | { kind: 'slew' }
  | { kind: 'fault'; diffS: number }
  | { kind: 'backward'; diffS: number };

export class ServedCorrection {
  #c: Correction = ZERO_CORRECTION;
  #synced = false;
  #steps = 0;
  readonly #o: { slewRate: number; stepThresholdS: number; faultThresholdS: number };

  constructor(options: { slewRate: number; stepThresholdS: number; faultThresholdS: number }) {
    this.#o = options;
  }

  get correction(): Correction {
    return this.#c;
  }

  /** The served clock has been put onto a usable estimate (replies may say LI 0). */
  get synced(): boolean {
    return this.#synced;
  }

  get steps(): number {
    return this.#steps;
  }

  at(tMs: number): number {
    return correctionAt(this.#c, tMs);
  }

  remaining(tMs: number): number {
    return remainingSlew(this.#c, tMs);
  }

  /** Back to "unsynchronised" (FAULT): the next usable estimate is stepped onto. */
  unsync(): void {
    this.#synced = false;
  }

  /**
   * Move towards `targetS` (reference − raw at tMs) with frequency `freq`. `usable`: the estimate has
   * enough samples to be served (only consulted while unsynchronised).
   */
  plan(tMs: number, targetS: number, freq: number, usable: boolean): PlanOutcome {
    const before = this.at(tMs);
    const diff = targetS - before;
    if (!this.#synced) {
      if (!usable) return { kind: 'wait' };
      this.#c = stepTo(tMs, targetS, freq, this.#o.slewRate);
      this.#steps++;
      this.#synced = true;
      return { kind: 'step', stepS: diff };
    }
    if (Math.abs(diff) > this.#o.faultThresholdS) return { kind: 'fault', diffS: diff };
    if (diff > this.#o.stepThresholdS) {
      // Forwards: served time still never decreases.
      this.#c = stepTo(tMs, targetS, freq, this.#o.slewRate);
      this.#steps++;
      return { kind: 'step', stepS: diff };
    }
    if (diff < -this.#o.stepThresholdS) {
      // Backwards beyond the step threshold: replies must say "unsynchronised" before the step.
      this.#synced = false;
      return { kind: 'backward', diffS: diff };
    }
    this.#c = slewTowards(this.#c, tMs, targetS, freq, this.#o.slewRate);
    return { kind: 'slew' };
  }
}
