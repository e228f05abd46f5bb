import type { ClockState } from './clock-state.ts';
import type { SourceKind } from './reference-source.ts';
import { FLAG1, TIME_SOURCE } from '../protocol/ptp.ts';

/**
 * One clock-quality model, announced both ways (docs/ptp.md "Clock quality"): NTP stratum/LI come from the
 * clock manager's served state, and the PTP clockClass, clockAccuracy, timeSource and time-properties flags
 * from the same state and selected reference here.
 *
 * | State, reference            | clockClass            | timeSource          | traceable flags |
 * |-----------------------------|-----------------------|---------------------|-----------------|
 * | LOCKED, GPSDO               | 6                     | GPS 0x20            | time + freq     |
 * | LOCKED, NTP peer            | `ptp.clock_class`     | NTP 0x50            | time            |
 * | HOLDOVER (after a GPSDO)    | 7                     | GPS 0x20            | freq            |
 * |   … error past the spec     | 52                    | GPS 0x20            | none            |
 * | HOLDOVER (after a peer)     | `ptp.clock_class`     | NTP 0x50            | none            |
 * | INIT, SYNCING, FAULT, local | `ptp.clock_class`     | INTERNAL_OSC 0xA0   | none            |
 *
 * clockClass 6 = synchronised to a primary reference (PTP timescale), 7 = holdover within specification,
 * 52 = degradation alternative A: a class-7 clock no longer within its holdover specification that cannot
 * be a slave (timesvc has no PTP servo), 248 = default (IEEE 1588-2008 §7.6.2.4 Table 5). The holdover
 * specification is `ntp.discipline.holdover_max_error`, the bound /api/health holds HOLDOVER to; when the
 * holdover times out the clock is in FAULT and announces the free-running class. Only the GPSDO is a
 * primary reference, so 6/7/52 are kept for it.
 */

/** clockAccuracy enumeration (§7.6.2.5 Table 6): upper bounds in seconds. */
const ACCURACY: [number, number][] = [
  [25e-9, 0x20],
  [100e-9, 0x21],
  [250e-9, 0x22],
  [1e-6, 0x23],
  [2.5e-6, 0x24],
  [10e-6, 0x25],
  [25e-6, 0x26],
  [100e-6, 0x27],
  [250e-6, 0x28],
  [1e-3, 0x29],
  [2.5e-3, 0x2a],
  [10e-3, 0x2b],
  [25e-3, 0x2c],
  [100e-3, 0x2d],
  [250e-3, 0x2e],
  [1, 0x2f],
  [10, 0x30],
];

/**
 * Software timestamps in Node (userspace send/receive, no SO_TIMESTAMPING) are good to a few hundred µs at
 * best, so no announced accuracy is better than 250 µs (0x28) however good the reference is.
 */
export const SOFTWARE_TIMESTAMP_FLOOR_S = 250e-6;

export function clockAccuracyFor(errorS: number): number {
  if (!Number.isFinite(errorS)) return 0xfe;
  const e = Math.max(errorS, SOFTWARE_TIMESTAMP_FLOOR_S);
  for (const [bound, code] of ACCURACY) if (e <= bound) return code;
  return 0x31;
}

export interface ClockQualityInput {
  state: ClockState;
  /** Kind of the selected reference (or the last one, in HOLDOVER). */
  referenceKind: SourceKind | undefined;
  /** The server's advertised error bound (root delay / 2 + root dispersion), seconds. */
  estimatedErrorS: number;
  /** NTP leap indicator being served (1 = +1 s at the end of the day, 2 = −1 s). */
  leap: number;
  /** `ptp.clock_class`: the class announced when not traceable (248 by default). */
  freeRunningClass: number;
  /** `ptp.clock_accuracy` (0xFE unknown): used while not traceable. */
  freeRunningAccuracy: number;
  /** The holdover specification: the advertised error HOLDOVER may reach and still be class 7, seconds. */
  holdoverMaxErrorS: number;
}

export interface ClockQuality {
  clockClass: number;
  clockAccuracy: number;
  timeSource: number;
  /** flagField[1]: leap61/59, currentUtcOffsetValid, ptpTimescale, timeTraceable, frequencyTraceable. */
  flags1: number;
  currentUtcOffset: number;
}

/** TAI − UTC since 2017-01-01 (IERS Bulletin C; linuxptp ds.h CURRENT_UTC_OFFSET). */
export const CURRENT_UTC_OFFSET = 37;

export function clockQuality(i: ClockQualityInput): ClockQuality {
  let flags1 = FLAG1.PTP_TIMESCALE | FLAG1.UTC_OFFSET_VALID;
  if (i.leap === 1) flags1 |= FLAG1.LEAP_61;
  if (i.leap === 2) flags1 |= FLAG1.LEAP_59;
  const free = {
    clockClass: i.freeRunningClass,
    clockAccuracy: i.freeRunningAccuracy,
    timeSource: TIME_SOURCE.INTERNAL_OSCILLATOR,
    flags1,
    currentUtcOffset: CURRENT_UTC_OFFSET,
  };
  if (i.state === 'LOCKED' && i.referenceKind === 'gpsdo') {
    return {
      clockClass: 6,
      clockAccuracy: clockAccuracyFor(i.estimatedErrorS),
      timeSource: TIME_SOURCE.GPS,
      flags1: flags1 | FLAG1.TIME_TRACEABLE | FLAG1.FREQUENCY_TRACEABLE,
      currentUtcOffset: CURRENT_UTC_OFFSET,
    };
  }
  if (i.state === 'HOLDOVER' && i.referenceKind === 'gpsdo') {
    const withinSpec = i.estimatedErrorS <= i.holdoverMaxErrorS;
    return {
      clockClass: withinSpec ? 7 : 52,
      clockAccuracy: clockAccuracyFor(i.estimatedErrorS),
      timeSource: TIME_SOURCE.GPS,
      flags1: withinSpec ? flags1 | FLAG1.FREQUENCY_TRACEABLE : flags1,
      currentUtcOffset: CURRENT_UTC_OFFSET,
    };
  }
  if (i.state === 'LOCKED' && i.referenceKind === 'ntp') {
    return {
      ...free,
      clockAccuracy: clockAccuracyFor(i.estimatedErrorS),
      timeSource: TIME_SOURCE.NTP,
      flags1: flags1 | FLAG1.TIME_TRACEABLE,
    };
  }
  if (i.state === 'HOLDOVER' && i.referenceKind === 'ntp') return { ...free, timeSource: TIME_SOURCE.NTP };
  return free;
}
