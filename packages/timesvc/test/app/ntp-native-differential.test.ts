import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { before, describe, test } from 'node:test';
import fc from 'fast-check';
import { AccessList } from '../../src/domain/access-list.ts';
import { ZERO_CORRECTION } from '../../src/domain/correction.ts';
import {
  OUTCOME,
  UNSYNCHRONISED_STATE,
  respondInto,
  type ServerSystemState,
} from '../../src/domain/ntp-responder.ts';
import { ADDR_BYTES } from '../../src/io/batch-socket.ts';
import { SERVED_FIELDS, networksArray, servedArray } from '../../src/io/native-served.ts';
import { ServedClock } from '../../src/io/served-clock.ts';
import {
  addon,
  type AddressKind,
  record,
  addressText,
  concat,
  flipBit,
  bothLimiters,
  firstDifference,
  network,
  source,
  fractionUnits,
  TIMESTAMP_TOLERANCE,
  request,
  stateArb,
  systemState,
  correctionArb,
  correctionOf,
  where,
  instantIn,
  REC,
} from '../helpers/native-responder.ts';

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

describe('the native responder against the pure functions, on a clock of their own', () => {
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
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
          minLength: 3,
          maxLength: 6,
        }),
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
});
