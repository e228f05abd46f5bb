import type { PtpProfileName } from './ptp-profiles.ts';
import type { ClockQuality } from './clock-quality.ts';
import { FLAG1, LEAP_SECOND_JUMP, LOCKING, TIME_ADDRESS, type SmpteSyncMetadata } from '../protocol/ptp.ts';

/**
 * The SMPTE ST 2059-2 synchronization metadata timesvc announces (docs/ptp-profiles.md "Synchronization
 * metadata"), from what it knows: the clock-quality model (domain/clock-quality.ts) and the leap state.
 * Pure; the time is given.
 */

/** Profiles whose grandmaster sends the SM TLV: ST 2059-2 itself and the AES67 + ST 2059-2 profile. */
export function sendsSyncMetadata(profile: PtpProfileName): boolean {
  return profile === 'smpte-2059-2' || profile === 'aes67-smpte';
}

/** One SM message per second, whatever the Announce interval (docs/ptp-profiles.md). */
export const SYNC_METADATA_INTERVAL_MS = 1000;

/**
 * The plant's default frame rate, 30000/1001 (29.97 Hz, drop-frame time address): timesvc has no video
 * reference of its own and no configuration key for it yet (docs/ptp-profiles.md).
 */
export const DEFAULT_SYSTEM_FRAME_RATE = { numerator: 30000, denominator: 1001 } as const;

const DAY_S = 86_400;

/**
 * masterLockingStatus: LOCKED while the time is traceable (a locked GPSDO or NTP reference), else FREE_RUN
 * (holdover included: the clock follows no reference then; clockClass 7 already tells holdover). COLD and
 * WARM_LOCKING are not sent: the clock-quality model does not expose the acquisition phase.
 *
 * Local time is UTC (timesvc has no time-zone setting): currentLocalOffset = −currentUtcOffset. A leap
 * second announced by the leap indicator (flagField leap61/leap59, at the end of the current UTC day) is
 * the next jump: jumpSeconds −1 (or +1), timeOfNextJump the PTP second at which the UTC day ends, the
 * leapSecondJump flag set. No daily jam and no daylight saving: those fields are 0.
 */
export function syncMetadata(q: ClockQuality, ptpSeconds: number): SmpteSyncMetadata {
  const leap = q.flags1 & FLAG1.LEAP_61 ? 1 : q.flags1 & FLAG1.LEAP_59 ? -1 : 0;
  const utcSeconds = ptpSeconds - q.currentUtcOffset;
  // The new offset takes effect when UTC reads 00:00:00 of the next day.
  const nextMidnightPtp = (Math.floor(utcSeconds / DAY_S) + 1) * DAY_S + q.currentUtcOffset + leap;
  const { numerator, denominator } = DEFAULT_SYSTEM_FRAME_RATE;
  return {
    defaultSystemFrameRate: { numerator, denominator },
    masterLockingStatus: q.flags1 & FLAG1.TIME_TRACEABLE ? LOCKING.LOCKED : LOCKING.FREE_RUN,
    // SMPTE ST 12-1 drop frame for the 1000/1001 rates of 30 and 60 Hz.
    timeAddressFlags: denominator === 1001 && numerator % 30000 === 0 ? TIME_ADDRESS.DROP_FRAME : 0,
    currentLocalOffset: -q.currentUtcOffset,
    jumpSeconds: leap === 0 ? 0 : -leap,
    timeOfNextJump: leap === 0 ? 0 : nextMidnightPtp,
    timeOfNextJam: 0,
    timeOfPreviousJam: 0,
    previousJamLocalOffset: 0,
    daylightSaving: 0,
    leapSecondJump: leap === 0 ? 0 : LEAP_SECOND_JUMP,
  };
}
