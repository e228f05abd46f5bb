/** The UDP load generators shared by the timesvc NTP and NTS benches (gen.c, and one in Node), and the floor. */
import { execFile, execFileSync } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CLK_TCK, procCpuNs, procStat, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';
import { NtsCookieJar } from '@broadcast-ops/timesvc/testing';

/**
 * CPU time of process `pid` in µs: the sum over its threads of the time on a CPU that the scheduler
 * accounts in nanoseconds (/proc/<pid>/task/<tid>/schedstat, first field; the kernel's
 * Documentation/scheduler/sched-stats.rst). /proc/<pid>/stat counts in 10 ms ticks: at 5,000 requests/s
 * over a 2 s step a server at 6 µs per request uses 60 ms, so one tick is ±17 % of the figure; the
 * schedstat sum is exact. A thread that ended during the step drops out of the sum (the servers measured
 * here keep theirs); without schedstat (a kernel without CONFIG_SCHED_INFO) the ticks are used.
 */
export function cpuUs(pid: number): number {
  const ns = procCpuNs(pid);
  if (ns > 0) return ns / 1000;
  const { user, sys } = procStat(`/proc/${pid}`);
  return ((user + sys) / CLK_TCK) * 1e6;
}

/**
 * Offers `total` datagrams at `rate`/s to 127.0.0.1:`port` from 16 loopback source addresses
 * (127.0.1.1–127.0.1.16), in bounded bursts; `request(i)` is the i-th datagram and `onReply` sees every reply.
 * Returns what was sent, how long sending took, and the CPU time process `pid` used from the first send until
 * the replies stopped (50 ms without one, at most 300 ms after the last send).
 */
export async function offerLoad(o: {
  port: number;
  pid: number;
  rate: number;
  total: number;
  request: (i: number) => Buffer;
  onReply: (m: Buffer) => void;
}): Promise<{ sent: number; sendMs: number; cpuUs: number }> {
  const sockets: Socket[] = [];
  let lastReply = performance.now();
  const onReply = (m: Buffer): void => {
    lastReply = performance.now();
    o.onReply(m);
  };
  for (let i = 0; i < 16; i++) {
    const s = createSocket('udp4');
    s.on('message', onReply);
    await new Promise<void>((r) => s.bind(0, `127.0.1.${i + 1}`, r));
    try {
      s.setRecvBufferSize(4 * 1024 * 1024);
    } catch {
      /* capped by the kernel */
    }
    sockets.push(s);
  }
  const cpu0 = cpuUs(o.pid);
  const start = performance.now();
  let sent = 0;
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      const elapsed = performance.now() - start;
      const due = Math.min(o.total, Math.floor((o.rate * elapsed) / 1000));
      // Bounded burst per turn so replies get processed between bursts.
      const upto = Math.min(due, sent + 64);
      while (sent < upto) {
        sockets[sent % sockets.length]!.send(o.request(sent), o.port, '127.0.0.1');
        sent++;
      }
      if (sent >= o.total) resolve();
      else setImmediate(pump);
    };
    pump();
  });
  const sendMs = performance.now() - start;
  // Until the replies stopped (50 ms without one), at most 300 ms: the server's CPU for the step's
  // requests, not for time it spent idle after them.
  const end = performance.now() + 300;
  while (performance.now() < end && performance.now() - lastReply < 50) {
    await new Promise((r) => setTimeout(r, 10));
  }
  const cpu1 = cpuUs(o.pid);
  for (const s of sockets) s.close();
  return { sent, sendMs, cpuUs: cpu1 - cpu0 };
}

/**
 * Wait until each server is settled before the sweep: idle CPU below `idleUsPerS` in two consecutive
 * one-second windows, and at least `minAgeMs` since the process started (V8's memory reducer runs a few
 * full garbage collections some 20-30 s after a Node process starts, 50-100 ms of CPU in all, once; that is
 * start-up, not the cost of any request rate, and it landed in whichever step was running). Bounded by
 * `maxMs`; returns each server's idle CPU (µs per second) over its last window, printed by the benches.
 */
export async function settle(
  servers: readonly { name: string; pid: number }[],
  o: { minAgeMs?: number; idleUsPerS?: number; maxMs?: number } = {},
): Promise<{ name: string; idleUsPerS: number; waitedMs: number }[]> {
  const minAge = o.minAgeMs ?? 35_000;
  const limit = o.idleUsPerS ?? 20_000;
  const deadline = performance.now() + (o.maxMs ?? 90_000);
  // The start (proc(5) starttime, ticks after boot) against /proc/uptime, now.
  const ageMs = (pid: number): number => {
    const nowS = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    return (nowS - procStat(`/proc/${pid}`).start / CLK_TCK) * 1000;
  };
  const started = performance.now();
  const out: { name: string; idleUsPerS: number; waitedMs: number }[] = [];
  for (const s of servers) {
    let quiet = 0;
    let last = Number.POSITIVE_INFINITY;
    while (performance.now() < deadline) {
      const a = cpuUs(s.pid);
      await new Promise((r) => setTimeout(r, 1000));
      last = cpuUs(s.pid) - a;
      quiet = last < limit ? quiet + 1 : 0;
      if (quiet >= 2 && ageMs(s.pid) >= minAge) break;
    }
    out.push({ name: s.name, idleUsPerS: last, waitedMs: performance.now() - started });
  }
  return out;
}

/** The C programs of this directory, compiled by `buildNative` (gen.c, floor.c). */
export interface NativeTools {
  gen: string;
  floor: string;
}

/**
 * Compile the load generator (gen.c) and the floor responder (floor.c, with timesvc's NTS code from
 * packages/timesvc/native and the system libcrypto) into `dir` with gcc -O2. The sources are committed,
 * the binaries are not.
 */
export function buildNative(dir: string): NativeTools {
  const here = dirname(fileURLToPath(import.meta.url));
  const native = join(here, '../../packages/timesvc/native');
  const gen = join(dir, 'gen');
  const floor = join(dir, 'floor');
  execFileSync('gcc', ['-O2', '-Wall', '-o', gen, join(here, 'gen.c')], { stdio: 'inherit' });
  // The floor links the system libcrypto: Debian's libssl-dev (headers and libcrypto.so).
  if (!existsSync('/usr/include/openssl/evp.h'))
    throw new Error('the floor needs OpenSSL headers: apt-get update && apt-get install -y libssl-dev');
  execFileSync(
    'gcc',
    [
      '-O2',
      '-Wall',
      `-I${native}`,
      '-o',
      floor,
      join(here, 'floor.c'),
      join(native, 'ntp-nts.c'),
      join(native, 'nts-crypto.c'),
      '-lcrypto',
      '-lm',
    ],
    { stdio: 'inherit' },
  );
  return { gen, floor };
}

export interface CLoadResult {
  sent: number;
  received: number;
  sendMs: number;
  /** How far the generator fell behind its schedule at worst (µs). */
  lateMaxUs: number;
  /** The generator's own CPU time over the step (ms, getrusage). */
  genCpuMs: number;
  sendErrors: number;
  /** CPU time of process `pid` from before the generator started until it ended (µs). */
  cpuUs: number;
  /** Every 64th counted reply (at most 256), when `sample` was asked for. */
  samples: Buffer[];
}

/**
 * Offers `rate`/s for `ms` to 127.0.0.1:`port` with the C generator (gen.c; from 127.0.1.1-16), and
 * measures the CPU time of process `pid` over the step (the generator ends 50 ms after the last reply, at
 * most 300 ms after its last send). Without `requestFile` it sends plain NTP requests (sequence number in
 * the transmit timestamp); with it, the file's `size`-byte records in turn.
 */
export async function offerLoadC(
  tools: NativeTools,
  o: {
    port: number;
    pid: number;
    rate: number;
    ms: number;
    requestFile?: { path: string; size: number };
    minReply?: number;
    sampleFile?: string;
  },
): Promise<CLoadResult> {
  const args = ['--port', String(o.port), '--rate', String(o.rate), '--ms', String(o.ms)];
  if (o.requestFile) args.push('--requests', o.requestFile.path, '--size', String(o.requestFile.size));
  if (o.minReply !== undefined) args.push('--min-reply', String(o.minReply));
  if (o.sampleFile) args.push('--sample', o.sampleFile);
  const cpu0 = cpuUs(o.pid);
  const { stdout: out } = await promisify(execFile)(tools.gen, args, { timeout: o.ms + 30_000 });
  const cpu1 = cpuUs(o.pid);
  const r = JSON.parse(out) as {
    sent: number;
    received: number;
    sendMs: number;
    lateMaxUs: number;
    cpuMs: number;
    sendErrors: number;
  };
  const samples: Buffer[] = [];
  if (o.sampleFile) {
    const b = readFileSync(o.sampleFile);
    for (let at = 0; at + 2 <= b.length;) {
      const len = b.readUInt16LE(at);
      samples.push(b.subarray(at + 2, at + 2 + len));
      at += 2 + len;
    }
  }
  return {
    sent: r.sent,
    received: r.received,
    sendMs: r.sendMs,
    lateMaxUs: r.lateMaxUs,
    genCpuMs: r.cpuMs,
    sendErrors: r.sendErrors,
    cpuUs: cpu1 - cpu0,
    samples,
  };
}

/**
 * The generator's own ceiling (gen.c --calibrate): datagrams per second it sends for `ms` with nothing
 * answering (to a socket of its own that is never read), and its CPU time meanwhile.
 */
export function generatorCeiling(
  tools: NativeTools,
  ms = 1000,
  requestFile?: { path: string; size: number },
): { rate: number; cpuMs: number } {
  const args = ['--calibrate', '--ms', String(ms)];
  if (requestFile) args.push('--requests', requestFile.path, '--size', String(requestFile.size));
  const r = JSON.parse(execFileSync(tools.gen, args, { encoding: 'utf8' })) as {
    sent: number;
    sendMs: number;
    cpuMs: number;
  };
  return { rate: (r.sent / r.sendMs) * 1000, cpuMs: r.cpuMs };
}

/**
 * Writes, to `file`, the cookie master keys a timesvc configured with `cookieKeyHex` derives (`current <id>`,
 * then `<id> <key hex>` per key): what the floor's `--nts` reads to open and seal the same cookies.
 */
export function floorKeyFile(file: string, cookieKeyHex: string): string {
  const mk = new NtsCookieJar({ secret: Buffer.from(cookieKeyHex, 'hex'), now: Date.now }).masterKeys();
  writeFileSync(
    file,
    [
      `current ${mk.current}`,
      ...mk.ids.map((id, i) => `${id} ${mk.keys.subarray(32 * i, 32 * i + 32).toString('hex')}`),
      '',
    ].join('\n'),
  );
  return file;
}

/** Start the floor responder (floor.c) on 127.0.0.1:`port`; NTS with the master keys in `keyFile`. */
export async function startFloor(
  tools: NativeTools,
  port: number,
  o: { keyFile?: string; rcvbuf?: number } = {},
): Promise<RunningProcess> {
  const args = ['--port', String(port), '--rcvbuf', String(o.rcvbuf ?? 4 * 1024 * 1024)];
  if (o.keyFile) args.push('--nts', o.keyFile);
  const proc = startProcess(tools.floor, args);
  await proc.waitForOutput(/floor listening/, 5_000);
  return proc;
}
