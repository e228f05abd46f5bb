/**
 * Lean at rest: each service's time from spawn to ready, idle RSS and idle CPU, beside the floor of this
 * runtime — a bare Node process that only opens an HTTP port — measured in the same run. Each service starts as `npm start` starts it (its package.json `toolkit.start`: the demo config,
 * the start file `dist/start.cjs` when built: docs/at-rest.md "One start file"), so the figures are what an operator's machine carries.
 *
 *   npx tsx bench/services-idle/run.ts [--rounds 3] [--ready-samples 5] [--idle 30] [--settle 45] [--only punch,timesvc]
 *                                      [--simulators]
 *
 * Each round measures the bare process first, then every service: the time to ready of each alone (the median
 * of --ready-samples starts, taken in turns), then
 * RSS and CPU with all of them at rest together after `--settle` seconds (`round` below). It prints its own
 * table (each ratio beside its anchor, the bare process of that round); with --rounds > 1 a last table gives each figure's
 * median over the rounds. A service's ready ratio is the median, over its starts, of its time to ready over the
 * mean of the bare process's starts just before and just after it: this VM's CPU runs at speeds some 1.3-1.5×
 * apart for seconds at a time (docs/at-rest.md "Measuring a start here"), and a ratio of starts taken
 * seconds apart measured that as much as the service. The demo starts in-process simulators for two services (playout-monitor's
 * CasparCG/vMix/HyperDeck, telemetry-bridge's Companion), which keep them busy as live devices would: that
 * is load, not rest. So by default those flags are dropped (the service waits for devices that are not
 * there: the service itself at rest, docs/at-rest.md "The bench and its anchors") and that table is the
 * acceptance; `--simulators` runs the demo exactly as `npm start` does, and the rows of the services whose
 * simulators then run are printed as information (`info`), not against the anchors. `--no-simulators` is
 * the default and still accepted.
 *
 * The ready URL is polled every POLL_MS for the bare process and every service alike. The ports are fixed (the
 * demo's): beside another run on the same machine, run it in a network namespace of its own,
 * `unshare -n sh -c 'ip link set lo up && npm run bench:services-idle -- --no-simulators'` (docs/at-rest.md).
 *
 * Targets (README "Benchmarks"): RSS ≤ 1.5× the bare process, idle CPU ≤ 1 ms per second, ready ≤ 2× the
 * bare process's time to listen. The load average is printed: figures from a busy machine say little.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { procCpuNs, procRssKiB } from '@broadcast-ops/core/testing';
import { STATUS_BIN, discover } from '../../scripts/stack/services.ts';

const root = join(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: {
    idle: { type: 'string' },
    settle: { type: 'string' },
    only: { type: 'string' },
    rounds: { type: 'string' },
    'ready-samples': { type: 'string' },
    'no-simulators': { type: 'boolean' },
    simulators: { type: 'boolean' },
  },
});
const ROUNDS = Math.max(1, Math.min(10, Number(values.rounds ?? 1)));
/** Starts per target and round for its time to ready (the median is the round's figure). */
const READY_SAMPLES = Math.max(1, Math.min(21, Number(values['ready-samples'] ?? 5)));
const IDLE_S = Number(values.idle ?? 30);
const SETTLE_S = Number(values.settle ?? 45);
const ONLY = values.only?.split(',');
/** The `toolkit.start` arguments that start in-process simulators (dropped with --no-simulators). */
const SIMULATOR_FLAGS = ['--with-simulators', '--companion-sim'];
const NO_SIMULATORS = values.simulators !== true;

interface Target {
  name: string;
  /** Started with in-process simulators: under load, its row is information only. */
  simulators?: boolean;
  command: string[];
  env: Record<string, string>;
  ready: string;
}

/** The services `npm start` runs, as it finds them (scripts/stack/services.ts), each from its start file. */
function services(): Target[] {
  const packages = join(root, 'packages');
  // The status service's config is written by the launcher (the landing page's port), not its own.
  return discover(packages, join(packages, 'status'), process.env, false)
    .filter((s) => s.name !== STATUS_BIN && s.start.ready)
    .map((s) => {
      const args = s.start.args ?? [];
      return {
        name: s.name,
        simulators: !NO_SIMULATORS && args.some((a) => SIMULATOR_FLAGS.includes(a)),
        command: [s.bin, ...args.filter((a) => !(NO_SIMULATORS && SIMULATOR_FLAGS.includes(a)))],
        env: s.start.env ?? {},
        ready: s.start.ready ?? '',
      };
    });
}

const BARE_PORT = 18_999;
const bare: Target = {
  name: 'bare node (HTTP port only)',
  command: [
    '-e',
    `require('node:http').createServer((q, s) => s.end('ok')).listen(${BARE_PORT}, '127.0.0.1')`,
  ],
  env: {},
  ready: `http://127.0.0.1:${BARE_PORT}/`,
};

async function isReady(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(500) });
    await res.arrayBuffer();
    return res.status < 500 || res.status === 503;
  } catch {
    return false;
  }
}

interface Figures {
  name: string;
  simulators?: boolean;
  readyMs: number;
  /** Median of the paired ratios against the bare process (1 for the bare process itself). */
  readyX: number;
  rssMb: number;
  idleCpuMsPerS: number;
}

/** The ready URL is polled every POLL_MS, the same for the bare process and every service. */
const POLL_MS = 5;

interface Started {
  child: ChildProcess;
  pid: number;
  readyMs: number;
}

/** Spawn a target and wait until its ready URL answers; the time from spawn to that answer is `readyMs`. */
async function start(t: Target): Promise<Started> {
  // On a shared machine another run may hold the port: its answer would pass for this process's readiness.
  if (await isReady(t.ready)) throw new Error(`${t.name}: ${t.ready} answers before the process is started`);
  const t0 = performance.now();
  const child: ChildProcess = spawn(process.execPath, t.command, {
    cwd: root,
    env: { ...process.env, ...t.env, NODE_ENV: 'production' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const pid = child.pid;
  try {
    if (pid === undefined) throw new Error(`${t.name}: did not start`);
    for (let i = 0; i < 30_000 / POLL_MS; i++) {
      if (child.exitCode !== null) throw new Error(`${t.name} exited ${child.exitCode}: ${stderr}`);
      if (await isReady(t.ready)) {
        const readyMs = performance.now() - t0;
        // It answered but has exited meanwhile: the answer was not its own.
        if ((child.exitCode as number | null) !== null)
          throw new Error(`${t.name} exited at ready: ${stderr}`);
        return { child, pid, readyMs };
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    throw new Error(`${t.name}: not ready within 30 s at ${t.ready}`);
  } catch (err) {
    await stop(child);
    throw err;
  }
}

async function stop(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
}

/**
 * One round: first each target alone, spawned and stopped once ready (its time to ready, nothing else
 * running); then all of them started again one after the other and left running together for `--settle`
 * seconds (V8's clean-up after start-up, the memory reducer's collections, ends within that) and an idle
 * window of `--idle` seconds, over which each one's RSS and CPU are read. At rest they wake rarely, so
 * sharing the window costs them little and a round takes about one window instead of one per target.
 */
async function measureRound(targets: readonly [Target, ...Target[]]): Promise<Figures[]> {
  // READY_SAMPLES starts of each, taken in turns, with the bare process (targets[0]) started before every
  // service and once more after the last: bare, s1, bare, s2, ..., bare. Each service start is paired with
  // the mean of the bare starts on either side of it, a few hundred milliseconds away, so a change of the
  // machine's speed between starts falls on both sides of its ratio (docs/at-rest.md "Measuring a start
  // here"). A target's figure is the median of its starts, and of its paired ratios.
  const [floor, ...services] = targets;
  const readyOf = async (t: Target): Promise<number> => {
    const s = await start(t);
    await stop(s.child);
    return s.readyMs;
  };
  const samples: number[][] = targets.map(() => []);
  const ratios: number[][] = targets.map(() => []);
  for (let k = 0; k < READY_SAMPLES; k++) {
    let before = await readyOf(floor);
    samples[0]!.push(before);
    for (const [j, t] of services.entries()) {
      const ms = await readyOf(t);
      const after = await readyOf(floor);
      samples[0]!.push(after);
      samples[j + 1]!.push(ms);
      ratios[j + 1]!.push(ms / ((before + after) / 2));
      before = after;
    }
  }
  const readyMs = samples.map((xs) => median(xs));
  const readyX = ratios.map((xs, i) => (i === 0 ? 1 : median(xs)));
  const running: Started[] = [];
  try {
    for (const t of targets) running.push(await start(t));
    await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
    const a = running.map((s) => procCpuNs(s.pid));
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const b = running.map((s) => procCpuNs(s.pid));
    const seconds = (performance.now() - w0) / 1000;
    return targets.map((t, i) => ({
      name: t.name,
      ...(t.simulators ? { simulators: true } : {}),
      readyMs: readyMs[i]!,
      readyX: readyX[i]!,
      rssMb: procRssKiB(running[i]!.pid) / 1024,
      idleCpuMsPerS: (b[i]! - a[i]!) / 1e6 / seconds,
    }));
  } finally {
    await Promise.all(running.map((s) => stop(s.child)));
  }
}

// The acceptance anchors (README "Benchmarks"), each against the bare process measured in the same round.
const READY_X = 2;
const RSS_X = 1.5;
const CPU_MS_PER_S = 1;

function mark(ok: boolean, info = false): string {
  if (info) return 'info'; // simulators running in the process: load, not rest (not the acceptance)
  return ok ? 'ok' : 'OVER';
}

function table(rows: Figures[], floor: Figures): void {
  console.log(
    `| process | ready ms | × bare, paired (≤ ${READY_X.toFixed(2)}) | ready ms ÷ bare's | RSS MB | ` +
      `× bare (≤ ${RSS_X.toFixed(2)}) | idle CPU ms/s (≤ ${CPU_MS_PER_S.toFixed(2)}) |`,
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const rssX = r.rssMb / floor.rssMb;
    const info = r.simulators === true;
    console.log(
      `| ${r.name}${info ? ' (with simulators)' : ''} | ${r.readyMs.toFixed(0)} | ` +
        `${r.readyX.toFixed(2)} ${mark(r.readyX <= READY_X, info)} | ` +
        `${(r.readyMs / floor.readyMs).toFixed(2)} | ` +
        `${r.rssMb.toFixed(1)} | ${rssX.toFixed(2)} ${mark(rssX <= RSS_X, info)} | ` +
        `${r.idleCpuMsPerS.toFixed(2)} ${mark(r.idleCpuMsPerS <= CPU_MS_PER_S, info)} |`,
    );
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function load(): string {
  return loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
}

console.log(
  `# services-idle: ${ROUNDS} round(s); settle ${SETTLE_S} s, idle ${IDLE_S} s; ` +
    (NO_SIMULATORS
      ? 'without the demo simulators (the acceptance: each service at rest)'
      : 'as npm start runs them (demo simulators on: their rows are information, not the acceptance)'),
);
const rounds: Figures[][] = [];
for (let round = 1; round <= ROUNDS; round++) {
  console.log(`\n# round ${round}: load average ${load()}`);
  const rows = await measureRound([bare, ...services().filter((t) => !ONLY || ONLY.includes(t.name))]);
  table(rows, rows[0]!);
  console.log(`# round ${round}: load average after ${load()}`);
  rounds.push(rows);
}
if (ROUNDS > 1) {
  console.log(
    `\n# median of ${ROUNDS} rounds (each figure's median, the paired ratio's too; ÷ bare's: of the medians)`,
  );
  const med = rounds[0]!.map((_, i) => ({
    name: rounds[0]![i]!.name,
    ...(rounds[0]![i]!.simulators ? { simulators: true } : {}),
    readyMs: median(rounds.map((r) => r[i]!.readyMs)),
    readyX: median(rounds.map((r) => r[i]!.readyX)),
    rssMb: median(rounds.map((r) => r[i]!.rssMb)),
    idleCpuMsPerS: median(rounds.map((r) => r[i]!.idleCpuMsPerS)),
  }));
  table(med, med[0]!);
}
console.log(
  `# anchors: ready ≤ ${READY_X.toFixed(2)}× bare, RSS ≤ ${RSS_X.toFixed(2)}× bare, ` +
    `idle CPU ≤ ${CPU_MS_PER_S.toFixed(2)} ms/s; the machine's load average is printed per round`,
);
