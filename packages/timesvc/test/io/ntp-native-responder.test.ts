import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createSocket, type Socket, type SocketOptions } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { silentLogger } from '@broadcast-ops/core';
import { expectDecoded, waitFor } from '@broadcast-ops/core/testing';
import { AccessList } from '../../src/domain/access-list.ts';
import { ZERO_CORRECTION, stepTo } from '../../src/domain/correction.ts';
import { UNSYNCHRONISED_STATE, type ServerSystemState } from '../../src/domain/ntp-responder.ts';
import { RateLimiter, type RateDecision } from '../../src/domain/rate-limiter.ts';
import { NtpServer } from '../../src/io/ntp-server.ts';
import { ServedClock } from '../../src/io/served-clock.ts';
import { decodeNtpPacket, timestampDiffSeconds, type NtpTimestamp } from '../../src/protocol/ntp-packet.ts';
import { record } from '../helpers/native-responder.ts';

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
  // The child sends 20 plain requests 10 ms apart once told to go, and reports when it sent each one and when
  // each reply came (wall clock, shared by both processes). This thread is blocked meanwhile: only the native
  // thread can answer. What is asserted is that property itself: every request sent while this thread was
  // blocked, early enough for an answer within the block, was answered within it. How many requests that is
  // depends on when a loaded machine runs the child, so it is only required to be enough to say something.
  const code = `
    const dgram = require('node:dgram');
    const port = Number(process.env.NTP_PORT);
    const s = dgram.createSocket('udp4');
    const sent = [];
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
          sent.push({ seq: i, wallMs: Date.now() });
          s.send(b, port, '127.0.0.1');
          if (++i < 20) setTimeout(send, 10);
        };
        send();
        setTimeout(() => {
          process.stdout.write(JSON.stringify({ goMs, sent, replies }) + '\\n');
          s.close();
          process.exit(0);
        }, 900);
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
    block(600);
    const blockEndMs = Date.now();
    assert.equal(await exited, 0, err);
    const report = JSON.parse(out.split('\n')[1] ?? '') as {
      goMs: number;
      sent: { seq: number; wallMs: number }[];
      replies: { seq: number; wallMs: number }[];
    };
    assert.ok(report.goMs <= blockEndMs, 'the child went while this thread was blocked');
    // A request sent 100 ms or more before the block ended: its answer, from the native thread, is due
    // within the block (loopback answers take well under a millisecond; 100 ms is for a loaded machine).
    const due = report.sent.filter((q) => q.wallMs >= blockStartMs && q.wallMs <= blockEndMs - 100);
    assert.ok(due.length >= 5, `only ${due.length} of 20 requests were sent while this thread was blocked`);
    const late = due.filter((q) => !report.replies.some((r) => r.seq === q.seq && r.wallMs <= blockEndMs));
    assert.deepEqual(
      late.map((q) => q.seq),
      [],
      `requests sent while the JavaScript thread was blocked and not answered within the block ` +
        `(${due.length} sent then, ${report.replies.length} replies in all)`,
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
