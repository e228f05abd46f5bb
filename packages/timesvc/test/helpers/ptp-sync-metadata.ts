import { FLAG1, LOCKING, type SmpteSyncMetadata } from '../../src/protocol/ptp.ts';

/** The SMPTE ST 2059-2 synchronization metadata TLV (docs/ptp-profiles.md "Synchronization metadata"): one
 * message header and one free-running sample, shared by the codec tests and the tshark dissector check. */
export const SM_HEADER = {
  domainNumber: 127,
  flags: [0, FLAG1.PTP_TIMESCALE | FLAG1.UTC_OFFSET_VALID] as [number, number],
  correction: 0n,
  sourcePortIdentity: { clockIdentity: '74da38fffef6985e', portNumber: 1 },
  sequenceId: 0,
  logMessageInterval: 0x7f,
};

export const SM_SAMPLE: SmpteSyncMetadata = {
  defaultSystemFrameRate: { numerator: 30, denominator: 1 },
  masterLockingStatus: LOCKING.FREE_RUN,
  timeAddressFlags: 0,
  currentLocalOffset: 0,
  jumpSeconds: 0,
  timeOfNextJump: 0,
  timeOfNextJam: 0,
  timeOfPreviousJam: 0,
  previousJamLocalOffset: 0,
  daylightSaving: 0,
  leapSecondJump: 0,
};
