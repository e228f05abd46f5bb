// The client log (chronyc `clients`, docs/cli.md "clients"): chrony's interval arithmetic
// (clientlog.c update_record/get_interval), the native log (native/ntp-fast.c) against the JavaScript one
// (src/domain/rate-limiter.ts, src/domain/client-log.ts) request for request, and GET /api/clients and
// `timesvc clients` against real requests from UDP sockets on 127.0.0.1, with both responders.
import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { freePort, requireTool, tempDir } from '@broadcast-ops/core/testing';
import {
  intervalLog2,
  logRequest,
  nativeClients,
  newLogEntry,
  reportClients,
  type ClientLogRecord,
} from '../../src/domain/client-log.ts';
import { RateLimiter, type RateDecision, type RateLimitOptions } from '../../src/domain/rate-limiter.ts';
import { ADDR_BYTES, nativeResponderForTests } from '../../src/io/batch-socket.ts';
import { policyArray } from '../../src/io/native-served.ts';
import { startChronyServer } from '../helpers/chrony.ts';
import { run } from '../helpers/cli.ts';
import { PASSWORDS, startWebRig, type WebRig } from '../helpers/web.ts';

const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

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

// ---- Real traffic: GET /api/clients and `timesvc clients` ----

/** A client-mode NTPv4 request with a distinct transmit timestamp. */
function request(i: number): Buffer {
  const b = Buffer.alloc(48);
  b[0] = (4 << 3) | 3;
  b.writeUInt32BE(0x1000 + i, 40);
  return b;
}

interface Tally {
  replies: number;
  rate: number;
}

/** A UDP socket bound to `address` that counts replies and RATE kisses from the server. */
async function clientSocket(address: string): Promise<{ socket: Socket; tally: Tally }> {
  const socket = createSocket('udp4');
  const tally: Tally = { replies: 0, rate: 0 };
  socket.on('message', (m) => {
    if (m.length >= 48 && m[1] === 0 && m.toString('latin1', 12, 16) === 'RATE') tally.rate++;
    else if (m.length >= 48) tally.replies++;
  });
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  closers.push(() => {
    socket.close();
  });
  return { socket, tally };
}

function send(s: Socket, port: number, i: number): Promise<void> {
  return new Promise((resolve, reject) =>
    s.send(request(i), port, '127.0.0.1', (err) => (err ? reject(err) : resolve())),
  );
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function clientsOf(rig: WebRig): Promise<{ responder: string; clients: ClientLogRecord[] }> {
  const token = await rig.login('viewer');
  const res = await fetch(`${rig.url}/api/clients?limit=10`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(res.status, 200);
  return (await res.json()) as { responder: string; clients: ClientLogRecord[] };
}

for (const nativeResponder of [true, false]) {
  test(`clients over real requests (${nativeResponder ? 'native' : 'JavaScript'} responder): counts, drops, Int, Last, the CLI`, async () => {
    const rig = await startWebRig({
      ntp: {
        native_responder: nativeResponder,
        rate_limit: { average_interval: 1, burst: 4, kod_interval: 3600 },
      },
    });
    closers.push(() => rig.close());
    const unauth = await fetch(`${rig.url}/api/clients`);
    assert.equal(unauth.status, 401);
    const bad = await rig.service.app.inject({
      method: 'GET',
      url: '/api/clients?limit=1001',
      headers: { authorization: `Bearer ${await rig.login('viewer')}` },
    });
    assert.equal(bad.statusCode, 400);

    // A burst of 20 from 127.0.0.2: 4 (and what refills meanwhile) answered, one RATE kiss, the rest dropped.
    const burst = await clientSocket('127.0.0.2');
    for (let i = 0; i < 20; i++) await send(burst.socket, rig.ntpPort, i);
    // A steady client on 127.0.0.3: 6 requests about 500 ms apart (the limiter allows them all).
    const steady = await clientSocket('127.0.0.3');
    const sentAt: number[] = [];
    for (let i = 0; i < 6; i++) {
      sentAt.push(performance.now());
      await send(steady.socket, rig.ntpPort, i);
      await sleep(500);
    }
    const body = await clientsOf(rig);
    assert.equal(body.responder, nativeResponder ? 'native' : 'javascript');
    const b = body.clients.find((c) => c.address === '127.0.0.2');
    const s = body.clients.find((c) => c.address === '127.0.0.3');
    assert.ok(b && s, JSON.stringify(body));
    assert.equal(body.clients[0]?.address, '127.0.0.3', 'most recently seen first');
    assert.equal(b.ntp_packets, 20);
    assert.equal(b.kod_rate, burst.tally.rate);
    assert.equal(b.kod_rate, 1);
    assert.equal(b.dropped, 20 - burst.tally.replies - burst.tally.rate);
    assert.ok(burst.tally.replies >= 4 && burst.tally.replies <= 6, `answered ${burst.tally.replies}`);
    assert.equal(s.ntp_packets, 6);
    assert.equal(s.dropped, 0);
    assert.equal(steady.tally.replies, 6);
    const spacing = (sentAt.at(-1)! - sentAt[0]!) / 5 / 1000;
    assert.ok(
      s.interval_log2 !== null && Math.abs(s.interval_log2 - Math.log2(spacing)) <= 1,
      `Int ${s.interval_log2} for ${spacing} s`,
    );
    assert.equal(s.interval_limited_log2, null);
    assert.ok(s.last_rx_ago_s <= 2, `Last ${s.last_rx_ago_s}`);
    assert.ok(b.last_rx_ago_s >= 2, `Last ${b.last_rx_ago_s}`);

    const env = { TIMESVC_URL: rig.url, TIMESVC_PASSWORD: PASSWORDS.viewer };
    const r = await run(['clients', '--user', 'viewer'], env);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.match(lines[0] ?? '', /^Hostname {22}NTP {3}Drop Int IntL Last {5}Cmd {3}Drop Int {2}Last$/);
    assert.equal(lines[1], '='.repeat((lines[0] ?? '').length));
    const row = lines.find((l) => l.startsWith('127.0.0.2 '));
    assert.ok(row, r.stdout);
    const cols = row.trim().split(/\s+/);
    assert.deepEqual(cols.slice(0, 3), ['127.0.0.2', '20', String(b.dropped)]);
    assert.deepEqual(cols.slice(6), ['-', '-', '-', '-']);
  });
}

test('with rate limiting off every request is answered and still logged', async () => {
  const rig = await startWebRig({ ntp: { rate_limit: { enabled: false, burst: 1 } } });
  closers.push(() => rig.close());
  const c = await clientSocket('127.0.0.4');
  for (let i = 0; i < 30; i++) await send(c.socket, rig.ntpPort, i);
  await sleep(300);
  const body = await clientsOf(rig);
  const row = body.clients.find((x) => x.address === '127.0.0.4');
  assert.ok(row, JSON.stringify(body));
  assert.equal(row.ntp_packets, 30);
  assert.equal(row.dropped, 0);
  assert.equal(row.kod_rate, 0);
  assert.equal(c.tally.replies, 30);
});

test('the same client seen by chronyd -x and by timesvc: chronyc clients and timesvc clients print the same row', async () => {
  const chronyc = requireTool('chronyc');
  const dir = tempDir('timesvc-clients-chronyc-');
  closers.push(() => dir.remove());
  const port = await freePort('udp');
  const chrony = await startChronyServer(join(dir.path, 'server'), port, {
    stratum: 8,
    extra: ['allow 127.0.0.0/8'],
  });
  closers.push(() => chrony.stop());
  const rig = await startWebRig({ ntp: { rate_limit: { average_interval: 1, burst: 16 } } });
  closers.push(() => rig.close());
  // One socket on 127.0.0.5 asks both servers at the same moments: 8 requests, 1 s apart.
  const c = await clientSocket('127.0.0.5');
  for (let i = 0; i < 8; i++) {
    await send(c.socket, rig.ntpPort, i);
    await new Promise<void>((resolve, reject) =>
      c.socket.send(request(i), port, '127.0.0.1', (err) => (err ? reject(err) : resolve())),
    );
    if (i < 7) await sleep(1000);
  }
  await sleep(300);
  const socket = join(dir.path, 'server', 'run', 'chronyd.sock');
  const asked = performance.now();
  const theirs = await new Promise<string>((resolve, reject) =>
    execFile(chronyc, ['-h', socket, '-n', 'clients'], { timeout: 10_000 }, (err, out, stderr) =>
      err ? reject(new Error(`chronyc clients: ${err.message} ${stderr}`)) : resolve(out),
    ),
  );
  const ours = await run(['clients', '--user', 'viewer'], {
    TIMESVC_URL: rig.url,
    TIMESVC_PASSWORD: PASSWORDS.viewer,
  });
  const elapsedS = (performance.now() - asked) / 1000;
  assert.equal(ours.code, 0, ours.stderr);
  const header = (t: string): string => t.split('\n')[0] ?? '';
  assert.equal(header(ours.stdout), header(theirs), 'the header as chronyc prints it');
  const row = (t: string): string[] => {
    const line = t.split('\n').find((l) => l.startsWith('127.0.0.5 '));
    assert.ok(line, t);
    return line.trim().split(/\s+/);
  };
  const a = row(theirs);
  const b = row(ours.stdout);
  // Hostname, NTP, Drop, Int, IntL the same; Last as chronyc's plus the time our CLI took to start and
  // ask (a second of rounding either way).
  assert.deepEqual(b.slice(0, 5), a.slice(0, 5), `chronyc:\n${theirs}\ntimesvc:\n${ours.stdout}`);
  const last = [Number(a[5]), Number(b[5])] as const;
  assert.ok(
    last[1] >= last[0] - 1 && last[1] <= last[0] + elapsedS + 1,
    `Last ${last[0]} / ${last[1]} after ${elapsedS} s`,
  );
});
