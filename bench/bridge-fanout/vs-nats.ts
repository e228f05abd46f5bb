/**
 * bench/bridge-fanout/vs-nats.ts: the hub's WebSocket fan-out against a production broker, nats-server
 * (Debian's package, 2.9), in the same run, alternating rounds. Both get the same subscribers (default 100
 * WebSocket connections) and messages of the same size: the hub a state write under app.pub.custom.* that
 * it delivers as its ~330-byte state envelope, nats-server a PUB whose payload is a JSON text of that
 * envelope's shape and size. Per round and target:
 *   0. warm-up: --warmup-messages (20,000) in a closed loop, not measured (WARMUP_MSGS below);
 *   1. steady: --rate messages/s (200 × 100 subscribers = 20,000 deliveries/s), --steady-warmup seconds (20)
 *      of it not measured (STEADY_WARMUP_MS below), then for --seconds: p50/p99 publish→receive, and where
 *      the p99 comes from: a message's first, middle and last delivery (`Spread`);
 *   2. saturation: a closed loop (at most --window messages in flight, paced by one extra subscriber in this
 *      process) for the maximum deliveries/s;
 *   and the server's CPU time per delivery in both phases (utime + stime from /proc/<pid>/stat; the kernel's
 *   part, stime, in brackets), and in the steady phase how often per second its threads were preempted (switched
 *   out while runnable: the two cores are shared with the subscriber processes it wakes).
 * Subscribers live in --procs child processes (sub-worker.ts bundled to plain JavaScript, `subscriberScript`:
 * a hand-written WebSocket client that finds the message's index and send time without parsing JSON).
 * `--procs 4,8` runs every target with each count: if doubling the subscriber processes does not raise a
 * server's figure, the load generator is not its limit.
 * Then a scale row: --scale subscribers (5,000) at --scale-rate messages/s: p99, and the server's RSS per
 * idle client (RSS with the subscribers connected and idle, minus RSS before they connected).
 * The hub runs as `npm start` runs it, from its start file (dist/start.cjs through its bin: build first,
 * `node scripts/build.mjs`), with its event log on (a temp dir), as in production, and its connection cap
 * raised to fit the scale row. Until 2026-11-30 it ran from src/ through tsx, whose module loader runs on a
 * thread of its own with its own heap (a second V8 isolate collecting its garbage beside the hub's work);
 * `BENCH_HUB_NODE_ARGS=--conditions=source` still does that.
 *
 *   npx tsx bench/bridge-fanout/vs-nats.ts [--rounds 5] [--procs 4] [--subscribers 100] [--rate 200]
 *     [--seconds 5] [--steady-warmup 20] [--saturate-seconds 4] [--window 500] [--warmup-messages 20000] [--scale 5000]
 *     [--scale-rate 4] [--scale-seconds 5] [--only hub|nats] [--hub-config '{"eventLog":{"fsync":false}}']
 *
 * Acceptance anchors (printed beside the figures): hub deliveries/s at saturation ≥ 1.0× nats-server's and
 * hub p99 at 20,000 deliveries/s ≤ 1.0× nats-server's, per round and as medians of the rounds.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { buildSync } from 'esbuild';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  CLK_TCK,
  freePort,
  procRssKiB,
  procStat,
  repoRoot,
  requireTool,
  startProcess,
  type RunningProcess,
} from '@broadcast-ops/core/testing';
import {
  NatsStream,
  openLite,
  openSubscriber,
  readNumberField,
  type LiteSocket,
  type TargetKind,
} from './ws-lite.ts';

const { values } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '100' },
    procs: { type: 'string', default: '4' },
    rate: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '5' },
    'saturate-seconds': { type: 'string', default: '4' },
    window: { type: 'string', default: '500' },
    // Five, not three: see ROUNDS.
    rounds: { type: 'string', default: '5' },
    scale: { type: 'string', default: '5000' },
    'scale-rate': { type: 'string', default: '4' },
    'scale-seconds': { type: 'string', default: '5' },
    only: { type: 'string', default: '' }, // 'hub' or 'nats': run one target (profiling)
    // JSON merged into the hub's config, one level deep (experiments, e.g. '{"eventLog":{"fsync":false}}').
    'hub-config': { type: 'string', default: '' },
    // Messages sent in a closed loop (as at saturation, not measured) before the steady phase: see WARMUP.
    'warmup-messages': { type: 'string', default: '20000' },
    'steady-warmup': { type: 'string', default: '20' },
  },
});
const SUBSCRIBERS = Number(values.subscribers);
const PROCS = values.procs.split(',').map(Number);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const SAT_SECONDS = Number(values['saturate-seconds']);
const WINDOW = Number(values.window);
/**
 * Rounds per run (5). One round's hub/nats p99 ratio spread 0.53-1.52 over 54 rounds on a 2-core machine (each
 * server's p99 moves with the CPU per delivery the machine gives it in that round), a quarter of them above 1.0
 * where the median of all 54 was 0.85 (bridge docs/performance.md "Five rounds a run"). At that rate the median
 * of three rounds lands above 1.0 about one run in seven on the dice alone, the median of five about one in
 * eleven.
 */
const ROUNDS = Number(values.rounds);
const SCALE = Number(values.scale);
const SCALE_RATE = Number(values['scale-rate']);
const SCALE_SECONDS = Number(values['scale-seconds']);
/**
 * The steady phase runs --steady-warmup seconds (20) at its rate before its measured --seconds, for both
 * servers, so that the hub is measured warm on this pattern: the closed-loop warm-up below handles several
 * messages per read, the steady rate one message per wake, through paths V8 has not optimised yet. With
 * `perf record` on the hub beside a probe of each message's handling (packages/telemetry-bridge/docs/
 * performance.md "The machine of 2026-11-30"), TurboFan's threads were still compiling 10-15 s into the
 * steady rate, and the messages whose handling took over 0.35 ms came with those compilations (a quarter
 * of the compiler threads' samples fell in those messages' 0.3 % of the time), in bursts for the first 7 s,
 * then about one a second. Until 2026-11-30 it was 1 s, then briefly 5 s.
 */
const STEADY_WARMUP_MS = Number(values['steady-warmup']) * 1000;
/**
 * Both servers get --warmup-messages first, unmeasured: the hub is JIT-compiled, and at 200 messages/s its
 * per-message code (one call per message, not per delivery) is still in V8's baseline tier during a
 * 5-second steady phase right after start (docs/performance.md "JIT warm-up"); a server that has run for
 * a while has it optimised. nats-server (compiled ahead of time) gets the same messages.
 */
const WARMUP_MSGS = Number(values['warmup-messages']);
const GRACE_MS = 500;
const HOST = '127.0.0.1';
const SUBJECT = { hub: 'app.pub.custom.**', nats: 'bench.fanout' } as const;
const PAD = 'x'.repeat(120);
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

interface Server {
  kind: TargetKind;
  port: number;
  pid: number;
  proc: RunningProcess;
}

async function startHub(dir: string, maxClients: number): Promise<Server> {
  mkdirSync(dir, { recursive: true });
  const cfg = join(dir, 'bridge.json');
  const config: Record<string, Record<string, unknown>> = {
    clientTransport: { host: HOST, port: 0, rateLimit: 1_000_000, maxClients },
    metrics: { enabled: false },
    health: { enabled: false },
    eventLog: { path: join(dir, 'events'), maxFileSize: 64 * 1024 * 1024, maxFiles: 4 },
    logging: { level: 'warn' },
  };
  const extra = values['hub-config'] ? (JSON.parse(values['hub-config']) as typeof config) : {};
  for (const [k, v] of Object.entries(extra)) config[k] = { ...config[k], ...v };
  writeFileSync(cfg, JSON.stringify(config));
  // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of the hub process there (docs/performance.md).
  const prof = process.env['BENCH_CPU_PROF'];
  const proc = startProcess(
    process.execPath,
    [
      ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : []),
      // BENCH_HUB_NODE_ARGS: more node flags for the hub, e.g. '--perf-basic-prof' for `perf record -p`, or
      // '--conditions=source' to run src/ through tsx (as this bench did before; see the header).
      ...(process.env['BENCH_HUB_NODE_ARGS'] ?? '').split(' ').filter(Boolean),
      join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs'),
      '--config',
      cfg,
    ],
    { env: { BRIDGE_LOGGING_LEVEL: 'info' } },
  );
  const m = await proc.waitForOutput(/"clients":"ws:\/\/[^"]+:(\d+)/, 30_000);
  return { kind: 'hub', port: Number(m[1]), pid: proc.child.pid!, proc };
}

async function startNats(dir: string): Promise<Server> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  let wsPort = await freePort();
  for (let k = 0; k < 10 && wsPort === port; k++) wsPort = await freePort();
  const cfg = join(dir, 'nats.conf');
  writeFileSync(
    cfg,
    `listen: "${HOST}:${port}"\nmax_connections: 65536\nwebsocket {\n  listen: "${HOST}:${wsPort}"\n  no_tls: true\n}\n`,
  );
  const proc = startProcess(requireTool('nats-server'), ['-c', cfg]);
  await proc.waitForOutput(/Listening for websocket clients/, 30_000);
  return { kind: 'nats', port: wsPort, pid: proc.child.pid!, proc };
}

/**
 * Times the server's threads were switched out while still runnable (nonvoluntary_ctxt_switches in
 * /proc/<pid>/task/<tid>/status, summed over its threads): another task took the core.
 */
function preemptions(pid: number): number {
  let n = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const m = /nonvoluntary_ctxt_switches:\s+(\d+)/.exec(
        readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'),
      );
      n += Number(m?.[1] ?? 0);
    } catch {
      // the thread ended meanwhile
    }
  }
  return n;
}

/** The process's CPU time so far in clock ticks, user and kernel. */
const cpuTicks = (pid: number): { user: number; sys: number } => procStat(`/proc/${pid}`);

/** CPU µs per delivery between two readings, in all and its kernel share. */
function cpuPer(
  c0: { user: number; sys: number },
  c1: { user: number; sys: number },
  n: number,
): [number, number] {
  const us = (ticks: number): number => ((ticks / CLK_TCK) * 1e6) / n;
  return [us(c1.user - c0.user + c1.sys - c0.sys), us(c1.sys - c0.sys)];
}

/** The message published as number i: the hub's state write, or the NATS payload of the same shape. */
function publisherFor(server: Server): Promise<{ send(i: number): void; close(): void; size(): number }> {
  let seq = 0;
  const value = (i: number): { i: number; t: number; pad: string } => ({ i, t: nowUs(), pad: PAD });
  if (server.kind === 'hub') {
    return new Promise((resolve, reject) => {
      let lite: LiteSocket | undefined;
      let ready = false;
      openLite(HOST, server.port, '/', () => {
        if (ready) return; // acks
        ready = true;
        resolve({
          send: (i) =>
            lite!.sendText(
              JSON.stringify({
                id: `p${i}`,
                type: 'state',
                path: `app.pub.custom.k${i % 50}`,
                payload: { value: value(i) },
                timestamp: Date.now(),
              }),
            ),
          close: () => lite!.close(),
          size: () => 0,
        });
      }).then((l) => {
        lite = l;
        l.sendText(JSON.stringify({ type: 'handshake', name: 'pub', version: '1' }));
      }, reject);
    });
  }
  return new Promise((resolve, reject) => {
    let lite: LiteSocket | undefined;
    let size = 0;
    const stream = new NatsStream(
      () => undefined,
      (line) => {
        if (line.startsWith('INFO')) {
          lite!.sendText('CONNECT {"verbose":false,"pedantic":false,"protocol":1,"name":"pub"}\r\nPING\r\n');
        } else if (line === 'PONG') {
          resolve({
            send(i) {
              // The hub's delivered state envelope, field for field (ids and offsets of the same width).
              const body = JSON.stringify({
                id: '01a20615-fd22-7000-a7db-d5a6239651fe',
                type: 'state',
                source: 'app.pub',
                path: `app.pub.custom.k${i % 50}`,
                payload: { value: value(i), owner: 'app.pub', version: i },
                timestamp: Date.now(),
                correlationId: `p${i}`,
                sequence: ++seq,
                offset: i,
              });
              size = Buffer.byteLength(body);
              lite!.sendText(`PUB ${SUBJECT.nats} ${size}\r\n${body}\r\n`);
            },
            close: () => lite!.close(),
            size: () => size,
          });
        }
      },
      (t) => lite?.sendText(t),
    );
    openLite(HOST, server.port, '/', (_op, buf, s, e) => stream.push(buf, s, e)).then((l) => {
      lite = l;
    }, reject);
  });
}

/**
 * The subscriber processes run sub-worker.ts bundled into one plain JavaScript file (esbuild, once per run),
 * not through tsx. tsx's module loader runs on a thread of its own with its own V8 heap, and that heap's
 * memory reducer collected 8-9.5 s after each process started (`--trace-gc`: two or three mark-compacts of
 * 2-6 ms each plus their incremental steps, in all four processes within the same second), CPU taken from
 * the two cores the servers and subscribers share, in the middle of a measured steady phase.
 */
function subscriberScript(dir: string): string {
  const out = join(dir, 'sub-worker.mjs');
  buildSync({
    entryPoints: [join(repoRoot, 'bench/bridge-fanout/sub-worker.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: out,
    logLevel: 'warning',
  });
  return out;
}

class Workers {
  readonly #kids: ChildProcess[] = [];
  readonly #waiting = new Map<ChildProcess, (m: Record<string, unknown>) => void>();

  constructor(n: number) {
    for (let k = 0; k < n; k++) {
      const kid = fork(SUBSCRIBER_SCRIPT, [], {
        execArgv: [],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      kid.on('message', (m: Record<string, unknown>) => {
        const w = this.#waiting.get(kid);
        this.#waiting.delete(kid);
        w?.(m);
      });
      this.#kids.push(kid);
    }
  }

  #ask(kid: ChildProcess, msg: unknown): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      this.#waiting.set(kid, resolve);
      kid.send(msg as object);
    });
  }

  async connect(server: Server, total: number): Promise<void> {
    const n = this.#kids.length;
    const replies = await Promise.all(
      this.#kids.map((kid, k) => {
        const count = Math.floor(total / n) + (k < total % n ? 1 : 0);
        const base = k * Math.ceil(total / n);
        return this.#ask(kid, {
          cmd: 'connect',
          kind: server.kind,
          host: HOST,
          port: server.port,
          count,
          base,
          subject: SUBJECT[server.kind],
        });
      }),
    );
    for (const r of replies) if (r['ev'] === 'error') throw new Error(String(r['message']));
  }

  /**
   * Counts deliveries of messages from..to-1 from now on (keep: without resetting the counts so far; ranks:
   * with each delivery's message index, for `Spread`).
   */
  window(from: number, to: number, keep = false, ranks = false): void {
    for (const kid of this.#kids) kid.send({ cmd: 'window', from, to, keep, ranks });
  }

  async report(): Promise<{ delivered: number; lat: Float64Array; spread?: Spread }> {
    const rs = await Promise.all(this.#kids.map((kid) => this.#ask(kid, { cmd: 'report' })));
    let delivered = 0;
    const all: number[] = [];
    const byMessage = new Map<number, number[]>();
    for (const r of rs) {
      delivered += r['delivered'] as number;
      const idx = r['idx'] as number[];
      (r['lat'] as number[]).forEach((x, k) => {
        all.push(x / 1000);
        const i = idx[k];
        if (i === undefined) return;
        let list = byMessage.get(i);
        if (!list) byMessage.set(i, (list = []));
        list.push(x / 1000);
      });
    }
    return {
      delivered,
      lat: Float64Array.from(all).sort(),
      ...(byMessage.size > 0 ? { spread: spreadOf(byMessage.values()) } : {}),
    };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.#kids.map(
        (kid) =>
          new Promise<void>((resolve) => {
            kid.once('exit', () => resolve());
            kid.send({ cmd: 'exit' });
          }),
      ),
    );
  }
}

interface Phase {
  rate: number;
  p50: number;
  p99: number;
  lost: number;
  cpuUsPerDelivery: number;
  /** The kernel's part of it (stime): socket writes, the event log's writes and syncs. */
  sysUsPerDelivery: number;
  /** The server's threads preempted per second (`preemptions`), steady phase only. */
  preemptedPerS?: number;
  spread?: Spread;
}

const q = (s: Float64Array, p: number): number => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;

/**
 * Where a p99 comes from: each message's deliveries ordered from first to last received, and for the first,
 * the middle and the last delivery the median and the p99 over the messages, in ms. The median's first-to-last
 * is the fan-out's own ramp (one thread writing the sockets one after another takes about that long for the
 * last); a p99 of the first delivery above its median is messages whose whole fan-out started late.
 */
interface Spread {
  first: [number, number];
  middle: [number, number];
  last: [number, number];
}

function spreadOf(messages: Iterable<number[]>): Spread {
  const first: number[] = [];
  const middle: number[] = [];
  const last: number[] = [];
  for (const list of messages) {
    list.sort((a, b) => a - b);
    first.push(list[0]!);
    middle.push(list[Math.floor(list.length / 2)]!);
    last.push(list[list.length - 1]!);
  }
  const pair = (xs: number[]): [number, number] => {
    const s = Float64Array.from(xs).sort();
    return [q(s, 0.5), q(s, 0.99)];
  };
  return { first: pair(first), middle: pair(middle), last: pair(last) };
}

/** Pacer: one extra subscriber in this process that tells the closed loop which index arrived last. */
async function pacer(server: Server, onIndex: (i: number) => void): Promise<LiteSocket> {
  const I = Buffer.from('"i":');
  return openSubscriber(server.kind, HOST, server.port, 'pacer', SUBJECT[server.kind], (buf, s, e) =>
    onIndex(readNumberField(buf, s, e, I)),
  );
}

/** --warmup-messages in a closed loop, not counted; returns once the pacer has seen the last one. */
async function warmupPhase(
  pub: { send(i: number): void },
  next: { i: number },
  lastSeen: { i: number },
): Promise<void> {
  if (WARMUP_MSGS <= 0) return;
  const end = next.i + WARMUP_MSGS;
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      if (lastSeen.i >= end - 1 || performance.now() - t0 > 30_000) return resolve();
      while (next.i < end && next.i - 1 - lastSeen.i < WINDOW) pub.send(next.i++);
      setImmediate(pump);
    };
    pump();
  });
  await sleep(300);
}

async function steadyPhase(
  server: Server,
  workers: Workers,
  pub: { send(i: number): void },
  next: { i: number },
  subscribers: number,
  rate: number,
  seconds: number,
): Promise<Phase> {
  const t0 = performance.now();
  let sent = 0;
  let from = -1;
  let to = -1;
  let c0 = { user: 0, sys: 0 };
  let pre0 = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const elapsed = performance.now() - t0;
      const due = Math.floor((elapsed / 1000) * rate);
      while (sent < due) {
        pub.send(next.i++);
        sent++;
      }
      if (from < 0 && elapsed >= STEADY_WARMUP_MS) {
        from = next.i;
        c0 = cpuTicks(server.pid);
        pre0 = preemptions(server.pid);
        workers.window(from, Number.MAX_SAFE_INTEGER, false, true);
      }
      if (from >= 0 && elapsed >= STEADY_WARMUP_MS + seconds * 1000) {
        clearInterval(timer);
        to = next.i;
        workers.window(from, to, true);
        resolve();
      }
    }, 2);
  });
  await sleep(GRACE_MS);
  const c1 = cpuTicks(server.pid);
  const preempted = (preemptions(server.pid) - pre0) / (seconds + GRACE_MS / 1000);
  const r = await workers.report();
  const [cpu, sys] = cpuPer(c0, c1, r.delivered);
  return {
    rate: r.delivered / seconds,
    p50: q(r.lat, 0.5),
    p99: q(r.lat, 0.99),
    lost: (to - from) * subscribers - r.delivered,
    cpuUsPerDelivery: cpu,
    sysUsPerDelivery: sys,
    preemptedPerS: preempted,
    ...(r.spread ? { spread: r.spread } : {}),
  };
}

async function saturationPhase(
  server: Server,
  workers: Workers,
  pub: { send(i: number): void },
  next: { i: number },
  lastSeen: { i: number },
  subscribers: number,
): Promise<Phase> {
  await sleep(200);
  const from = next.i;
  workers.window(from, Number.MAX_SAFE_INTEGER);
  const c0 = cpuTicks(server.pid);
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      if (performance.now() - t0 >= SAT_SECONDS * 1000) return resolve();
      while (next.i - 1 - lastSeen.i < WINDOW) pub.send(next.i++);
      setImmediate(pump);
    };
    pump();
  });
  const elapsed = (performance.now() - t0) / 1000;
  const c1 = cpuTicks(server.pid);
  // Deliveries made within the phase count for the rate; the messages sent in it are then awaited for the
  // loss count (a broker that drops or coalesces under load must not look faster for it).
  const r = await workers.report();
  const [cpu, sys] = cpuPer(c0, c1, r.delivered);
  const to = next.i;
  workers.window(from, to, true);
  await sleep(GRACE_MS * 2);
  const late = await workers.report();
  workers.window(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  return {
    rate: r.delivered / elapsed,
    p50: q(r.lat, 0.5),
    p99: q(r.lat, 0.99),
    lost: (to - from) * subscribers - r.delivered - late.delivered,
    cpuUsPerDelivery: cpu,
    sysUsPerDelivery: sys,
  };
}

async function start(kind: TargetKind, dir: string): Promise<Server> {
  return kind === 'hub' ? startHub(dir, Math.max(SUBSCRIBERS, SCALE) + 16) : startNats(dir);
}

async function runTarget(
  kind: TargetKind,
  procs: number,
  dir: string,
): Promise<{ steady: Phase; saturated: Phase; size: number }> {
  const server = await start(kind, dir);
  const workers = new Workers(procs);
  try {
    await workers.connect(server, SUBSCRIBERS);
    const lastSeen = { i: -1 };
    let size = 0;
    const pace = await pacer(server, (i) => {
      if (i > lastSeen.i) lastSeen.i = i;
    });
    const pub = await publisherFor(server);
    const next = { i: 0 };
    await warmupPhase(pub, next, lastSeen);
    // The first read of the steady phase: one message (the warm-up's reads carry many).
    pace.socket.once('data', (d: Buffer) => (size = d.length));
    const steady = await steadyPhase(server, workers, pub, next, SUBSCRIBERS, RATE, SECONDS);
    const saturated = await saturationPhase(server, workers, pub, next, lastSeen, SUBSCRIBERS);
    pub.close();
    pace.close();
    return { steady, saturated, size };
  } finally {
    await workers.stop();
    await server.proc.stop('SIGTERM');
    // BENCH_SERVER_OUTPUT=<file>: the server's output is appended there (e.g. with --trace-gc in
    // BENCH_HUB_NODE_ARGS).
    const out = process.env['BENCH_SERVER_OUTPUT'];
    if (out) appendFileSync(out, `--- ${kind}, ${procs} procs\n${server.proc.output()}\n`);
  }
}

async function scaleRow(
  kind: TargetKind,
  dir: string,
): Promise<{ p99: number; p50: number; rate: number; lost: number; rssPerClientKiB: number }> {
  const server = await start(kind, dir);
  const workers = new Workers(Math.max(...PROCS));
  try {
    const pub = await publisherFor(server);
    await sleep(500);
    const rss0 = procRssKiB(server.pid);
    await workers.connect(server, SCALE);
    await sleep(1000);
    const rss1 = procRssKiB(server.pid);
    const next = { i: 0 };
    const p = await steadyPhase(server, workers, pub, next, SCALE, SCALE_RATE, SCALE_SECONDS);
    pub.close();
    return { p99: p.p99, p50: p.p50, rate: p.rate, lost: p.lost, rssPerClientKiB: (rss1 - rss0) / SCALE };
  } finally {
    await workers.stop();
    await server.proc.stop('SIGTERM');
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
};
const f2 = (n: number): string => n.toFixed(2).padStart(8);
const spreadText = (s: Spread): string =>
  `a message's first / middle / last delivery, median ${[s.first, s.middle, s.last].map((x) => x[0].toFixed(2)).join(' / ')} ms, ` +
  `p99 ${[s.first, s.middle, s.last].map((x) => x[1].toFixed(2)).join(' / ')} ms`;
const dir = mkdtempSync(join(tmpdir(), 'bridge-vs-nats-'));
const SUBSCRIBER_SCRIPT = subscriberScript(dir);
const kinds: TargetKind[] = values.only ? [values.only as TargetKind] : ['hub', 'nats'];
try {
  const loadStart = load();
  console.log(
    `bridge-fanout vs nats-server: ${SUBSCRIBERS} WebSocket subscribers in ${PROCS.join(' / ')} processes, ` +
      `steady ${RATE} msg/s (${RATE * SUBSCRIBERS} deliveries/s) for ${SECONDS}s, saturation ${SAT_SECONDS}s ` +
      `(window ${WINDOW}), ${WARMUP_MSGS} unmeasured warm-up messages first and ${STEADY_WARMUP_MS / 1000}s unmeasured at the steady rate, ${ROUNDS} round(s) alternating; node ${process.version}, ${cpus().length} cores, ` +
      `load average ${loadStart} (machine shared with other sessions)`,
  );
  console.log(
    '\nround procs target phase        deliveries/s   p50 ms   p99 ms  missing  server CPU µs/delivery',
  );
  type Res = Awaited<ReturnType<typeof runTarget>>;
  const rounds: Map<number, Partial<Record<TargetKind, Res>>>[] = [];
  let size: Partial<Record<TargetKind, number>> = {};
  for (let r = 0; r < ROUNDS; r++) {
    const byProcs = new Map<number, Partial<Record<TargetKind, Res>>>();
    const order = r % 2 === 0 ? kinds : [...kinds].reverse();
    for (const procs of PROCS) {
      const row: Partial<Record<TargetKind, Res>> = {};
      for (const kind of order) {
        const res = await runTarget(kind, procs, join(dir, `r${r}-${procs}-${kind}`));
        row[kind] = res;
        size = { ...size, [kind]: res.size };
        for (const phase of ['steady', 'saturated'] as const) {
          const p = res[phase];
          console.log(
            `${String(r + 1).padStart(5)} ${String(procs).padStart(5)} ${kind.padEnd(6)} ${phase.padEnd(10)} ` +
              `${p.rate.toFixed(0).padStart(14)} ${f2(p.p50)} ${f2(p.p99)} ${String(p.lost).padStart(8)} ${f2(p.cpuUsPerDelivery)}` +
              ` (kernel ${p.sysUsPerDelivery.toFixed(2)})` +
              (p.preemptedPerS === undefined ? '' : `, preempted ${p.preemptedPerS.toFixed(0)}/s`),
          );
          if (p.spread) console.log(`${' '.repeat(24)}${spreadText(p.spread)}`);
        }
      }
      byProcs.set(procs, row);
    }
    rounds.push(byProcs);
  }
  console.log(
    `\nbytes of the first WebSocket read by the pacer (one delivery, frame header included): ` +
      `hub ${size.hub ?? '-'}, nats ${size.nats ?? '-'}`,
  );
  if (kinds.length === 2) {
    for (const procs of PROCS) {
      const rows = rounds.map((m) => m.get(procs)!) as Record<TargetKind, Res>[];
      const sat = rows.map((x) => x.hub.saturated.rate / x.nats.saturated.rate);
      const p99 = rows.map((x) => x.hub.steady.p99 / x.nats.steady.p99);
      const cpu = rows.map((x) => x.hub.saturated.cpuUsPerDelivery / x.nats.saturated.cpuUsPerDelivery);
      const mSat = median(sat);
      const mP99 = median(p99);
      console.log(
        `\n[${procs} subscriber processes] hub/nats deliveries/s at saturation per round: ` +
          `${sat.map((x) => x.toFixed(2)).join(', ')}; median ${mSat.toFixed(2)} (anchor ≥ 1.00: ${mSat >= 1 ? 'met' : 'NOT met'})`,
      );
      console.log(
        `[${procs} subscriber processes] hub/nats p99 at ${RATE * SUBSCRIBERS} deliveries/s per round: ` +
          `${p99.map((x) => x.toFixed(2)).join(', ')}; median ${mP99.toFixed(2)} (anchor ≤ 1.00: ${mP99 <= 1 ? 'met' : 'NOT met'})`,
      );
      console.log(
        `[${procs} subscriber processes] hub/nats server CPU per delivery at saturation per round: ` +
          `${cpu.map((x) => x.toFixed(2)).join(', ')}; median ${median(cpu).toFixed(2)}`,
      );
      for (const kind of kinds) {
        console.log(
          `[${procs} subscriber processes] ${kind} saturation median ${median(rows.map((x) => x[kind].saturated.rate)).toFixed(0)}/s, ` +
            `steady p99 median ${median(rows.map((x) => x[kind].steady.p99)).toFixed(2)} ms, ` +
            `preempted ${median(rows.map((x) => x[kind].steady.preemptedPerS ?? NaN)).toFixed(0)}/s, ` +
            `a message's first / last delivery p99 median ` +
            `${median(rows.map((x) => x[kind].steady.spread?.first[1] ?? NaN)).toFixed(2)} / ` +
            `${median(rows.map((x) => x[kind].steady.spread?.last[1] ?? NaN)).toFixed(2)} ms`,
        );
      }
    }
  }
  if (SCALE > 0) {
    console.log(
      `\nscale row: ${SCALE} subscribers, ${SCALE_RATE} msg/s (${SCALE * SCALE_RATE} deliveries/s) for ${SCALE_SECONDS}s, ` +
        `load average ${load()}`,
    );
    console.log('target  deliveries/s   p50 ms   p99 ms  missing  RSS per idle client KiB');
    for (const kind of kinds) {
      const s = await scaleRow(kind, join(dir, `scale-${kind}`));
      console.log(
        `${kind.padEnd(6)} ${s.rate.toFixed(0).padStart(13)} ${f2(s.p50)} ${f2(s.p99)} ${String(s.lost).padStart(8)} ${f2(s.rssPerClientKiB)}`,
      );
    }
  }
  console.log(
    "\nmissing: deliveries of the phase's messages not received 0.5 s (steady) or 1 s (saturation) after it " +
      'ended: late under load, or dropped',
  );
  console.log(
    `\nload average at the start ${loadStart}, at the end ${load()} (other processes share these cores)`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
