import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createSocket, type Socket, type SocketOptions } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { silentLogger } from '@broadcast-ops/core';
import { expectDecoded, waitFor } from '@broadcast-ops/core/testing';
import { AccessList } from '../../src/domain/access-list.ts';
import { ZERO_CORRECTION, stepTo, type Correction } from '../../src/domain/correction.ts';
import {
  OUTCOME,
  UNSYNCHRONISED_STATE,
  respondInto,
  type ServerSystemState,
} from '../../src/domain/ntp-responder.ts';
import { RateLimiter, type RateDecision, type RateLimitOptions } from '../../src/domain/rate-limiter.ts';
import { ADDR_BYTES, ipv6Text, nativeResponderForTests } from '../../src/io/batch-socket.ts';
import { SERVED_FIELDS, networksArray, policyArray, servedArray } from '../../src/io/native-served.ts';
import { NtpServer } from '../../src/io/ntp-server.ts';
import { ServedClock, type LinearPiece } from '../../src/io/served-clock.ts';
import { decodeNtpPacket, timestampDiffSeconds, type NtpTimestamp } from '../../src/protocol/ntp-packet.ts';

/**
 * The native responder (native/ntp-fast.c, run by native/mmsg.c on its own thread; docs/performance.md
 * "Native responder") against the JavaScript it must agree with, decision for decision and byte for byte:
 * the rate limiter (src/domain/rate-limiter.ts RateLimiter.checkBytes), the access list
 * (src/domain/access-list.ts AccessList.allows), the reply (src/domain/ntp-responder.ts respondInto) and
 * the served time (src/io/served-clock.ts ServedClock.write over ServedClock.linearPiece). Then the server
 * (src/io/ntp-server.ts) over a real socket: replies bracket the served clock, a step of the correction
 * reaches the very next reply, a request with an extension field is still answered, the policy is applied
 * on the native thread as RateLimiter and AccessList would, and plain requests are answered while the
 * JavaScript thread is blocked.

 */

const native = nativeResponderForTests();

/** The addon's test entry points (packages/timesvc/build/Release/ntp_mmsg.node must be built). */
function addon(): NonNullable<typeof native> {
  assert.ok(native, 'ntp_mmsg.node is missing: run `npm rebuild -w packages/timesvc`');
  return native;
}

// ---- Address records (native/mmsg.c fill_record): [0] family 4|6, [2..3] port BE, [4..] address ----

type AddressKind = 'v4' | 'mapped' | 'v6';

/** A 24-byte address record; `junk` fills the bytes the record's family does not use (must be ignored). */
function record(kind: AddressKind, address: Uint8Array, port: number, junk = 0): Uint8Array {
  const r = new Uint8Array(ADDR_BYTES).fill(junk);
  r[0] = kind === 'v4' ? 4 : 6;
  r[1] = 0;
  r[2] = port >>> 8;
  r[3] = port & 0xff;
  if (kind === 'v4') {
    r.set(address.subarray(0, 4), 4);
  } else if (kind === 'mapped') {
    r.fill(0, 4, 14);
    r[14] = 0xff;
    r[15] = 0xff;
    r.set(address.subarray(0, 4), 16);
  } else {
    r.set(address.subarray(0, 16), 4);
  }
  return r;
}

/** The source address as dgram would give it (BatchSocket.sourceAddress): dotted IPv4 or IPv6 text. */
function addressText(rec: Uint8Array): string {
  if (rec[0] === 4) return `${rec[4]}.${rec[5]}.${rec[6]}.${rec[7]}`;
  return ipv6Text(rec, 4);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `bytes` with bit `bit` (0 = the most significant bit of byte 0) flipped. */
function flipBit(bytes: Uint8Array, bit: number): Uint8Array {
  const out = bytes.slice();
  const i = bit >>> 3;
  out[i] = (out[i] ?? 0) ^ (0x80 >>> (bit & 7));
  return out;
}

const DECISIONS: readonly RateDecision[] = ['allow', 'kod', 'drop'];

// ---- 1. Rate limiter: nf_limiter_check (ntp-fast.c) = RateLimiter.checkBytes (rate-limiter.ts) ----

/** Both limiters over the same requests; the C decisions (0 allow, 1 kod, 2 drop) by RateDecision name. */
function bothLimiters(
  opts: RateLimitOptions,
  records: Uint8Array,
  times: Float64Array,
): { c: string[]; js: RateDecision[] } {
  const policy = Float64Array.of(
    1,
    opts.averageIntervalS,
    opts.burst,
    opts.kodIntervalS,
    opts.maxClients,
    opts.ipv6PrefixBits,
  );
  // The policy array the server hands over (native-served.ts policyArray) is this one.
  assert.deepEqual(policyArray({ rateLimiter: new RateLimiter(opts) }), policy);
  const c = [...addon().testLimiter(policy, records, times)].map((d) => DECISIONS[d] ?? `code ${d}`);
  const limiter = new RateLimiter(opts);
  const js = Array.from(times, (t, i) => limiter.checkBytes(records, i * ADDR_BYTES, t));
  return { c, js };
}

function firstDifference(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return -1;
}

test('fast-check: the C rate limiter decides as RateLimiter.checkBytes (IPv4, mapped, IPv6 prefixes, eviction)', () => {
  // A small pool of clients: IPv4 addresses that collide with their IPv4-mapped forms, IPv6 addresses
  // that differ from a base by one bit (inside or outside the configured prefix), near-mapped IPv6.
  const v4 = fc.constantFrom(
    Uint8Array.of(10, 0, 0, 1),
    Uint8Array.of(10, 0, 0, 2),
    Uint8Array.of(192, 0, 2, 1),
    Uint8Array.of(0, 0, 0, 0),
  );
  const base6 = fc.constantFrom(
    Uint8Array.of(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
    Uint8Array.of(0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0),
    // ::ffff:10.0.0.1 as IPv6 bytes: a flip in its first 96 bits makes it plain IPv6, in the last 32
    // another mapped (IPv4) client.
    Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1),
  );
  const client = fc.oneof(
    fc.record({ kind: fc.constant('v4' as const), v4, port: fc.nat(0xffff), junk: fc.nat(255) }),
    fc.record({ kind: fc.constant('mapped' as const), v4, port: fc.nat(0xffff), junk: fc.nat(255) }),
    fc.record({
      kind: fc.constant('v6' as const),
      base: base6,
      flip: fc.option(fc.integer({ min: 0, max: 127 }), { nil: undefined }),
      port: fc.nat(0xffff),
    }),
  );
  const pool = fc
    .array(client, { minLength: 1, maxLength: 8 })
    .map((cs) =>
      cs.map((c) =>
        c.kind === 'v6'
          ? record('v6', c.flip === undefined ? c.base : flipBit(c.base, c.flip), c.port)
          : record(c.kind, c.v4, c.port, c.junk),
      ),
    );
  const options = fc.record({
    averageIntervalS: fc.double({ min: 0.01, max: 10, noNaN: true }),
    burst: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.double({ min: 1, max: 5, noNaN: true })),
    kodIntervalS: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 10, noNaN: true })),
    maxClients: fc.integer({ min: 1, max: 8 }),
    ipv6PrefixBits: fc.integer({ min: 0, max: 128 }),
  });
  // Steps between requests: mostly forward (back to back up to seconds), sometimes backwards.
  const step = fc.oneof(
    { weight: 8, arbitrary: fc.double({ min: 0, max: 3000, noNaN: true }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.double({ min: -5000, max: 0, noNaN: true }) },
  );
  const requests = fc.array(fc.tuple(fc.nat(), step), { minLength: 1, maxLength: 80 });
  fc.assert(
    fc.property(
      options,
      pool,
      requests,
      fc.double({ min: 0, max: 1e7, noNaN: true }),
      (opts, clients, reqs, start) => {
        const records = new Uint8Array(reqs.length * ADDR_BYTES);
        const times = new Float64Array(reqs.length);
        let t = start;
        reqs.forEach(([who, dt], i) => {
          t += dt;
          times[i] = t;
          records.set(clients[who % clients.length]!, i * ADDR_BYTES);
        });
        const { c, js } = bothLimiters(opts, records, times);
        const i = firstDifference(c, js);
        assert.equal(i, -1, `request ${i}: C ${c[i]}, JavaScript ${js[i]}`);
      },
    ),
    { numRuns: 1500, interruptAfterTimeLimit: 8000, includeErrorInReport: true },
  );
});

test('fast-check: the C rate limiter agrees past 1024 clients (its table grows) and with eviction at scale', () => {
  // nf_limiter_init allocates min(maxClients, 1024) buckets and grows them on demand (limiter_grow); the
  // open-addressing table is rebuilt then, and evictions shift probe chains back (table_remove).
  fc.assert(
    fc.property(
      fc.integer({ min: 900, max: 3000 }),
      fc.integer({ min: 500, max: 4000 }),
      fc.integer({ min: 0, max: 128 }),
      fc.integer({ min: 1, max: 0xffffffff }),
      (maxClients, distinct, prefix, seed) => {
        const opts = { averageIntervalS: 1, burst: 2, kodIntervalS: 5, maxClients, ipv6PrefixBits: prefix };
        const n = 6000;
        const records = new Uint8Array(n * ADDR_BYTES);
        const times = new Float64Array(n);
        let s = seed;
        const rand = (): number => {
          // xorshift32: deterministic per seed, so a failure is reproducible
          s ^= s << 13;
          s ^= s >>> 17;
          s ^= s << 5;
          return (s >>> 0) / 0x100000000;
        };
        for (let i = 0; i < n; i++) {
          const who = Math.floor(rand() * distinct);
          const addr = new Uint8Array(16);
          addr[0] = 0x20;
          addr[1] = 0x01;
          addr[(who % 3) * 4 + 4] = who >>> 8;
          addr[(who % 3) * 4 + 5] = who & 0xff;
          const kind: AddressKind = who % 4 === 0 ? 'v6' : who % 4 === 1 ? 'mapped' : 'v4';
          const v4 = Uint8Array.of(10, who >>> 16, (who >>> 8) & 0xff, who & 0xff);
          records.set(record(kind, kind === 'v6' ? addr : v4, 123), i * ADDR_BYTES);
          times[i] = i * 0.7;
        }
        const { c, js } = bothLimiters(opts, records, times);
        const i = firstDifference(c, js);
        assert.equal(i, -1, `request ${i}: C ${c[i]}, JavaScript ${js[i]}`);
      },
    ),
    { numRuns: 12, interruptAfterTimeLimit: 8000, includeErrorInReport: true },
  );
});

// ---- 2. Access list: nf_access_allows (ntp-fast.c) = AccessList.allows (access-list.ts) ----

/** Address material that makes matches likely: a few bases, and random addresses. */
const v4Bytes = fc.oneof(
  fc.constantFrom(Uint8Array.of(10, 0, 0, 0), Uint8Array.of(192, 0, 2, 128), Uint8Array.of(0, 0, 0, 0)),
  fc.uint8Array({ minLength: 4, maxLength: 4 }),
);
const v6Bytes = fc.oneof(
  fc.constantFrom(
    Uint8Array.of(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
    new Uint8Array(16),
    Uint8Array.of(0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
  ),
  fc.uint8Array({ minLength: 16, maxLength: 16 }),
);

/** The text of an IPv6 address in one of the forms a configuration may use. */
function v6Text(bytes: Uint8Array, form: number): string {
  const groups = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16));
  if (form === 1) return groups.join(':'); // uncompressed, hex tail even when mapped
  if (form === 2) return ipv6Text(bytes, 0).toUpperCase();
  return ipv6Text(bytes, 0); // RFC 5952, mapped with a dotted tail
}

interface Net {
  family: 4 | 6;
  bytes: Uint8Array;
  prefix: number | undefined;
  text: string;
}

const network = fc.oneof(
  fc.tuple(v4Bytes, fc.option(fc.integer({ min: 0, max: 32 }), { nil: undefined })).map(([b, p]): Net => ({
    family: 4,
    bytes: b,
    prefix: p,
    text: `${b.join('.')}${p === undefined ? '' : `/${p}`}`,
  })),
  fc
    .tuple(v6Bytes, fc.option(fc.integer({ min: 0, max: 128 }), { nil: undefined }), fc.nat(2))
    .map(([b, p, form]): Net => ({
      family: 6,
      bytes: b,
      prefix: p,
      text: `${v6Text(b, form)}${p === undefined ? '' : `/${p}`}`,
    })),
  // IPv4-mapped networks, ::ffff:a.b.c.d/96 and longer (and a few shorter, reaching into the ::ffff).
  fc
    .tuple(v4Bytes, fc.oneof(fc.integer({ min: 96, max: 128 }), fc.integer({ min: 72, max: 95 })), fc.nat(2))
    .map(([b, p, form]): Net => {
      const bytes = record('mapped', b, 0).slice(4, 20);
      return { family: 6, bytes, prefix: p, text: `${v6Text(bytes, form)}/${p}` };
    }),
  fc.constantFrom<Net>(
    { family: 4, bytes: new Uint8Array(4), prefix: 0, text: '0.0.0.0/0' },
    { family: 6, bytes: new Uint8Array(16), prefix: 0, text: '::/0' },
  ),
);

/** A source near one of the networks (one bit flipped, inside or outside its prefix) or anywhere. */
const source = fc.record({
  kind: fc.constantFrom<AddressKind>('v4', 'mapped', 'v6'),
  near: fc.nat(),
  flip: fc.option(fc.nat(127), { nil: undefined }),
  v4: v4Bytes,
  v6: v6Bytes,
  port: fc.nat(0xffff),
});

test('fast-check: the C access list allows exactly the sources AccessList.allows does', () => {
  const verdicts = new Set<number>();
  fc.assert(
    fc.property(
      fc.array(network, { maxLength: 5 }),
      fc.array(source, { minLength: 1, maxLength: 12 }),
      (nets, sources) => {
        const access = new AccessList(nets.map((n) => n.text));
        const records = concat(
          sources.map((s) => {
            const net = nets.length > 0 ? nets[s.near % nets.length] : undefined;
            let addr: Uint8Array;
            let kind = s.kind;
            if (net !== undefined && s.near % 3 !== 0) {
              // Near a network: IPv4 networks give IPv4 or mapped sources; IPv6 ones give IPv6 sources
              // (an IPv4-mapped network's neighbours are then mapped or not, by the bit flipped).
              kind = net.family === 4 ? (s.kind === 'v6' ? 'mapped' : s.kind) : 'v6';
              addr =
                s.flip === undefined ? net.bytes : flipBit(net.bytes, s.flip % (net.family === 4 ? 32 : 128));
            } else {
              addr = kind === 'v6' ? s.v6 : s.v4;
            }
            return record(kind, addr, s.port, 0);
          }),
        );
        const c = [...addon().testAccess(networksArray({ access }), records)];
        const texts = sources.map((_, i) => addressText(records.subarray(i * ADDR_BYTES)));
        const js = texts.map((t) => (access.allows(t) ? 1 : 0));
        for (const v of js) verdicts.add(v);
        const i = firstDifference(c, js);
        assert.equal(
          i,
          -1,
          `networks ${JSON.stringify(nets.map((n) => n.text))}, source ${texts[i]}: C ${c[i]}, JavaScript ${js[i]}`,
        );
      },
    ),
    { numRuns: 3000, interruptAfterTimeLimit: 8000, includeErrorInReport: true },
  );
  assert.deepEqual([...verdicts].sort(), [0, 1], 'both verdicts were compared');
});

// ---- 3. The reply: nf_decide + nf_served_write (ntp-fast.c) = respondInto + ServedClock.write ----

/** An NTP timestamp at buf[o, o + 8) as one 64-bit number (seconds · 2³² + fraction). */
function ntp64(buf: Uint8Array, o: number): bigint {
  const v = new DataView(buf.buffer, buf.byteOffset + o, 8);
  return v.getBigUint64(0);
}

/** The largest double below x (x finite). */
function below(x: number): number {
  if (x === 0) return -Number.MIN_VALUE;
  const f = new Float64Array([x]);
  const i = new BigInt64Array(f.buffer);
  i[0] = i[0]! + (x > 0 ? -1n : 1n);
  return f[0]!;
}

/** How far apart, in units of the 32-bit fraction (2⁻³² s), the C and JavaScript timestamps are. */
function fractionUnits(a: Uint8Array, b: Uint8Array, o: number): bigint {
  const d = ntp64(a, o) - ntp64(b, o);
  return d < 0n ? -d : d;
}

/** At most 2 units of the fraction apart: the piece's arithmetic rounds differently from write()'s. */
const TIMESTAMP_TOLERANCE = 2n;

const extensionField = fc
  .tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0, max: 5 }), fc.nat(255))
  .map(([type, words, fill]) => {
    const f = new Uint8Array(4 + 4 * words).fill(fill);
    f[0] = type >>> 8;
    f[1] = type & 0xff;
    f[2] = 0;
    f[3] = 4 + 4 * words;
    return f;
  });
const trailer = fc.oneof(
  { weight: 4, arbitrary: fc.constant(new Uint8Array(0)) },
  { weight: 3, arbitrary: fc.array(extensionField, { minLength: 1, maxLength: 3 }).map(concat) },
  // Legacy MACs (RFC 5905 §7.3: key id + MD5 or SHA-1) and the 4-byte crypto-NAK: dropped as authenticated.
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.uint8Array({ minLength: 20, maxLength: 20 }),
      fc.uint8Array({ minLength: 24, maxLength: 24 }),
    ),
  },
  { weight: 1, arbitrary: fc.constant(new Uint8Array(4)) },
  // A field whose length is not a multiple of 4, or runs past the end: malformed.
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 0, max: 80 }), fc.nat(8)).map(([len, extra]) => {
      const f = new Uint8Array(4 + extra);
      f[3] = len;
      return f;
    }),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 72 }) },
);
const header = fc
  .record({
    li: fc.integer({ min: 0, max: 3 }),
    vn: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 4 }) }, fc.integer({ min: 0, max: 7 })),
    mode: fc.oneof({ weight: 4, arbitrary: fc.constant(3) }, fc.integer({ min: 0, max: 7 })),
    rest: fc.uint8Array({ minLength: 47, maxLength: 47 }),
  })
  .map(({ li, vn, mode, rest }) => concat([Uint8Array.of((li << 6) | (vn << 3) | mode), rest]));
const request = fc.oneof(
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 120 }) },
  { weight: 4, arbitrary: fc.tuple(header, trailer).map(([h, t]) => concat([h, t])) },
);

/** Seconds for root delay and dispersion: 0, negative, ordinary, and values that saturate the short format. */
const shortSeconds = fc.oneof(
  fc.constantFrom(0, -0, 1 / 65536, 0.5 / 65536, 65535.99999, 65536, 1e300, Number.POSITIVE_INFINITY),
  fc.double({ min: -10, max: -1e-12, noNaN: true }),
  fc.double({ min: 0, max: 2, noNaN: true }),
  fc.double({ min: 2, max: 1e6, noNaN: true }),
);

const stateArb = fc.record({
  leap: fc.integer({ min: 0, max: 3 }),
  stratum: fc.integer({ min: 0, max: 16 }),
  precision: fc.integer({ min: -32, max: 0 }),
  referenceId: fc.nat(0xffffffff),
  refSeconds: fc.nat(0xffffffff),
  refFraction: fc.nat(0xffffffff),
  rootDelayS: shortSeconds,
  rootDispersionS: shortSeconds,
  dispersionRateS: fc.option(fc.oneof(fc.double({ min: 0, max: 1e-3, noNaN: true }), fc.constant(1e3)), {
    nil: undefined,
  }),
  // updatedAtMs relative to the request's arrival: after it (then no growth), or up to hours before.
  sinceUpdateMs: fc.oneof(
    fc.double({ min: -1e6, max: 0, noNaN: true }),
    fc.double({ min: 0, max: 1e7, noNaN: true }),
  ),
});

type Drawn<A> = A extends fc.Arbitrary<infer T> ? T : never;

function systemState(s: Drawn<typeof stateArb>, atMs: number): ServerSystemState {
  return {
    leap: s.leap,
    stratum: s.stratum,
    precision: s.precision,
    referenceId: s.referenceId,
    referenceTimestamp: { seconds: s.refSeconds, fraction: s.refFraction },
    rootDelayS: s.rootDelayS,
    rootDispersionS: s.rootDispersionS,
    ...(s.dispersionRateS !== undefined ? { dispersionRateS: s.dispersionRateS } : {}),
    updatedAtMs: atMs - s.sinceUpdateMs,
  };
}

/** A correction of the served clock (correction.ts) with its breaks near `base`, and p0 near one of them. */
const correctionArb = fc.record({
  t0: fc.double({ min: -60_000, max: 60_000, noNaN: true }),
  phaseS: fc.oneof(
    fc.constant(0),
    fc.double({ min: -1, max: 1, noNaN: true }),
    fc.double({ min: -100, max: 100, noNaN: true }),
  ),
  freq: fc.oneof(fc.constant(0), fc.double({ min: -500e-6, max: 500e-6, noNaN: true })),
  slewS: fc.oneof(fc.constant(0), fc.double({ min: -0.5, max: 0.5, noNaN: true })),
  slewRate: fc.double({ min: 0.0005, max: 0.005, noNaN: true }),
  leapBaseS: fc.option(fc.integer({ min: -2, max: 2 }), { nil: undefined }),
  leap: fc.option(
    fc.record({
      at: fc.double({ min: -60_000, max: 60_000, noNaN: true }),
      deltaS: fc.constantFrom(-1, 1),
      // A step, or a smear (config leap_smear_interval: at least 1 s).
      smearMs: fc.oneof(fc.constant(0), fc.double({ min: 1000, max: 10_000, noNaN: true })),
    }),
    { nil: undefined },
  ),
  // p0: at or near a break (index into the breaks), or anywhere around.
  near: fc.nat(),
  d: fc.oneof(
    fc.constant(0),
    fc.double({ min: -50, max: 50, noNaN: true }),
    fc.double({ min: -1e6, max: 1e6, noNaN: true }),
  ),
});

/** The correction, p0, and the instants where the correction is not linear (correction.ts, leap.ts). */
function correctionOf(
  k: Drawn<typeof correctionArb>,
  base: number,
): { c: Correction; p0: number; breaks: number[] } {
  const c: Correction = {
    t0Ms: base + k.t0,
    phaseS: k.phaseS,
    freq: k.freq,
    slewS: k.slewS,
    slewRate: k.slewRate,
    ...(k.leapBaseS !== undefined ? { leapBaseS: k.leapBaseS } : {}),
    ...(k.leap ? { leap: { atMs: base + k.leap.at, deltaS: k.leap.deltaS, smearMs: k.leap.smearMs } } : {}),
  };
  const breaks = [c.t0Ms, c.t0Ms + (Math.abs(c.slewS) / c.slewRate) * 1000];
  if (c.leap) breaks.push(c.leap.atMs, c.leap.atMs - c.leap.smearMs / 2, c.leap.atMs + c.leap.smearMs / 2);
  return { c, p0: breaks[k.near % breaks.length]! + k.d, breaks };
}

/** Where in the piece: its start, its last representable instant, or a fraction of it (1 h when endless). */
const where = fc.oneof(
  fc.constant<'start' | 'end'>('start'),
  fc.constant<'start' | 'end'>('end'),
  fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
);

function instantIn(piece: LinearPiece, w: 'start' | 'end' | number): number {
  const end = Math.min(piece.p1, piece.p0 + 3_600_000);
  if (w === 'start') return piece.p0;
  if (w === 'end') return Number.isFinite(piece.p1) ? Math.max(piece.p0, below(piece.p1)) : end;
  const at = piece.p0 + w * (end - piece.p0);
  return at < piece.p1 ? at : piece.p0;
}

const REC = record('v4', Uint8Array.of(192, 0, 2, 1), 123);

let pureClock: ServedClock;
before(() => {
  // A clock of its own for the pure properties: their corrections must not reach a server's listener.
  pureClock = new ServedClock();
});

test('fast-check: testRespond writes the bytes of respondInto + ServedClock.write, with the same outcome', () => {
  const base = performance.now();
  const served = new Float64Array(SERVED_FIELDS);
  const seen = new Set<number>();
  fc.assert(
    fc.property(request, stateArb, correctionArb, where, (req, s, k, w) => {
      const { c, p0 } = correctionOf(k, base);
      pureClock.setCorrection(c);
      const piece = pureClock.linearPiece(p0);
      assert.ok(piece, 'the host clock has pieces');
      const at = instantIn(piece, w);
      const state = systemState(s, at);
      const outC = new Uint8Array(48).fill(0xcc);
      const code = addon().testRespond(servedArray(served, piece, state), req, REC, at, outC);
      const outJs = new Uint8Array(48).fill(0xcc);
      const expected = respondInto(req, 0, req.length, addressText(REC), at, state, {}, outJs, 0);
      assert.equal(code, expected, `outcome of a ${req.length}-byte request`);
      seen.add(code);
      if (expected !== OUTCOME.REPLY) {
        assert.deepEqual(outC, outJs, 'a drop writes nothing (no policy: no kiss either)');
        return;
      }
      pureClock.write(outJs, 32, true, at);
      assert.deepEqual(
        outC.subarray(0, 32),
        outJs.subarray(0, 32),
        'header, delay, dispersion, refid, ref, origin',
      );
      assert.deepEqual(outC.subarray(40), outJs.subarray(40), 'transmit timestamp left zero');
      const units = fractionUnits(outC, outJs, 32);
      assert.ok(
        units <= TIMESTAMP_TOLERANCE,
        `receive timestamp ${units} units of 2^-32 s off at ${at} in [${piece.p0}, ${piece.p1})`,
      );
    }),
    { numRuns: 2000, interruptAfterTimeLimit: 10_000, includeErrorInReport: true },
  );
  pureClock.setCorrection(ZERO_CORRECTION);
  // Not vacuous: replies and every drop reason respondInto has without a policy were compared.
  assert.deepEqual(
    [...seen].sort((a, b) => a - b),
    [
      OUTCOME.REPLY,
      OUTCOME.DROP_SHORT,
      OUTCOME.DROP_NOT_CLIENT,
      OUTCOME.DROP_BAD_VERSION,
      OUTCOME.DROP_MALFORMED,
      OUTCOME.DROP_AUTHENTICATED,
    ],
  );
});

test('fast-check: a linear piece never straddles a break (the C piece = ServedClock.write across it)', () => {
  const base = performance.now();
  const served = new Float64Array(SERVED_FIELDS);
  const plain = new Uint8Array(48);
  plain[0] = 0x23;
  const state = { ...UNSYNCHRONISED_STATE, leap: 0, stratum: 2 };
  fc.assert(
    fc.property(
      correctionArb,
      fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 3, maxLength: 6 }),
      (k, fractions) => {
        const { c, p0, breaks } = correctionOf(k, base);
        pureClock.setCorrection(c);
        const piece = pureClock.linearPiece(p0)!;
        assert.equal(piece.p0, p0);
        assert.ok(piece.p1 > piece.p0, `an empty piece [${piece.p0}, ${piece.p1})`);
        // It ends at the first break after p0 at the latest (then the samples below must agree anywhere in it).
        const next = Math.min(...breaks.filter((b) => b > p0));
        assert.ok(piece.p1 <= next, `the piece [${piece.p0}, ${piece.p1}) runs past the break at ${next}`);
        servedArray(served, piece, state);
        const samples: (number | 'start' | 'end')[] = ['start', 'end', ...fractions];
        for (const w of samples) {
          const at = instantIn(piece, w);
          const outC = new Uint8Array(48);
          assert.equal(addon().testRespond(served, plain, REC, at, outC), OUTCOME.REPLY);
          const js = new Uint8Array(48);
          pureClock.write(js, 32, true, at);
          const units = fractionUnits(outC, js, 32);
          assert.ok(
            units <= TIMESTAMP_TOLERANCE,
            `at ${at} in [${piece.p0}, ${piece.p1}): the piece is ${units} units of 2^-32 s off ServedClock.write`,
          );
        }
      },
    ),
    { numRuns: 1500, interruptAfterTimeLimit: 10_000, includeErrorInReport: true },
  );
  pureClock.setCorrection(ZERO_CORRECTION);
});

/**
 * A rounding edge found by the fast-check above: secondsToShort (ntp-packet.ts) rounds with Math.round;
 * floor(x + 0.5) would round the largest double below 0.5 up (x + 0.5 rounds to 1), so ntp-fast.c uses
 * round(), which is exact.
 */
test('root delay and dispersion of (0.5 − 2⁻⁵⁴)/65536 s: the C short format agrees with secondsToShort', () => {
  const tricky = (0.5 - 2 ** -54) / 65536;
  const state: ServerSystemState = {
    ...UNSYNCHRONISED_STATE,
    rootDelayS: tricky,
    rootDispersionS: tricky,
    dispersionRateS: 0,
  };
  const req = new Uint8Array(48);
  req[0] = 0x23;
  const piece = { p0: 0, p1: Number.POSITIVE_INFINITY, sec0: 1, ns0: 0, rate: 1 };
  const outC = new Uint8Array(48);
  addon().testRespond(servedArray(new Float64Array(SERVED_FIELDS), piece, state), req, REC, 1, outC);
  const outJs = new Uint8Array(48);
  respondInto(req, 0, 48, '', 1, state, {}, outJs, 0);
  assert.deepEqual(outC.subarray(4, 12), outJs.subarray(4, 12), 'root delay and root dispersion');
});

// ---- 4–6. The server over a real socket (ntp-server.ts, native/mmsg.c native_batch) ----

const serverState: ServerSystemState = {
  ...UNSYNCHRONISED_STATE,
  leap: 0,
  stratum: 3,
  updatedAtMs: performance.now(),
};
/** A started NtpServer on 127.0.0.1 (an ephemeral port) serving `clock` with the test's server state. */
async function startServer(
  clock: ServedClock,
  extra: Partial<ConstructorParameters<typeof NtpServer>[0]> = {},
): Promise<NtpServer> {
  const s = new NtpServer({
    port: 0,
    bind: { udp4: '127.0.0.1' },
    clock,
    state: () => serverState,
    policy: {},
    logger: silentLogger(),
    ...extra,
  });
  await s.start();
  return s;
}

let netClock: ServedClock;
let server: NtpServer;
let port: number;

before(async () => {
  netClock = new ServedClock();
  server = await startServer(netClock);
  port = server.addresses[0]!.port;
});

after(async () => {
  await server.close();
});

/** Block this event loop (the server's JavaScript thread) for `ms`. */
function block(ms: number): void {
  const start = performance.now();
  while (performance.now() - start < ms) {
    /* spin */
  }
}

/** The tag in a request's transmit seconds (its origin in the reply); the fraction carries a sequence. */
const TAG = 0xb47c4000;

function plainRequest(seq: number, tag = TAG): Buffer {
  const req = Buffer.alloc(48);
  req[0] = 0x23; // LI 0, VN 4, mode 3
  req[2] = 6;
  req.writeUInt32BE(tag, 40);
  req.writeUInt32BE(seq, 44);
  return req;
}

interface Reply {
  packet: Buffer;
  /** The served and raw time read by the test when the reply was handed to it. */
  served: NtpTimestamp;
  raw: NtpTimestamp;
}

interface Client {
  sock: Socket;
  /** Replies by the sequence number in their origin timestamp. */
  replies: Map<number, Reply>;
  address: string;
}

/** A client socket whose send() reaches the kernel before it returns (IP literal, synchronous lookup). */
async function client(address: string, clock: ServedClock): Promise<Client> {
  const lookup = ((_h: string, o: unknown, cb?: (e: null, a: string, f: number) => void) => {
    (typeof o === 'function' ? (o as typeof cb)! : cb!)(null, _h, 4);
  }) as unknown as SocketOptions['lookup'];
  const sock = createSocket({ type: 'udp4', lookup });
  await new Promise<void>((r) => sock.bind(0, address, r));
  const replies = new Map<number, Reply>();
  sock.on('message', (m) => {
    const served = clock.read(true);
    const raw = clock.read(false);
    replies.set(m.readUInt32BE(28), { packet: m, served, raw });
  });
  return { sock, replies, address };
}

interface Exchange {
  reply: Reply;
  /** Served and raw time read just before send(). */
  served: NtpTimestamp;
  raw: NtpTimestamp;
}

/** Send `req` (sequence in its transmit fraction) and wait for its reply. */
async function exchange(c: Client, req: Buffer, to: number, clock: ServedClock): Promise<Exchange> {
  const seq = req.readUInt32BE(44);
  const served = clock.read(true);
  const raw = clock.read(false);
  c.sock.send(req, to, '127.0.0.1');
  const reply = await waitFor(() => c.replies.get(seq), { timeoutMs: 5000, what: `the reply to ${seq}` });
  return { reply, served, raw };
}

/** Slack for T2/T3 against the test's own readings of the same served clock, seconds. */
const SLACK_S = 0.001;

/** RFC 5905 §8: T2 after the request left (minus slack), T3 before the reply arrived (plus slack), T2 ≤ T3. */
function assertBrackets(x: Exchange, what: string): { t2: NtpTimestamp; t3: NtpTimestamp } {
  const p = expectDecoded(decodeNtpPacket(x.reply.packet));
  assert.equal(p.mode, 4, what);
  assert.equal(p.stratum, 3, what);
  const t2 = p.receiveTimestamp;
  const t3 = p.transmitTimestamp;
  const early = timestampDiffSeconds(t2, x.served);
  const late = timestampDiffSeconds(t3, x.reply.served);
  assert.ok(
    early >= -SLACK_S,
    `${what}: T2 ${(early * 1e3).toFixed(3)} ms from the served time before sending`,
  );
  assert.ok(late <= SLACK_S, `${what}: T3 ${(late * 1e3).toFixed(3)} ms from the served time on arrival`);
  assert.ok(timestampDiffSeconds(t3, t2) >= 0, `${what}: T2 ≤ T3`);
  return { t2, t3 };
}

test('over the socket: the native responder answers, T2/T3 bracket the served clock, counters add up', async () => {
  assert.equal(server.responder, 'native');
  assert.equal(server.socketPath, 'batched');
  const c = await client('127.0.0.1', netClock);
  const c0 = structuredClone(server.counters);
  let sent = 0;
  try {
    for (let i = 0; i < 20; i++) {
      const x = await exchange(c, plainRequest(i), port, netClock);
      sent++;
      const p = expectDecoded(decodeNtpPacket(x.reply.packet));
      assert.equal(p.originTimestamp.seconds, TAG, 'origin = the request transmit timestamp');
      assert.equal(p.originTimestamp.fraction, i);
      assert.equal(p.poll, 6, 'poll echoed');
      assertBrackets(x, `plain request ${i}`);
    }

    // A step of the correction (correction.ts stepTo: +5 s from now): the listener hands the native thread a
    // new piece at once (ntp-server.ts refresh), so the very next reply carries it, without waiting.
    netClock.setCorrection(stepTo(performance.now(), 5, 0, 0.0005));
    const stepped = await exchange(c, plainRequest(100), port, netClock);
    sent++;
    const { t2, t3 } = assertBrackets(stepped, 'the first request after the step');
    const shift = timestampDiffSeconds(t2, stepped.raw) - 5;
    assert.ok(shift >= -SLACK_S && shift <= 0.01, `T2 − raw − 5 s = ${(shift * 1e3).toFixed(3)} ms`);
    assert.ok(timestampDiffSeconds(t3, stepped.reply.raw) - 5 <= SLACK_S, 'T3 stepped too');

    // An extension field (RFC 7822: an unknown type, 16 bytes, skipped): still answered, bracketed, stepped.
    const field = Buffer.alloc(16);
    field.writeUInt16BE(0x1234, 0);
    field.writeUInt16BE(16, 2);
    const ef = await exchange(c, Buffer.concat([plainRequest(200), field]), port, netClock);
    sent++;
    const efTimes = assertBrackets(ef, 'a request with an extension field');
    assert.ok(Math.abs(timestampDiffSeconds(efTimes.t2, ef.raw) - 5) < 0.5, 'served on the stepped clock');
    assert.equal(expectDecoded(decodeNtpPacket(ef.reply.packet)).originTimestamp.fraction, 200);

    const c1 = server.counters;
    assert.equal(c1.requests - c0.requests, sent, 'requests');
    assert.equal(c1.responses - c0.responses, sent, 'responses');
    assert.equal(c1.sendErrors - c0.sendErrors, 0);
  } finally {
    c.sock.close();
    netClock.setCorrection(ZERO_CORRECTION);
  }
});

test('plain requests are answered while the JavaScript thread is blocked (from a child process)', async () => {
  // The child sends 20 plain requests 10 ms apart once told to go, and reports when each reply came (wall
  // clock, shared by both processes). This thread is blocked meanwhile: only the native thread can answer.
  const code = `
    const dgram = require('node:dgram');
    const port = Number(process.env.NTP_PORT);
    const s = dgram.createSocket('udp4');
    const replies = [];
    s.on('message', (m) => replies.push({ seq: m.readUInt32BE(28), wallMs: Date.now() }));
    s.bind(0, '127.0.0.1', () => {
      process.stdout.write('ready\\n');
      process.stdin.once('data', () => {
        const goMs = Date.now();
        let i = 0;
        const send = () => {
          const b = Buffer.alloc(48);
          b[0] = 0x23;
          b.writeUInt32BE(i, 44);
          s.send(b, port, '127.0.0.1');
          if (++i < 20) setTimeout(send, 10);
        };
        send();
        setTimeout(() => {
          process.stdout.write(JSON.stringify({ goMs, replies }) + '\\n');
          s.close();
          process.exit(0);
        }, 600);
      });
    });`;
  const child = spawn(process.execPath, ['-e', code], {
    env: { ...process.env, NODE_OPTIONS: '', NTP_PORT: String(port) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    await waitFor(() => out.includes('ready\n'), { timeoutMs: 10_000, what: `the child ready ${err}` });
    const blockStartMs = Date.now();
    // A pipe write reaches the child before write() returns when the pipe is empty (libuv tries it at once).
    child.stdin.write('go\n');
    block(400);
    const blockEndMs = Date.now();
    assert.equal(await exited, 0, err);
    const report = JSON.parse(out.split('\n')[1] ?? '') as { goMs: number; replies: { wallMs: number }[] };
    assert.ok(report.goMs <= blockEndMs, 'the child went while this thread was blocked');
    const during = report.replies.filter((r) => r.wallMs >= blockStartMs && r.wallMs <= blockEndMs).length;
    assert.ok(
      during >= 15,
      `${during} of 20 replies came while the JavaScript thread was blocked (${report.replies.length} in all)`,
    );
  } finally {
    child.kill();
  }
});

test('nativeResponder false: the JavaScript responder answers (responder javascript)', async () => {
  const js = await startServer(netClock, { nativeResponder: false });
  const c = await client('127.0.0.1', netClock);
  try {
    assert.equal(js.responder, 'javascript');
    assert.equal(js.socketPath, 'batched');
    const x = await exchange(c, plainRequest(7), js.addresses[0]!.port, netClock);
    assertBrackets(x, 'the JavaScript responder');
    assert.equal(js.counters.responses, 1);
  } finally {
    c.sock.close();
    await js.close();
  }
});

test('a served clock without pieces (a simulated host) keeps the JavaScript responder', async () => {
  // ServedClock.linearPiece is undefined for a time source other than the host's (the native thread
  // reads the host's clocks), so the server does not start the native responder (ntp-server.ts).
  const simulated = new ServedClock({
    source: { wallMs: () => Date.now(), monoMs: () => performance.now() },
  });
  assert.equal(simulated.linearPiece(), undefined);
  const js = await startServer(simulated);
  const c = await client('127.0.0.1', simulated);
  try {
    assert.equal(js.responder, 'javascript');
    const x = await exchange(c, plainRequest(8), js.addresses[0]!.port, simulated);
    assertBrackets(x, 'a simulated host');
  } finally {
    c.sock.close();
    await js.close();
  }
});

/** A server on 127.0.0.1 with `policy`, answering on the native thread. */
async function policyServer(
  policy: ConstructorParameters<typeof NtpServer>[0]['policy'],
): Promise<NtpServer> {
  const s = await startServer(netClock, { policy });
  assert.equal(s.responder, 'native');
  return s;
}

/** What came back for one request: a reply, a kiss (by its code), or nothing. */
function verdict(r: Reply | undefined): RateDecision | 'deny' | 'reply' {
  if (r === undefined) return 'drop';
  const p = expectDecoded(decodeNtpPacket(r.packet));
  if (p.stratum !== 0) return 'reply';
  const code = r.packet.subarray(12, 16).toString('latin1');
  return code === 'RATE' ? 'kod' : code === 'DENY' ? 'deny' : 'reply';
}

test('fast-check over the socket: the native thread rate-limits as RateLimiter (buckets, kisses, eviction)', async () => {
  // The limiter that really runs (nf_limiter_check on the native thread, built from policyArray), against
  // RateLimiter on the same order of requests. A refill of one token per 10⁶ s and a KoD interval of 0 or
  // 10⁶ s make every decision independent of the arrival times, so only the order counts: burst, the
  // one kiss per interval, and eviction of the least recently seen client at maxClients.
  const addresses = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6', '127.0.0.2'];
  const clients = await Promise.all(addresses.map((a) => client(a, netClock)));
  let run = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          burst: fc.integer({ min: 1, max: 4 }),
          kodIntervalS: fc.constantFrom(0, 1e6),
          maxClients: fc.integer({ min: 1, max: 4 }),
        }),
        fc.array(fc.nat(addresses.length - 1), { minLength: 1, maxLength: 25 }),
        async (o, order) => {
          const opts = { averageIntervalS: 1e6, ipv6PrefixBits: 64, ...o };
          const tag = TAG + ++run;
          const s = await policyServer({ rateLimiter: new RateLimiter(opts) });
          try {
            const to = s.addresses[0]!.port;
            const model = new RateLimiter(opts);
            const expected = order.map((who) =>
              model.checkBytes(
                record('v4', Uint8Array.from(addresses[who]!.split('.').map(Number)), 0),
                0,
                0,
              ),
            );
            order.forEach((who, seq) => clients[who]!.sock.send(plainRequest(seq, tag), to, '127.0.0.1'));
            const got = (): (Reply | undefined)[] =>
              order.map((who, seq) => {
                const r = clients[who]!.replies.get(seq);
                return r && r.packet.readUInt32BE(24) === tag ? r : undefined;
              });
            const answers = expected.filter((d) => d !== 'drop').length;
            await waitFor(() => got().filter(Boolean).length >= answers, {
              timeoutMs: 3000,
              what: `${answers} answers to ${JSON.stringify(order)}, expected ${JSON.stringify(expected)}`,
            }).catch(() => undefined);
            await new Promise((r) => setTimeout(r, 50)); // anything beyond the expected answers
            const actual = got().map((r) => {
              const v = verdict(r);
              return v === 'reply' ? 'allow' : v;
            });
            assert.deepEqual(
              actual,
              expected,
              `requests from ${JSON.stringify(order.map((w) => addresses[w]))}`,
            );
          } finally {
            await s.close();
          }
        },
      ),
      { numRuns: 25, interruptAfterTimeLimit: 20_000, includeErrorInReport: true },
    );
  } finally {
    for (const c of clients) c.sock.close();
  }
});

test('over the socket: the native thread applies the access list (a DENY kiss outside it)', async () => {
  const s = await policyServer({ access: new AccessList(['127.0.0.2/32', '2001:db8::/32']) });
  const inside = await client('127.0.0.2', netClock);
  const outside = await client('127.0.0.3', netClock);
  try {
    const to = s.addresses[0]!.port;
    const ok = await exchange(inside, plainRequest(1), to, netClock);
    assert.equal(verdict(ok.reply), 'reply');
    assertBrackets(ok, 'an allowed source');
    const denied = await exchange(outside, plainRequest(2), to, netClock);
    assert.equal(verdict(denied.reply), 'deny');
    const kiss = expectDecoded(decodeNtpPacket(denied.reply.packet));
    assert.equal(kiss.leap, 3);
    assert.equal(kiss.originTimestamp.fraction, 2, 'the kiss echoes the transmit timestamp');
    assert.equal(s.counters.kodDeny, 1);
    assert.equal(s.counters.responses, 1);
  } finally {
    inside.sock.close();
    outside.sock.close();
    await s.close();
  }
});

test('over the socket: a leap second inserted at a break is served by the native thread to the millisecond', async () => {
  // A correction with a leap second (correction.ts, leap.ts leapTerm: stepped at atMs, no smear) 300 ms
  // ahead: the piece the native thread holds ends there (ServedClock.linearPiece); the requests around it
  // must carry the served clock of their own instants on either side, never the old second extrapolated.
  const c = await client('127.0.0.1', netClock);
  const atMs = performance.now() + 300;
  netClock.setCorrection({
    t0Ms: performance.now(),
    phaseS: 0,
    freq: 0,
    slewS: 0,
    slewRate: 0.0005,
    leap: { atMs, deltaS: -1, smearMs: 0 },
  });
  let before = 0;
  let after = 0;
  try {
    for (let i = 0; i < 60 && performance.now() < atMs + 300; i++) {
      const x = await exchange(c, plainRequest(2000 + i), port, netClock);
      const p = expectDecoded(decodeNtpPacket(x.reply.packet));
      // T3 is the served time at some instant between this test's reading before send and its reading on
      // arrival: within 1 ms of one of the two (they are a second apart only across the leap).
      const t3 = p.transmitTimestamp;
      const fromSend = timestampDiffSeconds(t3, x.served);
      const fromArrival = timestampDiffSeconds(t3, x.reply.served);
      const near = (d: number): boolean => d >= -SLACK_S && d <= SLACK_S + 0.05;
      assert.ok(
        near(fromSend) || near(-fromArrival) || (fromSend >= -SLACK_S && fromArrival <= SLACK_S),
        `request ${i}: T3 is ${(fromSend * 1e3).toFixed(3)} ms from the served time before sending and ` +
          `${(fromArrival * 1e3).toFixed(3)} ms from it on arrival`,
      );
      if (x.reply.served.seconds === x.served.seconds && performance.now() < atMs) before++;
      else if (performance.now() > atMs + 5) after++;
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    c.sock.close();
    netClock.setCorrection({ t0Ms: performance.now(), phaseS: 0, freq: 0, slewS: 0, slewRate: 0.0005 });
  }
  assert.ok(before >= 3 && after >= 3, `replies before (${before}) and after (${after}) the leap`);
});
