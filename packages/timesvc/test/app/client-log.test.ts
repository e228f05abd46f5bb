// The client log (chronyc `clients`, docs/cli.md "clients"): chrony's interval arithmetic
// (clientlog.c update_record/get_interval), and the native log (native/ntp-fast.c) against the JavaScript one
// (src/domain/rate-limiter.ts, src/domain/client-log.ts) request for request, without a socket (the real
// traffic: test/io/clients.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  intervalLog2,
  logRequest,
  nativeClients,
  newLogEntry,
  reportClients,
} from '../../src/domain/client-log.ts';
import { RateLimiter, type RateDecision, type RateLimitOptions } from '../../src/domain/rate-limiter.ts';
import { ADDR_BYTES, nativeResponderForTests } from '../../src/io/batch-socket.ts';
import { policyArray } from '../../src/io/native-served.ts';

/** One client's entry after requests at `times` (ms), all allowed. */
function intervalAfter(times: readonly number[]): number | null {
  const e = newLogEntry();
  for (const t of times) logRequest(e, t, 'allow', false);
  return intervalLog2(e.rate);
}

test("Int as chrony computes it: log2 of the average interval, rounded, '-' before two requests", () => {
  assert.equal(intervalAfter([1000]), null);
  assert.equal(intervalAfter([0, 64_000]), 6);
  assert.equal(intervalAfter([0, 1000, 2000, 3000]), 0);
  assert.equal(intervalAfter([0, 500, 1000]), -1);
  // 24 s: log2 = 4.58, rounded as clientlog.c rounds (interval × 1.5, then halvings): 5.
  assert.equal(intervalAfter([0, 24_000]), 5);
  // A slower pace is followed at once to within 2.5 (clientlog.c clamps the rate there), a faster one by
  // a quarter per request: 16 s after 1 s intervals reads 2, not 4.
  const pace = [0, 1000, 2000, 3000, 4000];
  const slower = [...pace, 20_000];
  assert.equal(intervalAfter(slower), 2);
  // Back-to-back requests (the same 1/16 s) count as 1/32 s.
  assert.equal(intervalAfter([0, 10, 20]), -5);
});

test('IntL: requests after a dropped one update the second average, Drop counts the silent drops only', () => {
  const e = newLogEntry();
  logRequest(e, 0, 'allow', false);
  logRequest(e, 1000, 'drop', false);
  logRequest(e, 1250, 'kod', false);
  logRequest(e, 2250, 'allow', true);
  assert.equal(e.hits, 4);
  assert.equal(e.drops, 1);
  assert.equal(e.kodRate, 1);
  assert.equal(e.kodDeny, 1);
  // Int from the intervals ending in a request whose predecessor was answered (0→1000, 1250→2250: 1 s),
  // IntL from the one after the drop (1000→1250: 0.25 s).
  assert.equal(intervalLog2(e.rate), 0);
  assert.equal(intervalLog2(e.timeoutRate), -2);
});

test('a client is named as chronyc -n names it: the IPv4 address, the IPv6 prefix in RFC 5952 form', () => {
  const l = new RateLimiter({
    averageIntervalS: 1,
    burst: 4,
    kodIntervalS: 8,
    maxClients: 8,
    ipv6PrefixBits: 64,
  });
  l.check('2001:db8:0:1:aaaa::1', 0);
  l.checkBytes(v6record(1, 1), 0, 1000);
  l.check('::ffff:192.0.2.7', 2000);
  l.checkBytes(v4record(9), 0, 3000);
  assert.deepEqual(
    l.clients(8).map((c) => c.address),
    ['10.0.0.9', '192.0.2.7', '2001:db8:1::/64', '2001:db8:0:1::/64'],
  );
});

// ---- The native log against the JavaScript one ----

const native = nativeResponderForTests();

function v4record(last: number): Uint8Array {
  const r = new Uint8Array(ADDR_BYTES);
  r[0] = 4;
  r.set([10, 0, 0, last], 4);
  return r;
}

function v6record(b: number, c: number): Uint8Array {
  const r = new Uint8Array(ADDR_BYTES);
  r[0] = 6;
  r.set([0x20, 0x01, 0x0d, 0xb8, 0, b, 0, 0, c, 0, 0, 0, 0, 0, 0, 1], 4);
  return r;
}

const DECISIONS: readonly RateDecision[] = ['allow', 'kod', 'drop'];

test('fast-check: the native client log reports what the JavaScript one reports (limiting on and off, denied, eviction)', () => {
  assert.ok(native, 'ntp_mmsg.node is missing: run `npm rebuild -w packages/timesvc`');
  const addon = native;
  const pool = [v4record(1), v4record(2), v4record(3), v6record(1, 1), v6record(1, 2), v6record(2, 1)];
  const options = fc.record({
    averageIntervalS: fc.double({ min: 0.01, max: 10, noNaN: true }),
    burst: fc.integer({ min: 1, max: 5 }),
    kodIntervalS: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 10, noNaN: true })),
    maxClients: fc.integer({ min: 1, max: 6 }),
    ipv6PrefixBits: fc.constantFrom(0, 48, 56, 64, 128),
    enabled: fc.boolean(),
  });
  const step = fc.oneof(
    { weight: 6, arbitrary: fc.double({ min: 0, max: 3000, noNaN: true }) },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
    { weight: 1, arbitrary: fc.double({ min: -2000, max: 0, noNaN: true }) },
  );
  const requests = fc.array(fc.tuple(fc.nat(pool.length - 1), step, fc.boolean()), {
    minLength: 1,
    maxLength: 120,
  });
  fc.assert(
    fc.property(options, requests, fc.double({ min: 0, max: 1e7, noNaN: true }), (opts, reqs, start) => {
      const o: RateLimitOptions = opts;
      const records = new Uint8Array(reqs.length * ADDR_BYTES);
      const times = new Float64Array(reqs.length);
      const denied = new Uint8Array(reqs.length);
      let t = start;
      reqs.forEach(([who, dt, deny], i) => {
        t = Math.max(0, t + dt);
        times[i] = t;
        denied[i] = deny ? 1 : 0;
        records.set(pool[who]!, i * ADDR_BYTES);
      });
      const policy = policyArray({ rateLimiter: new RateLimiter(o) });
      const limiter = new RateLimiter(o);
      const js = Array.from(times, (at, i) =>
        limiter.checkBytes(records, i * ADDR_BYTES, at, denied[i] === 1),
      );
      const now = t + 5000;
      // The whole log (max 10 > maxClients), then only the newest two (the bounded report).
      for (const max of [10, 2]) {
        const decisions = new Uint8Array(reqs.length);
        const keys = new Uint8Array(max * 17);
        const nums = new Float64Array(max * 7);
        const n = addon.testClients(policy, records, times, denied, decisions, max, keys, nums);
        assert.deepEqual(
          [...decisions].map((d) => DECISIONS[d]),
          js,
        );
        const fromC = reportClients(nativeClients(keys, nums, n, o.ipv6PrefixBits), now, max);
        const fromJs = reportClients(limiter.clients(max), now, max);
        assert.deepEqual(fromC, fromJs);
        assert.ok(fromJs.length <= Math.min(max, o.maxClients));
        assert.ok(fromJs.reduce((sum, c) => sum + c.ntp_packets, 0) <= reqs.length);
      }
    }),
    { numRuns: 800, interruptAfterTimeLimit: 8000, includeErrorInReport: true },
  );
});
