import type { ClockState } from './clock-state.ts';
import type { Verdict } from './selection.ts';

/**
 * What the clock manager sees of a reference source, and what it reports: the seam through which upstream
 * NTP peers (plain or NTS-authenticated), a GPSDO or the local clock feed the same selection and
 * discipline (docs/clock-discipline.md "Authenticated upstreams").
 */

export type SourceKind = 'gpsdo' | 'ntp' | 'local';

/** What a reference source reports about itself; read by the manager on every tick and sample. */
export interface ReferenceStatus {
  /** `false` when unreachable, unsynchronised, denied or not locked. */
  usable: boolean;
  /** The source's own stratum (a GPSDO is 0, so we serve 1). */
  stratum: number;
  /** The refid we advertise while this source is selected (RFC 5905 §7.3). */
  referenceId: number;
  leap: number;
  /** The source's root delay and dispersion (0 for a local device), seconds. */
  rootDelayS: number;
  rootDispersionS: number;
  /** Poll interval, log2 s (sets how long a silence may last before the source counts as gone). */
  pollLog2?: number;
  /** The samples are cryptographically authenticated (NTS); shown in status, selection treats all alike. */
  authenticated?: boolean;
}

export interface ReferenceSource {
  /** `NTP:<host>:<port>`, `GPSDO:Dummy`, `GPSDO:SerialPPS`, `LOCAL`. */
  readonly id: string;
  readonly kind: SourceKind;
  readonly prefer: boolean;
  status(): ReferenceStatus;
}

/**
 * One measurement from a source: the offset (reference − raw local clock) and delay of this exchange, the
 * source's filter dispersion and jitter, at monotonic time atMs (the middle of the exchange).
 */
export interface ReferenceSample {
  offsetS: number;
  delayS: number;
  dispersionS: number;
  /**
   * This exchange's own dispersion, where it differs from the filter's (NTP: precisions + PHI × round trip).
   * The advertised bound uses it: the estimate's own error covers what the filter's older stages age by
   * (docs/clock-discipline.md "The advertised bound"). Selection keeps the filter's dispersionS.
   */
  sampleDispersionS?: number;
  jitterS: number;
  atMs: number;
}

export interface SourceSnapshot {
  id: string;
  kind: SourceKind;
  prefer: boolean;
  usable: boolean;
  candidate: boolean;
  falseticker: boolean;
  selected: boolean;
  verdict: Verdict;
  stratum: number;
  offsetS: number | undefined;
  jitterS: number | undefined;
  rootDistanceS: number | undefined;
  lastSampleMs: number | undefined;
  authenticated: boolean;
}

/** A reference disagreeing with the served clock beyond the step threshold, held back (status, health). */
export interface Disagreement {
  source: string;
  /** Source − served clock, seconds. */
  offsetS: number;
  /** Monotonic ms since when it has disagreed. */
  sinceMs: number;
  /** Monotonic ms when the stepout ends (the level is followed then unless it returns). */
  stepoutEndsMs: number;
}

export interface ClockSnapshot {
  state: ClockState;
  /** Reference − served clock for the last sample of the selected source, seconds. */
  offsetS: number;
  /** Standard error of the phase estimate, seconds. */
  offsetStddevS: number;
  /** Frequency estimate: served − raw rate, parts per billion. */
  driftPpb: number;
  /** Standard error of the frequency estimate, ppb. */
  driftErrorPpb: number;
  /** Correction still being slewed in, seconds. */
  remainingSlewS: number;
  /** What the server advertises now: root delay / 2 + root dispersion (∞ while unsynchronised). */
  estimatedErrorS: number;
  /** Internal stratum: 16 when unsynchronised. */
  stratum: number;
  selected: string | undefined;
  /** The last selected reference (kept through HOLDOVER). */
  lastReference: string | undefined;
  jitterS: number;
  lastUpdateMs: number | undefined;
  /** Wall-clock ms of the last update (for status pages). */
  lastUpdateWallMs: number | undefined;
  holdoverStartedMs: number | undefined;
  holdoverRemainingMs: number | undefined;
  /** Samples held back as possible spikes since start. */
  spikes: number;
  /** Steps of the served clock since start. */
  steps: number;
  /** Sources held back at a level beyond the step threshold since start (docs/clock-discipline.md). */
  stepSuspects: number;
  /** The references held back now: their level disagrees with the served clock beyond the step threshold. */
  disagreements: Disagreement[];
  sources: SourceSnapshot[];
}

export type ClockManagerEvent =
  | { type: 'state'; from: ClockState; to: ClockState; reason: string }
  | { type: 'selected'; from: string | undefined; to: string | undefined }
  | { type: 'step'; source: string; offsetS: number }
  /**
   * A source's level moved beyond the step threshold from the served clock: held back, returned to the
   * served level, or followed (after the stepout, `by: 'stepout'`, or confirmed by source `by`).
   */
  | {
      type: 'suspect';
      phase: 'held' | 'returned' | 'followed';
      source: string;
      offsetS: number;
      by?: string;
    }
  /**
   * The correction changed: the served clock must take `manager.correction`. Every other event may come
   * with a changed correction too (a state change, an evaluation's new reply fields): listeners that
   * hand the correction on take it at every event.
   */
  | { type: 'update' }
  /**
   * The reply fields (serverState) were replaced; the correction may have changed in the same evaluation
   * (one event for both, the evaluation's last: clock-manager.ts #evaluate).
   */
  | { type: 'advertised' }
  /** A leap second planned (vote or list), cancelled before its instant, or passed (docs/leap-seconds.md). */
  | { type: 'leap'; phase: 'planned' | 'cancelled' | 'passed'; deltaS: number; epochUnixMs: number };
