// The SMPTE ST 2059-2 synchronization metadata TLV (docs/ptp-profiles.md "Synchronization metadata"): the
// codec and the metadata the clock gives. tshark's dissector on the same message: test/io/ptp-sync-metadata.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { refusal } from '@broadcast-ops/core/testing';
import { CURRENT_UTC_OFFSET, type ClockQuality } from '../../src/domain/clock-quality.ts';
import { sendsSyncMetadata, syncMetadata } from '../../src/domain/ptp-sync-metadata.ts';
import {
  ACTION,
  ALL_PORTS,
  FLAG1,
  LOCKING,
  TIME_SOURCE,
  TLV,
  decodePtp,
  decodeSmpteSyncMetadata,
  encodePtp,
  encodeSmpteSyncMetadata,
  syncMetadataMessage,
} from '../../src/protocol/ptp.ts';
import { SM_HEADER, SM_SAMPLE } from '../helpers/ptp-sync-metadata.ts';

test('the SM management message matches the layout libptpmgmt parses, octet for octet', () => {
  // The test vector of libptpmgmt's SMPTE_Org unit test (the linuxptp management library): a COMMAND to all ports, startingBoundaryHops
  // and boundaryHops 3, an ORGANIZATION_EXTENSION TLV of 48 octets with OUI 68-97-E8, subtype 1, 30/1 Hz,
  // FREE_RUN; every other field 0.
  const expected = Buffer.alloc(100);
  Buffer.from([0x0d, 2, 0, 0x64]).copy(expected, 0);
  Buffer.from('74da38fffef6985e0001', 'hex').copy(expected, 20);
  Buffer.from([0, 0, 4, 0x7f]).copy(expected, 30);
  expected.fill(0xff, 34, 44);
  Buffer.from([3, 3, 3, 0, 0, 3, 0, 0x30, 0x68, 0x97, 0xe8, 0, 0, 1, 0, 0, 0, 0x1e, 0, 0, 0, 1, 1]).copy(
    expected,
    44,
  );
  const buf = encodePtp(syncMetadataMessage({ ...SM_HEADER, domainNumber: 0, flags: [0, 0] }, SM_SAMPLE));
  assert.equal(buf.toString('hex'), expected.toString('hex'));
});

test('encode → decode round trip of the message and its TLV, for any field values', () => {
  const u48 = fc.integer({ min: 0, max: 2 ** 48 - 1 });
  const i32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
  const u8 = fc.integer({ min: 0, max: 255 });
  const u32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });
  fc.assert(
    fc.property(
      fc.record({
        defaultSystemFrameRate: fc.record({ numerator: u32, denominator: u32 }),
        masterLockingStatus: u8,
        timeAddressFlags: u8,
        currentLocalOffset: i32,
        jumpSeconds: i32,
        timeOfNextJump: u48,
        timeOfNextJam: u48,
        timeOfPreviousJam: u48,
        previousJamLocalOffset: i32,
        daylightSaving: u8,
        leapSecondJump: u8,
      }),
      fc.integer({ min: 0, max: 0xffff }),
      (sm, seq) => {
        const buf = encodePtp(syncMetadataMessage({ ...SM_HEADER, sequenceId: seq }, sm));
        assert.equal(buf.length, 100);
        assert.equal(buf.readUInt16BE(2), 100, 'messageLength covers the TLV');
        const d = decodePtp(buf);
        assert.ok(d.ok && d.value.type === 'management');
        const g = d.value.management;
        assert.deepEqual(g.targetPortIdentity, ALL_PORTS);
        assert.equal(g.actionField, ACTION.COMMAND);
        assert.equal(g.tlvType, TLV.ORGANIZATION_EXTENSION);
        assert.equal(d.value.header.sequenceId, seq);
        const back = decodeSmpteSyncMetadata(g.tlvValue);
        assert.ok(back.ok);
        // fast-check's records have a null prototype: compare with plain copies.
        assert.deepEqual(back.value, {
          ...sm,
          defaultSystemFrameRate: { ...sm.defaultSystemFrameRate },
        });
        assert.equal(encodePtp(d.value).toString('hex'), buf.toString('hex'));
      },
    ),
    { numRuns: 2000, interruptAfterTimeLimit: 10_000 },
  );
});

test('the decoders refuse, never throw: fuzzed datagrams, truncated TLVs, other organizations', () => {
  const good = encodePtp(syncMetadataMessage(SM_HEADER, SM_SAMPLE));
  const cut = Buffer.from(good.subarray(0, 90));
  assert.equal(refusal(decodePtp(cut)), 'length');
  const lying = Buffer.from(good);
  lying.writeUInt16BE(50, 50); // TLV longer than the message
  assert.equal(refusal(decodePtp(lying)), 'length');
  const value = encodeSmpteSyncMetadata(SM_SAMPLE);
  assert.equal(refusal(decodeSmpteSyncMetadata(value.subarray(0, 40))), 'length');
  const other = Buffer.from(value);
  other[0] = 0x00; // another OUI
  assert.equal(refusal(decodeSmpteSyncMetadata(other)), 'not_smpte');
  const subtype2 = Buffer.from(value);
  subtype2[5] = 2;
  assert.equal(refusal(decodeSmpteSyncMetadata(subtype2)), 'not_smpte');
  // Random bytes behind a valid management SM_HEADER, and random TLV values: an answer, never a throw.
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 160 }), fc.uint8Array({ maxLength: 64 }), (tail, tlv) => {
      const buf = Buffer.concat([good.subarray(0, 34), Buffer.from(tail)]);
      if (buf.length >= 4) buf.writeUInt16BE(Math.min(buf.length, 0xffff), 2);
      const d = decodePtp(buf);
      if (d.ok && d.value.type === 'management') decodeSmpteSyncMetadata(d.value.management.tlvValue);
      decodeSmpteSyncMetadata(Buffer.from(tlv));
    }),
    { numRuns: 5000, interruptAfterTimeLimit: 10_000 },
  );
});

const quality = (flags1: number): ClockQuality => ({
  clockClass: 6,
  clockAccuracy: 0x28,
  timeSource: TIME_SOURCE.GPS,
  flags1: FLAG1.PTP_TIMESCALE | FLAG1.UTC_OFFSET_VALID | flags1,
  currentUtcOffset: CURRENT_UTC_OFFSET,
});

test('the metadata follows the clock: locking status, local offset, a pending leap second', () => {
  assert.ok(sendsSyncMetadata('smpte-2059-2') && sendsSyncMetadata('aes67-smpte'));
  assert.ok(!sendsSyncMetadata('default') && !sendsSyncMetadata('aes67'));
  // 2026-12-31 12:00:00 UTC in PTP seconds (TAI).
  const noonUtc = Date.UTC(2026, 11, 31, 12) / 1000;
  const ptp = noonUtc + CURRENT_UTC_OFFSET;
  const locked = syncMetadata(quality(FLAG1.TIME_TRACEABLE | FLAG1.FREQUENCY_TRACEABLE), ptp);
  assert.equal(locked.masterLockingStatus, LOCKING.LOCKED);
  assert.deepEqual(locked.defaultSystemFrameRate, { numerator: 30000, denominator: 1001 });
  assert.equal(locked.timeAddressFlags, 1, 'drop frame at 29.97');
  assert.equal(locked.currentLocalOffset, -37);
  assert.deepEqual([locked.jumpSeconds, locked.timeOfNextJump, locked.leapSecondJump], [0, 0, 0]);
  const holdover = syncMetadata(quality(FLAG1.FREQUENCY_TRACEABLE), ptp);
  assert.equal(holdover.masterLockingStatus, LOCKING.FREE_RUN);
  // A positive leap second at the end of the day: local time repeats a second when UTC reads 00:00:00,
  // i.e. at TAI midnight + 38.
  const midnightUtc = Date.UTC(2027, 0, 1) / 1000;
  const leap = syncMetadata(quality(FLAG1.TIME_TRACEABLE | FLAG1.LEAP_61), ptp);
  assert.deepEqual(
    [leap.jumpSeconds, leap.timeOfNextJump, leap.leapSecondJump],
    [-1, midnightUtc + CURRENT_UTC_OFFSET + 1, 1],
  );
  const negative = syncMetadata(quality(FLAG1.TIME_TRACEABLE | FLAG1.LEAP_59), ptp);
  assert.deepEqual(
    [negative.jumpSeconds, negative.timeOfNextJump],
    [1, midnightUtc + CURRENT_UTC_OFFSET - 1],
  );
});
