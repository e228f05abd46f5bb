import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { get } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export { ManualClock } from '../clock.ts';
export { CLK_TCK, procCpuNs, procRssKiB, procStat } from './proc.ts';

/** The value of a codec's answer that must decode (our own output, a capture); throws with the refusal if not. */
export function expectDecoded<T>(
  result: { ok: true; value: T } | { ok: false; error: { code: string; message: string } },
): T {
  if (!result.ok)
    throw new Error(`expected a decoded value, got ${result.error.code}: ${result.error.message}`);
  return result.value;
}

/** A codec's answer as one string for assertions: `'ok'`, or the refusal's stable code. */
export function refusal(result: { ok: true } | { ok: false; error: { code: string } }): string {
  return result.ok ? 'ok' : result.error.code;
}

/** Repository root (where the root package.json is). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

interface ToolEntry {
  binary: string;
  aptPackage: string;
}

/** The system tools tests may need, from scripts/system-tools.txt (`binary apt-package` per line). */
export function systemTools(): ToolEntry[] {
  return readFileSync(join(repoRoot, 'scripts/system-tools.txt'), 'utf8')
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean)
    .map((l) => {
      // `<binary> <package> [more packages the tool needs, e.g. plugins]`
      const [binary = '', ...packages] = l.split(/\s+/);
      return { binary, aptPackage: packages.join(' ') };
    });
}

export function findBinary(binary: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    for (const dir of ['/usr/sbin', '/sbin', '/usr/bin']) {
      try {
        execFileSync('test', ['-x', join(dir, binary)]);
        return join(dir, binary);
      } catch {
        /* not here */
      }
    }
    return undefined;
  }
}

/**
 * A test that needs a system tool calls this first. scripts/setup-tools.sh (run by the test runner) has
 * installed every listed tool when running as root; if the tool is still missing this throws, naming the
 * exact command to run. It never skips.
 */
export function requireTool(binary: string): string {
  const found = findBinary(binary);
  if (found) return found;
  const entry = systemTools().find((t) => t.binary === binary);
  const pkg = entry?.aptPackage ?? '<package providing ' + binary + '>';
  throw new Error(
    `system tool "${binary}" is missing; install it with: apt-get update && apt-get install -y ${pkg} ` +
      `(or run: npm run setup:tools as root)`,
  );
}

/**
 * A fresh temporary directory, removed by the returned function. A child that is still ending (a command an
 * agent ran, a store flushing on close) may add a file while the tree is being removed: ENOTEMPTY is retried
 * (rmSync's maxRetries, linear back-off) rather than failing the test that owned the directory.
 */
export function tempDir(prefix = 'toolkit-test-'): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    remove: () => rmSync(path, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }),
  };
}

/**
 * Scheduling noise of this process right now: how late a 1 ms timer fires, the worst of `samples` tries, in
 * ms. A timing assertion adds a multiple of it to its nominal bound (timingBound), so a loaded machine (other
 * processes on every core) widens the bound by what the load actually costs and a quiet one keeps it tight.
 */
export async function schedulingNoiseMs(samples = 25): Promise<number> {
  let worst = 0;
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 1));
    worst = Math.max(worst, performance.now() - t0 - 1);
  }
  return worst;
}

/**
 * A wall-clock bound for a test: `nominalMs` plus `factor` times the scheduling noise measured now (call it
 * right after the measured work, when the load that slowed it is still there).
 */
export async function timingBound(nominalMs: number, factor = 20): Promise<number> {
  return nominalMs + factor * (await schedulingNoiseMs());
}

/**
 * Poll `check` until it returns a truthy value or the bound runs out. The bound is `timeoutMs` on a quiet
 * machine and grows with the run queue (`loadFactor`, at most 10×): a wait is a bound on how long to look,
 * not a measurement, and what it waits for (a child's start-up, a poll, a reconnect) shares the CPU with
 * everything else running. A condition that never comes still fails, later on a loaded machine. Tests that
 * assert how quickly something happens measure the time themselves and judge it with `timingBound`.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  options: {
    timeoutMs?: number;
    intervalMs?: number;
    /** What was awaited; a function is called at the timeout, so logs it names are read then, not at the start. */
    what?: string | (() => string);
  } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 5000) * loadFactor();
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${(typeof options.what === 'function' ? options.what() : options.what) ?? 'condition'}${last instanceof Error ? `: ${last.message}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 20));
  }
}

/**
 * `promise`, or a failure naming `what` once `timeoutMs` (scaled by `loadFactor`, as waitFor's bound) has
 * passed: a close or a reply that never comes fails its own test with a name, not the runner's file
 * timeout.
 */
export function settlesWithin<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  const bound = timeoutMs * loadFactor();
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: still pending after ${Math.round(bound)} ms`)),
      bound,
    );
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

/**
 * How much slower than on a quiet machine a process starts now: the run queue per core (1-minute load
 * average / cores), at least 1, at most 10. A child's start-up (node, then tsx compiling sources) needs CPU
 * time it shares with everything else running, so waitForOutput scales its bound by this; a process that
 * never prints still fails, only later on a loaded machine.
 */
export function loadFactor(): number {
  const perCore = (loadavg()[0] ?? 0) / Math.max(1, availableParallelism());
  return Math.min(10, Math.max(1, perCore));
}

/** The kernel's ephemeral port range (Linux `net.ipv4.ip_local_port_range`), else the Linux default. */
export function ephemeralPortRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const range: [number, number] = [Number(lo), Number(hi)];
    if (range.every((n) => Number.isInteger(n) && n > 0)) return range;
  } catch {
    /* not Linux: the default below */
  }
  return [32768, 60999];
}

/** Whether `port` can be bound on 127.0.0.1 now (TCP, and UDP too for `both`). */
async function bindable(port: number, kind: 'tcp' | 'udp' | 'both'): Promise<boolean> {
  if (kind !== 'udp') {
    const ok = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (!ok) return false;
  }
  if (kind !== 'tcp') {
    return new Promise<boolean>((resolve) => {
      const s = createSocket('udp4');
      s.once('error', () => resolve(false));
      s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
  }
  return true;
}

/**
 * A loopback port for a server that must be given its port (redis-server, chronyd) or must come back on the
 * same port after a restart. Picked at random BELOW the kernel's ephemeral range and checked free: a port
 * taken with `listen(0)` and released lies inside that range, so any outgoing connection of a test running
 * beside it may get it as its local port before the server binds it (or, while the server is down, a client
 * reconnecting to it may connect to itself), and the server then fails with EADDRINUSE. Below the range only
 * an explicit bind can collide, which the check and the random pick make unlikely. Bounded: 200 tries.
 * `range`: [first, last + 1) to pick from (tests of this helper).
 */
export async function freePort(
  kind: 'tcp' | 'udp' | 'both' = 'tcp',
  range: [number, number] = [10_000, Math.max(11_000, ephemeralPortRange()[0])],
): Promise<number> {
  const [lo, hi] = range;
  for (let i = 0; i < 200; i++) {
    const port = lo + Math.floor(Math.random() * (hi - lo));
    if (await bindable(port, kind)) return port;
  }
  throw new Error(`no free ${kind} port on 127.0.0.1 between ${lo} and ${hi} after 200 tries`);
}

/** A child process with its output collected, ended by PID when the test is done. */
export interface RunningProcess {
  child: ChildProcess;
  output: () => string;
  waitForOutput: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpMatchArray>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop: (signal?: NodeJS.Signals) => Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startProcess(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): RunningProcess {
  const child = spawn(command, args, {
    cwd: options.cwd ?? repoRoot,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const cap = 4 * 1024 * 1024; // bounded: a chatty child cannot exhaust the test's memory
  const onData = (d: Buffer): void => {
    out += d.toString();
    if (out.length > cap) out = out.slice(-cap / 2);
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  // 'exit' can come before the last output has been read; `exited` waits for the streams to close too, at most
  // 2 s (a grandchild may keep them open), so output() after it holds what the process wrote.
  const closed = (stream: NodeJS.ReadableStream | null): Promise<void> =>
    stream ? new Promise((done) => stream.once('close', () => done())) : Promise.resolve();
  const drained = Promise.all([closed(child.stdout), closed(child.stderr)]);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => {
    child.once('exit', (code, signal) => {
      const grace = new Promise((done) => setTimeout(done, 2000).unref());
      void Promise.race([drained, grace]).then(() => res({ code, signal }));
    });
  });
  return {
    child,
    output: () => out,
    waitForOutput: async (pattern, timeoutMs = 10_000) =>
      waitFor(() => pattern.exec(out), {
        timeoutMs: timeoutMs * loadFactor(),
        what: `output ${pattern}`,
      }).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n--- output ---\n${out.slice(-4000)}`);
      }),
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
}

/** The status of a plain GET with these headers; unlike fetch, it can name any `Host` (a rebinding test). */
export function statusOf(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    }).once('error', reject);
  });
}
