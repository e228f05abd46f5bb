import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { refusal } from '@broadcast-ops/core/testing';
import { clockAccuracyFor, clockQuality } from '../../src/domain/clock-quality.ts';
import {
  FLAG0,
  FLAG1,
  clockIdentityFromMac,
  clockIdentityText,
  decodePtp,
  encodePtp,
  type PtpMessageInput,
} from '../../src/protocol/ptp.ts';
import { ours } from '../helpers/ptp-messages.ts';

const fixtures = JSON.parse(
  readFileSync(join(import.meta.dirname, '../fixtures/linuxptp-packets.json'), 'utf8'),
) as {
  packets: Record<string, Record<string, string>>;
};

test('captured linuxptp packets (every type, E2E and P2P) decode and re-encode byte for byte', () => {
  let n = 0;
  for (const [mode, byType] of Object.entries(fixtures.packets)) {
    for (const [type, hex] of Object.entries(byType)) {
      const d = decodePtp(Buffer.from(hex, 'hex'));
      assert.ok(d.ok, `${mode} ${type}`);
      assert.equal(d.value.header.messageType, Number(type));
      assert.equal(d.value.header.messageLength, hex.length / 2);
      assert.equal(encodePtp(d.value).toString('hex'), hex, `${mode} ${type}`);
      n++;
    }
  }
  assert.equal(n, 11);
  const ann = decodePtp(Buffer.from(fixtures.packets['E2E']?.['0x0b'] ?? '', 'hex'));
  assert.ok(ann.ok && ann.value.type === 'announce');
  assert.equal(ann.value.announce.currentUtcOffset, 37);
  assert.equal(ann.value.announce.clockClass, 248);
  assert.equal(ann.value.announce.timeSource, 0xa0);
  const resp = decodePtp(Buffer.from(fixtures.packets['P2P']?.['0x03'] ?? '', 'hex'));
  assert.ok(resp.ok && resp.value.type === 'pdelay_resp');
  assert.equal(resp.value.header.flags[0] & FLAG0.TWO_STEP, FLAG0.TWO_STEP);
  assert.equal(resp.value.header.logMessageInterval, 0x7f);
});

test('every message type: versionPTP 2, exact messageLength, controlField, round trip', () => {
  for (const o of ours) {
    const buf = encodePtp(o.msg);
    assert.equal(buf.length, o.len, o.msg.type);
    assert.equal(buf.readUInt16BE(2), o.len);
    assert.equal(buf[1], 2);
    assert.equal(buf[32], o.control, o.msg.type);
    const d = decodePtp(buf);
    assert.ok(d.ok);
    assert.equal(d.value.type, o.msg.type);
    assert.equal(encodePtp(d.value).toString('hex'), buf.toString('hex'));
  }
});

test('malformed input: short, wrong version, wrong length, unknown type, bad ns — an error, never a throw', () => {
  const good = encodePtp(ours[0]?.msg ?? ({} as PtpMessageInput));
  assert.equal(refusal(decodePtp(good.subarray(0, 20))), 'short');
  const v1 = Buffer.from(good);
  v1[1] = 1;
  assert.equal(refusal(decodePtp(v1)), 'version');
  const long = Buffer.from(good);
  long.writeUInt16BE(50, 2);
  assert.equal(refusal(decodePtp(long)), 'length');
  const short = Buffer.from(good);
  short.writeUInt16BE(40, 2);
  assert.equal(refusal(decodePtp(short)), 'length');
  const signalling = Buffer.from(good);
  signalling[0] = 0x0c;
  assert.equal(refusal(decodePtp(signalling)), 'unsupported');
  const mgmt = Buffer.from(good);
  mgmt[0] = 0x0d; // a Management message needs 48 octets and one TLV (test/io/ptp-sync-metadata.test.ts)
  assert.equal(refusal(decodePtp(mgmt)), 'length');
  const ns = Buffer.from(good);
  ns.writeUInt32BE(1e9, 40);
  assert.equal(refusal(decodePtp(ns)), 'bad_field');
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 128 }), (bytes) => {
      decodePtp(Buffer.from(bytes));
    }),
    { numRuns: 5000, interruptAfterTimeLimit: 10_000 },
  );
});

test('clock identity: EUI-64 from the MAC without the U/L flip; linuxptp notation', () => {
  assert.equal(clockIdentityFromMac('02:00:00:00:00:01'), '020000fffe000001');
  assert.equal(clockIdentityText('020000fffe000001'), '020000.fffe.000001');
  assert.throws(() => clockIdentityFromMac('nope'), RangeError);
});

test('one clock-quality model: class 6 locked to GPS, 7 in holdover within spec, 52 past it, ptp.clock_class otherwise', () => {
  const base = {
    estimatedErrorS: 1e-6,
    leap: 0,
    freeRunningClass: 248,
    freeRunningAccuracy: 0xfe,
    holdoverMaxErrorS: 0.01,
  };
  const locked = clockQuality({ ...base, state: 'LOCKED', referenceKind: 'gpsdo' });
  assert.equal(locked.clockClass, 6);
  assert.equal(locked.timeSource, 0x20);
  assert.equal(locked.clockAccuracy, 0x28, 'software timestamps: never better than 250 µs');
  assert.equal(locked.flags1 & FLAG1.TIME_TRACEABLE, FLAG1.TIME_TRACEABLE);
  assert.equal(locked.currentUtcOffset, 37);
  const hold = clockQuality({ ...base, state: 'HOLDOVER', referenceKind: 'gpsdo' });
  assert.equal(hold.clockClass, 7);
  assert.equal(hold.flags1 & FLAG1.TIME_TRACEABLE, 0);
  assert.equal(hold.flags1 & FLAG1.FREQUENCY_TRACEABLE, FLAG1.FREQUENCY_TRACEABLE);
  // Holdover past its specification (holdover_max_error): degradation alternative A, nothing traceable.
  const atSpec = clockQuality({ ...base, estimatedErrorS: 0.01, state: 'HOLDOVER', referenceKind: 'gpsdo' });
  assert.equal(atSpec.clockClass, 7);
  const past = clockQuality({ ...base, estimatedErrorS: 0.0101, state: 'HOLDOVER', referenceKind: 'gpsdo' });
  assert.deepEqual([past.clockClass, past.clockAccuracy, past.timeSource], [52, 0x2c, 0x20]);
  assert.equal(past.flags1 & (FLAG1.TIME_TRACEABLE | FLAG1.FREQUENCY_TRACEABLE), 0);
  const ntp = clockQuality({ ...base, state: 'LOCKED', referenceKind: 'ntp' });
  assert.equal(ntp.clockClass, 248);
  assert.equal(ntp.timeSource, 0x50);
  const free = clockQuality({ ...base, state: 'FAULT', referenceKind: undefined });
  assert.deepEqual([free.clockClass, free.clockAccuracy, free.timeSource], [248, 0xfe, 0xa0]);
  assert.equal(
    clockQuality({ ...base, leap: 1, state: 'LOCKED', referenceKind: 'gpsdo' }).flags1 & FLAG1.LEAP_61,
    FLAG1.LEAP_61,
  );
  assert.equal(clockAccuracyFor(3e-3), 0x2b);
  assert.equal(clockAccuracyFor(Infinity), 0xfe);
});
