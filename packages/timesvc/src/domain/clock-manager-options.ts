import type { Clock } from '@broadcast-ops/core';
import { DAY_MS, type LeapMode, type LeapSecondsList } from './leap.ts';

export interface ClockManagerOptions {
  clock: Clock;
  /** Tick period (1 s). */
  tickMs?: number;
  /** Lock threshold floor (100 µs); the effective threshold is max(this, 3 × jitter). */
  lockThresholdS?: number;
  /** Samples a source needs before selection, and the estimate before it is served (4, an iburst). */
  minSamples?: number;
  /** |estimate − served| above which the clock is in FAULT (1 s). */
  faultThresholdS?: number;
  /** Longest HOLDOVER before FAULT (4 h). */
  holdoverTimeoutMs?: number;
  /** Samples in the least-squares window. */
  regressionWindow?: number;
  /** Corrections beyond this are stepped (forward) or served as LI 3 and then stepped (backward) (128 ms). */
  stepThresholdS?: number;
  /** Largest slew rate of the served clock (5000 ppm = 5 ms/s). */
  maxSlewRate?: number;
  /** Our precision, log2 seconds. */
  precision?: number;
  /**
   * Wander of the raw clock between samples while a reference is followed (chrony's maxclockerror, 1 ppm):
   * with the frequency error's coverage, the growth rate of the advertised dispersion. HOLDOVER grows at
   * PHI (15 ppm, RFC 5905) instead (docs/clock-discipline.md "The advertised bound").
   */
  maxClockError?: number;
  /**
   * Unix ms of the served clock's raw timescale at a monotonic instant (io/served-clock.ts rawUnixMs).
   * The reference timestamp is served time, so a step of the host's realtime clock must not reach it
   * (RFC 5905 §A.5.1.1: a reference timestamp after the transmit timestamp makes the reply invalid).
   * Default: the injected clock's wall time at that instant.
   */
  rawUnixMs?: (monoMs: number) => number;
  /**
   * Local-stratum mode: the host clock is a last-resort reference with this stratum. `offsetS` reads
   * host realtime − raw clock (0 when not given).
   */
  local?: { stratum: number; referenceId: number; offsetS?: () => number } | undefined;
  /**
   * When the selected GPSDO (kind `gpsdo`) loses lock, stay in HOLDOVER on it this long before NTP peers may
   * be selected (0 = fall back at once). docs/gpsdo.md "Loss of the GPSDO".
   */
  primaryHoldoverMs?: number;
  /** How served time passes a leap second (docs/leap-seconds.md): `step` (default) or `smear`. */
  leapMode?: LeapMode;
  /** Length of the smear window, centred on the leap, ms (24 h: 11.6 ppm). */
  leapSmearMs?: number;
  /** The leap-seconds list, when one is configured and readable (io/leap-list.ts). */
  leapList?: () => LeapSecondsList | undefined;
  /**
   * A source whose level moved beyond the step threshold from the served clock is held back this long
   * unless an independent source confirms the new level (the stepout of RFC 5905 §11.3; 300 s as in ntpd
   * 4.2.8; 0 = follow at once). docs/clock-discipline.md "No single reference decides whole seconds".
   */
  stepoutMs?: number;
}

/** The clock manager's options with their defaults (docs/clock-discipline.md). */
export type ResolvedOptions = Required<
  Omit<ClockManagerOptions, 'clock' | 'local' | 'rawUnixMs' | 'leapList'>
>;

/** The stepout (RFC 5905 §11.3; ntpd's `tinker stepout`, 300 s): a step is followed once it persisted this long. */
export const STEPOUT_MS = 300_000;

export function resolveOptions(o: ClockManagerOptions): ResolvedOptions {
  return {
    tickMs: o.tickMs ?? 1000,
    lockThresholdS: o.lockThresholdS ?? 100e-6,
    minSamples: o.minSamples ?? 4,
    faultThresholdS: o.faultThresholdS ?? 1,
    holdoverTimeoutMs: o.holdoverTimeoutMs ?? 4 * 3600_000,
    regressionWindow: o.regressionWindow ?? 32,
    stepThresholdS: o.stepThresholdS ?? 0.128,
    maxSlewRate: o.maxSlewRate ?? 5000e-6,
    precision: o.precision ?? -20,
    maxClockError: o.maxClockError ?? 1e-6,
    primaryHoldoverMs: o.primaryHoldoverMs ?? 0,
    leapMode: o.leapMode ?? 'step',
    leapSmearMs: o.leapSmearMs ?? DAY_MS,
    stepoutMs: o.stepoutMs ?? STEPOUT_MS,
  };
}
