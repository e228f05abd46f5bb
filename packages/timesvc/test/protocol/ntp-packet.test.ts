import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import fc from 'fast-check';
import { expectDecoded, refusal } from '@broadcast-ops/core/testing';
import {
  asciiRefId,
  decodeNtpPacket,
  encodeNtpPacket,
  kissCode,
  ntpToUnixMs,
  refIdToAscii,
  refIdToIpv4,
  secondsToShort,
  shortToSeconds,
  timestampDiffSeconds,
  unixToNtp,
} from '../../src/protocol/ntp-packet.ts';

interface Capture {
  provenance: { tool: string };
  exchanges: { note: string; family: string; request: string; response: string }[];
}
const capture = JSON.parse(
  readFileSync(new URL('../fixtures/chrony-packets.json', import.meta.url), 'utf8'),
) as Capture;

test('RFC 5905 Figure 8 layout: every field at its offset, decoded and re-encoded byte for byte', () => {
  // Built by hand from the RFC figure: LI=1 VN=4 Mode=4, stratum 2, poll 6, precision -20,
  // root delay 1.5 s (0x00018000), root dispersion 0.25 s (0x00004000), refid 192.0.2.1, then four
  // timestamps with distinct seconds/fraction words.
  const hex =
    '64' +
    '02' +
    '06' +
    'ec' +
    '00018000' +
    '00004000' +
    'c0000201' +
    'eeae1900' +
    '80000000' + // reference
    'eeae1901' +
    '00000001' + // origin
    'eeae1902' +
    '40000000' + // receive
    'eeae1903' +
    'c0000000'; // transmit
  const bytes = Buffer.from(hex, 'hex');
  assert.equal(bytes.length, 48);
  const p = expectDecoded(decodeNtpPacket(bytes));
  assert.equal(p.leap, 1);
  assert.equal(p.version, 4);
  assert.equal(p.mode, 4);
  assert.equal(p.stratum, 2);
  assert.equal(p.poll, 6);
  assert.equal(p.precision, -20);
  assert.equal(shortToSeconds(p.rootDelay), 1.5);
  assert.equal(shortToSeconds(p.rootDispersion), 0.25);
  assert.equal(refIdToIpv4(p.referenceId), '192.0.2.1');
  assert.deepEqual(p.referenceTimestamp, { seconds: 0xeeae1900, fraction: 0x80000000 });
  assert.deepEqual(p.originTimestamp, { seconds: 0xeeae1901, fraction: 1 });
  assert.deepEqual(p.receiveTimestamp, { seconds: 0xeeae1902, fraction: 0x40000000 });
  assert.deepEqual(p.transmitTimestamp, { seconds: 0xeeae1903, fraction: 0xc0000000 });
  assert.deepEqual(p.extensions, []);
  assert.equal(p.mac, undefined);
  assert.equal(encodeNtpPacket(p).toString('hex'), hex);
});

test('captured chrony 4.3 packets decode to the expected fields and re-encode byte for byte', () => {
  assert.match(capture.provenance.tool, /chrony.*4\.3/);
  assert.ok(capture.exchanges.length >= 4);
  for (const ex of capture.exchanges) {
    const reqBytes = Buffer.from(ex.request, 'hex');
    const resBytes = Buffer.from(ex.response, 'hex');
    const req = expectDecoded(decodeNtpPacket(reqBytes));
    const res = expectDecoded(decodeNtpPacket(resBytes));
    assert.equal(req.mode, 3, ex.note);
    assert.equal(res.mode, 4, ex.note);
    // chrony echoes the request's version (VN 3 in the SNTP exchange, 4 otherwise).
    assert.equal(res.version, req.version, ex.note);
    assert.equal(res.stratum, 8, 'chronyd ran with local stratum 8');
    // chrony's local reference id is 127.127.1.1.
    assert.equal(refIdToIpv4(res.referenceId), '127.127.1.1');
    assert.deepEqual(res.originTimestamp, req.transmitTimestamp, 'origin = client transmit, bit for bit');
    assert.ok(timestampDiffSeconds(res.transmitTimestamp, res.receiveTimestamp) >= 0);
    assert.equal(kissCode(res), undefined);
    assert.equal(encodeNtpPacket(req).toString('hex'), ex.request);
    assert.equal(encodeNtpPacket(res).toString('hex'), ex.response);
  }
  assert.ok(capture.exchanges.some((e) => e.family === 'IPv6'));
  assert.ok(
    capture.exchanges.some(
      (e) => expectDecoded(decodeNtpPacket(Buffer.from(e.request, 'hex'))).version === 3,
    ),
  );
});

test('extension fields and a legacy MAC round-trip; malformed trailers are typed errors', () => {
  const header = Buffer.from(capture.exchanges[0]!.request, 'hex');
  const ef = Buffer.from('01040024' + 'aa'.repeat(32), 'hex'); // NTS UID field, 36 bytes
  const mac = Buffer.from('00000001' + 'bb'.repeat(16), 'hex'); // key id + MD5
  const both = Buffer.concat([header, ef, mac]);
  const p = expectDecoded(decodeNtpPacket(both));
  assert.equal(p.extensions.length, 1);
  assert.equal(p.extensions[0]!.type, 0x0104);
  assert.equal(p.extensions[0]!.value.length, 32);
  assert.equal(p.mac?.length, 20);
  assert.ok(encodeNtpPacket(p).equals(both));
  const nak = Buffer.concat([header, Buffer.alloc(4)]);
  assert.equal(expectDecoded(decodeNtpPacket(nak)).mac?.length, 4);
  for (const bad of [
    Buffer.concat([header, Buffer.from('0104', 'hex')]), // 2 stray bytes
    Buffer.concat([header, Buffer.from('01040007aabbccdd', 'hex')]), // length not a multiple of 4
    Buffer.concat([header, Buffer.from('01040040' + 'aa'.repeat(8), 'hex')]), // longer than the packet
  ]) {
    const r = decodeNtpPacket(bad);
    assert.ok(!r.ok && (r.error.code === 'BAD_TRAILER' || r.error.code === 'BAD_EXTENSION'));
  }
});

test('every truncation of a captured packet is rejected as TOO_SHORT, never read out of bounds', () => {
  const full = Buffer.from(capture.exchanges[0]!.response, 'hex');
  for (let n = 0; n < 48; n++) {
    assert.equal(refusal(decodeNtpPacket(full.subarray(0, n))), 'TOO_SHORT');
  }
});

test('fast-check: decode either refuses with an NtpDecodeError or returns a packet that re-encodes to the same bytes', () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 0, maxLength: 200, size: 'max' }), (bytes) => {
      const p = decodeNtpPacket(bytes);
      if (!p.ok) {
        assert.ok(['TOO_SHORT', 'BAD_EXTENSION', 'BAD_TRAILER'].includes(p.error.code));
        assert.ok(p.error.offset !== undefined && p.error.offset <= bytes.length);
        return;
      }
      assert.ok(encodeNtpPacket(p.value).equals(Buffer.from(bytes)));
    }),
    { numRuns: 3000 },
  );
  // Structured packets with random extension fields round-trip too.
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 48, maxLength: 48 }),
      fc.array(
        fc.record({ type: fc.integer({ min: 1, max: 0xffff }), words: fc.integer({ min: 4, max: 20 }) }),
        {
          maxLength: 3,
        },
      ),
      (header, efs) => {
        const parts = [Buffer.from(header)];
        for (const e of efs) {
          const f = Buffer.alloc(e.words * 4);
          f.writeUInt16BE(e.type, 0);
          f.writeUInt16BE(f.length, 2);
          parts.push(f);
        }
        const bytes = Buffer.concat(parts);
        const p = expectDecoded(decodeNtpPacket(bytes));
        assert.ok(encodeNtpPacket(p).equals(bytes));
      },
    ),
    { numRuns: 500 },
  );
});

test('timestamps: Unix/NTP conversion, era 1 after 2036, differences across the era boundary', () => {
  assert.deepEqual(unixToNtp(0, 0), { seconds: 2_208_988_800, fraction: 0 });
  assert.deepEqual(unixToNtp(0, 500_000_000), { seconds: 2_208_988_800, fraction: 0x80000000 });
  // 2036-02-07T06:28:16Z is the start of era 1: NTP seconds wrap to 0.
  const era1 = Date.UTC(2036, 1, 7, 6, 28, 16) / 1000;
  assert.deepEqual(unixToNtp(era1, 0), { seconds: 0, fraction: 0 });
  assert.equal(ntpToUnixMs({ seconds: 0, fraction: 0 }, era1 * 1000 + 5000), era1 * 1000);
  assert.equal(ntpToUnixMs({ seconds: 0xffffffff, fraction: 0 }, era1 * 1000), (era1 - 1) * 1000);
  assert.equal(timestampDiffSeconds({ seconds: 1, fraction: 0 }, { seconds: 0xffffffff, fraction: 0 }), 2);
  assert.equal(timestampDiffSeconds({ seconds: 5, fraction: 0x40000000 }, { seconds: 5, fraction: 0 }), 0.25);
  assert.equal(secondsToShort(1.5), 0x00018000);
  assert.equal(secondsToShort(-1), 0);
  assert.equal(secondsToShort(1e9), 0xffffffff);
});

test('refids: ASCII codes and kiss codes', () => {
  assert.equal(asciiRefId('GPS'), 0x47505300);
  assert.equal(refIdToAscii(asciiRefId('RATE')), 'RATE');
  assert.equal(refIdToAscii(asciiRefId('GPS')), 'GPS');
  assert.throws(() => asciiRefId('TOOLONG'), RangeError);
  const kod = Buffer.alloc(48);
  kod[0] = (3 << 6) | (4 << 3) | 4;
  kod.writeUInt32BE(asciiRefId('DENY'), 12);
  assert.equal(kissCode(expectDecoded(decodeNtpPacket(kod))), 'DENY');
});
