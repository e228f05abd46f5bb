/**
 * The correction from the raw local clock to the served clock: served(t) = raw(t) + c(t), over monotonic
 * milliseconds t. This module holds the one formula for c(t); the clock manager plans corrections with it
 * and the served clock evaluates them with it.
 *
 *   c(t) = phaseS + freq·(t − t0) + sign(slewS)·min(|slewS|, slewRate·(t − t0))      for t ≥ t0
 *
 * `phaseS + freq·(t − t0)` follows the estimated reference; `slewS` is the part of the last correction
 * still to be applied, at no more than `slewRate` seconds per second (README "Served time"). Since
 * |freq| + slewRate < 1, served time never decreases within one correction, and every new correction is
 * planned to start where the previous one stands at its t0 (continuous), unless it is an explicit step.
 */
import { leapTerm } from './leap.ts';

export interface Correction {
  /** Monotonic ms at which this correction starts. */
  t0Ms: number;
  /** c(t0), seconds. */
  phaseS: number;
  /** Frequency term (served − raw rate), dimensionless (1e-6 = 1 ppm). */
  freq: number;
  /** Correction still to be slewed in, seconds (signed). */
  slewS: number;
  /** Largest slew rate, dimensionless (0.005 = 5000 ppm = 5 ms per second). */
  slewRate: number;
  /** Leap seconds already passed since start, seconds (served = raw + c + this; leap.ts). */
  leapBaseS?: number;
  /** A leap second being passed: at monotonic `atMs`, `deltaS` (±1), stepped or smeared over `smearMs`. */
  leap?: { atMs: number; deltaS: number; smearMs: number };
}

export const ZERO_CORRECTION: Correction = Object.freeze({
  t0Ms: 0,
  phaseS: 0,
  freq: 0,
  slewS: 0,
  slewRate: 0,
});

/** c(tMs), seconds. Before t0 the correction is evaluated as at t0 (never extrapolated backwards). */
export function correctionAt(c: Correction, tMs: number): number {
  const dt = Math.max(0, tMs - c.t0Ms) / 1000;
  const slewed = Math.min(Math.abs(c.slewS), c.slewRate * dt);
  return c.phaseS + c.freq * dt + Math.sign(c.slewS) * slewed + leapAt(c, tMs);
}

/** The leap-second part of c(tMs), seconds (0 without leap seconds). */
export function leapAt(c: Correction, tMs: number): number {
  const l = c.leap;
  return (c.leapBaseS ?? 0) + (l ? leapTerm(tMs, l.atMs, l.deltaS, l.smearMs) : 0);
}

/** Correction still to be slewed in at tMs, seconds (signed). */
export function remainingSlew(c: Correction, tMs: number): number {
  const dt = Math.max(0, tMs - c.t0Ms) / 1000;
  return Math.sign(c.slewS) * Math.max(0, Math.abs(c.slewS) - c.slewRate * dt);
}

/**
 * A new correction from tMs on, continuous with `previous`: it starts at previous(tMs) and slews towards
 * `targetS` (the estimate of reference − raw at tMs), then follows `freq`.
 */
export function slewTowards(
  previous: Correction,
  tMs: number,
  targetS: number,
  freq: number,
  slewRate: number,
): Correction {
  const phaseS = correctionAt(previous, tMs);
  return { t0Ms: tMs, phaseS, freq, slewS: targetS - phaseS, slewRate };
}

/** A step: the correction jumps to `targetS` at tMs. */
export function stepTo(tMs: number, targetS: number, freq: number, slewRate: number): Correction {
  return { t0Ms: tMs, phaseS: targetS, freq, slewS: 0, slewRate };
}
