// Shared by the npm-start*.test.ts files (no tests here).
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { dirname, join } from 'node:path';
import { repoRoot, requireTool, startProcess } from '@broadcast-ops/core/testing';
import { childEnv } from '../node-matrix.ts';
import { discover } from '../stack/services.ts';

/**
 * Fetches each URL given; exits 1 naming those that did not answer, or answered with a server error other than
 * 503 (a health endpoint's "not healthy yet", e.g. timesvc in its first second before the clock is usable).
 */
export const PROBE = `
const bad = [];
for (const url of process.argv.slice(1)) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    if (res.status >= 500 && res.status !== 503) bad.push(url + ' ' + res.status);
  } catch (e) {
    bad.push(url + ' ' + e.message);
  }
}
if (bad.length) { console.error(bad.join('\\n')); process.exit(1); }
console.log('probed ' + (process.argv.length - 1) + ' URLs');
`;

/** Names of the services `npm start` launches: the packages declaring toolkit.start (see start-stack.ts). */
export function declaredServices(): string[] {
  const packages = join(repoRoot, 'packages');
  return discover(packages, join(packages, 'status'), process.env, false)
    .map((s) => s.name)
    .sort();
}

/** The environment `npm start` gets: this Node first on PATH, no `source` condition from the test runner. */
export function userEnv(): NodeJS.ProcessEnv {
  const env = childEnv(process.env, dirname(dirname(process.execPath)));
  const options = (env['NODE_OPTIONS'] ?? '').replace(/--conditions[= ]source/g, '').trim();
  // Set, even when empty: startProcess lays this over process.env, which has the runner's NODE_OPTIONS.
  env['NODE_OPTIONS'] = options;
  env['BROADCAST_OPS_PORT_OFFSET'] = '';
  return env;
}

export function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* already gone */
  }
}

/** The tools the namespaced `npm start` tests need (requireTool: never a silent skip). */
export function requireStackTools(): void {
  for (const tool of ['unshare', 'ip', 'setsid', 'npm', 'nsenter']) requireTool(tool);
}

/** Root: plain network and mount namespaces; otherwise a user namespace maps us to root inside. */
export const UNSHARE_FLAGS =
  process.getuid?.() === 0 ? ['--net', '--mount'] : ['--user', '--map-root-user', '--net', '--mount'];
const NSENTER_FLAGS = process.getuid?.() === 0 ? ['--net'] : ['--user', '--net', '--preserve-credentials'];

/** Runs `node --input-type=module -e script ...args` inside the network namespace of process `pid`. */
export function nodeInStackNet(pid: number, script: string, args: string[]): SpawnSyncReturns<string> {
  return spawnSync(
    'nsenter',
    [
      ...NSENTER_FLAGS,
      '-t',
      String(pid),
      '--',
      process.execPath,
      '--input-type=module',
      '-e',
      script,
      ...args,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
}

/**
 * `sh -c inner` in fresh network and mount namespaces, with $1 the test's data directory, $2 the repository
 * and $3… the extra arguments. setsid: npm leads a new process group, as in a terminal, so a group SIGINT is
 * exactly Ctrl-C. This Node first on PATH (userEnv): npm's `#!/usr/bin/env node` runs on it, and the services
 * with it.
 */
export function startStack(
  inner: string,
  dataDir: string,
  ...extra: string[]
): ReturnType<typeof startProcess> {
  return startProcess(
    'setsid',
    ['unshare', ...UNSHARE_FLAGS, '--', 'sh', '-c', inner, 'sh', dataDir, repoRoot, ...extra],
    { env: userEnv() },
  );
}

/** Whatever happened: the launcher's group and each service's (each leads its own) killed, and waited for. */
export async function endStack(
  stack: ReturnType<typeof startProcess>,
  servicePids: readonly number[],
): Promise<void> {
  if (stack.child.pid && stack.child.exitCode === null) killQuietly(-stack.child.pid, 'SIGKILL');
  for (const pid of servicePids) killQuietly(-pid, 'SIGKILL');
  await stack.exited;
}
