/** The native responder tests' shared records, arbitraries and differential helpers (app/ntp-native-differential, io/ntp-native-responder). */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type Correction } from '../../src/domain/correction.ts';
import { type ServerSystemState } from '../../src/domain/ntp-responder.ts';
import { RateLimiter, type RateDecision, type RateLimitOptions } from '../../src/domain/rate-limiter.ts';
import { ADDR_BYTES, ipv6Text, nativeResponderForTests } from '../../src/io/batch-socket.ts';
import { policyArray } from '../../src/io/native-served.ts';
import { type LinearPiece } from '../../src/io/served-clock.ts';

export const native = nativeResponderForTests();

/** The addon's test entry points (packages/timesvc/build/Release/ntp_mmsg.node must be built). */
export function addon(): NonNullable<typeof native> {
  assert.ok(native, 'ntp_mmsg.node is missing: run `npm rebuild -w packages/timesvc`');
  return native;
}

// ---- Address records (native/mmsg.c fill_record): [0] family 4|6, [2..3] port BE, [4..] address ----

export type AddressKind = 'v4' | 'mapped' | 'v6';

/** A 24-byte address record; `junk` fills the bytes the record's family does not use (must be ignored). */
export function record(kind: AddressKind, address: Uint8Array, port: number, junk = 0): Uint8Array {
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
export function addressText(rec: Uint8Array): string {
  if (rec[0] === 4) return `${rec[4]}.${rec[5]}.${rec[6]}.${rec[7]}`;
  return ipv6Text(rec, 4);
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `bytes` with bit `bit` (0 = the most significant bit of byte 0) flipped. */
export function flipBit(bytes: Uint8Array, bit: number): Uint8Array {
  const out = bytes.slice();
  const i = bit >>> 3;
  out[i] = (out[i] ?? 0) ^ (0x80 >>> (bit & 7));
  return out;
}

export const DECISIONS: readonly RateDecision[] = ['allow', 'kod', 'drop'];

// ---- 1. Rate limiter: nf_limiter_check (ntp-fast.c) = RateLimiter.checkBytes (rate-limiter.ts) ----

/** Both limiters over the same requests; the C decisions (0 allow, 1 kod, 2 drop) by RateDecision name. */
export function bothLimiters(
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

export function firstDifference(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return -1;
}

// ---- 2. Access list: nf_access_allows (ntp-fast.c) = AccessList.allows (access-list.ts) ----

/** Address material that makes matches likely: a few bases, and random addresses. */
export const v4Bytes = fc.oneof(
  fc.constantFrom(Uint8Array.of(10, 0, 0, 0), Uint8Array.of(192, 0, 2, 128), Uint8Array.of(0, 0, 0, 0)),
  fc.uint8Array({ minLength: 4, maxLength: 4 }),
);
export const v6Bytes = fc.oneof(
  fc.constantFrom(
    Uint8Array.of(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
    new Uint8Array(16),
    Uint8Array.of(0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
  ),
  fc.uint8Array({ minLength: 16, maxLength: 16 }),
);

/** The text of an IPv6 address in one of the forms a configuration may use. */
export function v6Text(bytes: Uint8Array, form: number): string {
  const groups = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16));
  if (form === 1) return groups.join(':'); // uncompressed, hex tail even when mapped
  if (form === 2) return ipv6Text(bytes, 0).toUpperCase();
  return ipv6Text(bytes, 0); // RFC 5952, mapped with a dotted tail
}

export interface Net {
  family: 4 | 6;
  bytes: Uint8Array;
  prefix: number | undefined;
  text: string;
}

export const network = fc.oneof(
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
export const source = fc.record({
  kind: fc.constantFrom<AddressKind>('v4', 'mapped', 'v6'),
  near: fc.nat(),
  flip: fc.option(fc.nat(127), { nil: undefined }),
  v4: v4Bytes,
  v6: v6Bytes,
  port: fc.nat(0xffff),
});

// ---- 3. The reply: nf_decide + nf_served_write (ntp-fast.c) = respondInto + ServedClock.write ----

/** An NTP timestamp at buf[o, o + 8) as one 64-bit number (seconds · 2³² + fraction). */
export function ntp64(buf: Uint8Array, o: number): bigint {
  const v = new DataView(buf.buffer, buf.byteOffset + o, 8);
  return v.getBigUint64(0);
}

/** The largest double below x (x finite). */
export function below(x: number): number {
  if (x === 0) return -Number.MIN_VALUE;
  const f = new Float64Array([x]);
  const i = new BigInt64Array(f.buffer);
  i[0] = i[0]! + (x > 0 ? -1n : 1n);
  return f[0]!;
}

/** How far apart, in units of the 32-bit fraction (2⁻³² s), the C and JavaScript timestamps are. */
export function fractionUnits(a: Uint8Array, b: Uint8Array, o: number): bigint {
  const d = ntp64(a, o) - ntp64(b, o);
  return d < 0n ? -d : d;
}

/** At most 2 units of the fraction apart: the piece's arithmetic rounds differently from write()'s. */
export const TIMESTAMP_TOLERANCE = 2n;

export const extensionField = fc
  .tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0, max: 5 }), fc.nat(255))
  .map(([type, words, fill]) => {
    const f = new Uint8Array(4 + 4 * words).fill(fill);
    f[0] = type >>> 8;
    f[1] = type & 0xff;
    f[2] = 0;
    f[3] = 4 + 4 * words;
    return f;
  });
export const trailer = fc.oneof(
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
export const header = fc
  .record({
    li: fc.integer({ min: 0, max: 3 }),
    vn: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 4 }) }, fc.integer({ min: 0, max: 7 })),
    mode: fc.oneof({ weight: 4, arbitrary: fc.constant(3) }, fc.integer({ min: 0, max: 7 })),
    rest: fc.uint8Array({ minLength: 47, maxLength: 47 }),
  })
  .map(({ li, vn, mode, rest }) => concat([Uint8Array.of((li << 6) | (vn << 3) | mode), rest]));
export const request = fc.oneof(
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 120 }) },
  { weight: 4, arbitrary: fc.tuple(header, trailer).map(([h, t]) => concat([h, t])) },
);

/** Seconds for root delay and dispersion: 0, negative, ordinary, and values that saturate the short format. */
export const shortSeconds = fc.oneof(
  fc.constantFrom(0, -0, 1 / 65536, 0.5 / 65536, 65535.99999, 65536, 1e300, Number.POSITIVE_INFINITY),
  fc.double({ min: -10, max: -1e-12, noNaN: true }),
  fc.double({ min: 0, max: 2, noNaN: true }),
  fc.double({ min: 2, max: 1e6, noNaN: true }),
);

export const stateArb = fc.record({
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

export type Drawn<A> = A extends fc.Arbitrary<infer T> ? T : never;

export function systemState(s: Drawn<typeof stateArb>, atMs: number): ServerSystemState {
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
export const correctionArb = fc.record({
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
export function correctionOf(
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
export const where = fc.oneof(
  fc.constant<'start' | 'end'>('start'),
  fc.constant<'start' | 'end'>('end'),
  fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
);

export function instantIn(piece: LinearPiece, w: 'start' | 'end' | number): number {
  const end = Math.min(piece.p1, piece.p0 + 3_600_000);
  if (w === 'start') return piece.p0;
  if (w === 'end') return Number.isFinite(piece.p1) ? Math.max(piece.p0, below(piece.p1)) : end;
  const at = piece.p0 + w * (end - piece.p0);
  return at < piece.p1 ? at : piece.p0;
}

export const REC = record('v4', Uint8Array.of(192, 0, 2, 1), 123);
