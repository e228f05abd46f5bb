import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import fc from 'fast-check';
import { expectDecoded } from '@broadcast-ops/core/testing';
import { AccessList, parseNetwork } from '../../src/domain/access-list.ts';
import { respond, UNSYNCHRONISED_STATE, type ServerSystemState } from '../../src/domain/ntp-responder.ts';
import { RateLimiter } from '../../src/domain/rate-limiter.ts';
import { asciiRefId, decodeNtpPacket, refIdToAscii, shortToSeconds } from '../../src/protocol/ntp-packet.ts';

const capture = JSON.parse(
  readFileSync(new URL('../fixtures/chrony-packets.json', import.meta.url), 'utf8'),
) as { exchanges: { request: string; response: string }[] };
const chronyRequest = Buffer.from(capture.exchanges[0]!.request, 'hex');
const v3Request = Buffer.from(
  capture.exchanges.find((e) => (Buffer.from(e.request, 'hex')[0]! & 0x38) === 3 << 3)!.request,
  'hex',
);

const LOCKED: ServerSystemState = {
  leap: 0,
  stratum: 3,
  precision: -23,
  referenceId: 0x7f000001,
  referenceTimestamp: { seconds: 0xeeae1900, fraction: 0x12345678 },
  rootDelayS: 0.0015,
  rootDispersionS: 0.005,
  updatedAtMs: 1000,
};
const RX = { seconds: 0xeeae19d1, fraction: 0x2df44eb7 };

test('golden reply to a captured chrony request: every header field from the system state', () => {
  const out = respond(chronyRequest, '127.0.0.1', RX, 1000, LOCKED, {});
  assert.equal(out.kind, 'reply');
  if (out.kind !== 'reply') return;
  // The transmit timestamp is left zero for the io layer to fill immediately before send().
  assert.equal(
    out.packet.toString('hex'),
    '24' +
      '03' +
      '06' +
      'e9' +
      '00000062' +
      '00000148' +
      '7f000001' +
      'eeae190012345678' +
      chronyRequest.subarray(40, 48).toString('hex') +
      'eeae19d12df44eb7' +
      '0000000000000000',
  );
  const p = expectDecoded(decodeNtpPacket(out.packet));
  assert.equal(p.leap, 0);
  assert.equal(p.version, 4);
  assert.equal(p.mode, 4);
  assert.equal(p.poll, expectDecoded(decodeNtpPacket(chronyRequest)).poll, 'poll echoed');
  assert.ok(Math.abs(shortToSeconds(p.rootDelay) - 0.0015) < 2 ** -16);
});

test('version echoed (NTPv3 request gets a VN 3 reply); root dispersion grows at 15 ppm', () => {
  const out = respond(v3Request, '127.0.0.1', RX, 1000 + 100_000, LOCKED, {});
  assert.equal(out.kind, 'reply');
  if (out.kind !== 'reply') return;
  const p = expectDecoded(decodeNtpPacket(out.packet));
  assert.equal(p.version, 3);
  // 100 s after the update: 5 ms + 15e-6 * 100 = 6.5 ms.
  assert.ok(Math.abs(shortToSeconds(p.rootDispersion) - 0.0065) < 2 ** -15);
});

test('unsynchronised: LI 3 and stratum 0', () => {
  const out = respond(chronyRequest, '127.0.0.1', RX, 0, UNSYNCHRONISED_STATE, {});
  assert.equal(out.kind, 'reply');
  if (out.kind !== 'reply') return;
  const p = expectDecoded(decodeNtpPacket(out.packet));
  assert.equal(p.leap, 3);
  assert.equal(p.stratum, 0);
});

test('only mode 3, VN 1-4, >= 48 bytes, no MAC gets an answer; drop reasons are specific', () => {
  const mk = (b0: number, len = 48): Buffer => {
    const b = Buffer.from(chronyRequest);
    b[0] = b0;
    return len === 48 ? b : Buffer.concat([b, Buffer.alloc(len - 48)]).subarray(0, len);
  };
  const cases: [Buffer, string][] = [
    [chronyRequest.subarray(0, 47), 'short'],
    [mk((0 << 6) | (4 << 3) | 4), 'not_client'],
    [mk((4 << 3) | 6), 'not_client'],
    [mk((4 << 3) | 7), 'not_client'],
    [mk((4 << 3) | 1), 'not_client'],
    [mk((0 << 3) | 3), 'bad_version'],
    [mk((5 << 3) | 3), 'bad_version'],
    [Buffer.concat([chronyRequest, Buffer.from('00000001' + 'cc'.repeat(16), 'hex')]), 'authenticated'],
    [Buffer.concat([chronyRequest, Buffer.from('0104', 'hex')]), 'malformed'],
  ];
  for (const [msg, reason] of cases) {
    assert.deepEqual(respond(msg, '127.0.0.1', RX, 0, LOCKED, {}), { kind: 'drop', reason });
  }
  // An unknown extension field is ignored (RFC 7822) and the request answered with a plain header.
  const withEf = Buffer.concat([chronyRequest, Buffer.from('7777001000000000' + '00'.repeat(8), 'hex')]);
  const r = respond(withEf, '127.0.0.1', RX, 0, LOCKED, {});
  assert.equal(r.kind, 'reply');
  if (r.kind === 'reply') assert.equal(r.packet.length, 48);
});

test('KoD RATE after the burst, then drops until the KoD interval passes; other clients unaffected', () => {
  const limiter = new RateLimiter({
    averageIntervalS: 1,
    burst: 4,
    kodIntervalS: 8,
    maxClients: 100,
    ipv6PrefixBits: 64,
  });
  const kinds: string[] = [];
  for (let i = 0; i < 8; i++)
    kinds.push(respond(chronyRequest, '192.0.2.7', RX, 0, LOCKED, { rateLimiter: limiter }).kind);
  assert.deepEqual(kinds, ['reply', 'reply', 'reply', 'reply', 'kod', 'drop', 'drop', 'drop']);
  const kod = respond(chronyRequest, '192.0.2.7', RX, 8000, LOCKED, { rateLimiter: limiter });
  // 8 s later: 8 tokens refilled, so this one is answered normally again.
  assert.equal(kod.kind, 'reply');
  assert.equal(respond(chronyRequest, '192.0.2.8', RX, 0, LOCKED, { rateLimiter: limiter }).kind, 'reply');
  const limiter2 = new RateLimiter({
    averageIntervalS: 100,
    burst: 1,
    kodIntervalS: 8,
    maxClients: 100,
    ipv6PrefixBits: 64,
  });
  respond(chronyRequest, '192.0.2.9', RX, 0, LOCKED, { rateLimiter: limiter2 });
  const k = respond(chronyRequest, '192.0.2.9', RX, 1, LOCKED, { rateLimiter: limiter2 });
  assert.equal(k.kind, 'kod');
  if (k.kind !== 'kod') return;
  const p = expectDecoded(decodeNtpPacket(k.packet));
  // RFC 5905 §7.4: mode 4, LI 3, stratum 0, refid = code, origin = client transmit, rx/tx zero.
  assert.equal(p.mode, 4);
  assert.equal(p.leap, 3);
  assert.equal(p.stratum, 0);
  assert.equal(refIdToAscii(p.referenceId), 'RATE');
  assert.deepEqual(p.originTimestamp, expectDecoded(decodeNtpPacket(chronyRequest)).transmitTimestamp);
  assert.deepEqual(p.receiveTimestamp, { seconds: 0, fraction: 0 });
  assert.deepEqual(p.transmitTimestamp, { seconds: 0, fraction: 0 });
});

test('allow list: outside gets DENY, inside gets time; IPv4-mapped IPv6 is matched as IPv4', () => {
  const access = new AccessList(['10.0.0.0/8', '2001:db8::/32']);
  const deny = respond(chronyRequest, '192.0.2.1', RX, 0, LOCKED, { access });
  assert.equal(deny.kind, 'kod');
  if (deny.kind === 'kod') {
    assert.equal(deny.code, 'DENY');
    assert.equal(refIdToAscii(expectDecoded(decodeNtpPacket(deny.packet)).referenceId), 'DENY');
  }
  assert.equal(respond(chronyRequest, '10.1.2.3', RX, 0, LOCKED, { access }).kind, 'reply');
  assert.equal(respond(chronyRequest, '::ffff:10.1.2.3', RX, 0, LOCKED, { access }).kind, 'reply');
  assert.equal(respond(chronyRequest, '2001:db8::5', RX, 0, LOCKED, { access }).kind, 'reply');
  assert.equal(respond(chronyRequest, '2001:db9::5', RX, 0, LOCKED, { access }).kind, 'kod');
  assert.throws(() => parseNetwork('10.0.0.0/33'), RangeError);
  assert.throws(() => parseNetwork('not-an-ip'), RangeError);
});

test('rate limiter memory is bounded: a spoofed-address flood keeps at most maxClients buckets', () => {
  const limiter = new RateLimiter({
    averageIntervalS: 1,
    burst: 2,
    kodIntervalS: 8,
    maxClients: 64,
    ipv6PrefixBits: 64,
  });
  for (let i = 0; i < 5000; i++) limiter.check(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, i);
  assert.equal(limiter.size, 64);
  // IPv6 clients are grouped by /64.
  assert.equal(limiter.keyOf('2001:db8:1:2:aaaa::1'), limiter.keyOf('2001:db8:1:2:bbbb::9'));
  assert.notEqual(limiter.keyOf('2001:db8:1:2::1'), limiter.keyOf('2001:db8:1:3::1'));
  assert.equal(limiter.keyOf('::ffff:192.0.2.1'), '192.0.2.1');
});

test('fast-check: random datagrams never throw and only valid client requests get a time reply', () => {
  const limiter = new RateLimiter({
    averageIntervalS: 0.001,
    burst: 1000,
    kodIntervalS: 1,
    maxClients: 16,
    ipv6PrefixBits: 64,
  });
  const access = new AccessList(['127.0.0.0/8']);
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 0, maxLength: 120, size: 'max' }),
      fc.constantFrom('127.0.0.1', '192.0.2.1', '::1', '::ffff:127.0.0.2'),
      fc.integer({ min: 0, max: 1e9 }),
      (bytes, address, now) => {
        const out = respond(bytes, address, RX, now, LOCKED, { rateLimiter: limiter, access });
        const isClient =
          bytes.length >= 48 &&
          (bytes[0]! & 7) === 3 &&
          ((bytes[0]! >> 3) & 7) >= 1 &&
          ((bytes[0]! >> 3) & 7) <= 4;
        if (!isClient) assert.equal(out.kind, 'drop');
        if (out.kind !== 'drop') {
          const p = expectDecoded(decodeNtpPacket(out.packet));
          assert.equal(p.mode, 4);
          assert.equal(out.packet.length, 48, 'never larger than 48 bytes: no amplification');
          assert.ok(out.packet.length <= bytes.length);
          assert.ok(Buffer.from(bytes.subarray(40, 48)).equals(out.packet.subarray(24, 32)));
          if (out.kind === 'kod') assert.ok(['RATE', 'DENY'].includes(refIdToAscii(p.referenceId)));
        }
      },
    ),
    { numRuns: 5000 },
  );
  assert.equal(asciiRefId('DENY'), 0x44454e59);
});
