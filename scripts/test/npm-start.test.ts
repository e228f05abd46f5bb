/**
 * The real `npm start` (every service package, embedded defaults, demo configs) on the Node running this test,
 * stopped the way a terminal's Ctrl-C stops it: SIGINT to the whole foreground process group (npm, tsx and the
 * launcher; the services sit in their own groups and are stopped by the launcher). Five cycles in a row on the
 * same data directory, so later cycles also restart on the state the earlier ones saved.
 *
 * The stack runs in its own network and mount namespaces (`unshare`): the default ports cannot collide with
 * anything else on the machine or with other tests, and `data/` is a bind mount of a temporary directory, so
 * the checkout's own data/ is never touched.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, requireTool, startProcess, tempDir } from '../../packages/core/src/testing/index.ts';
import { childEnv } from '../node-matrix.ts';

const CYCLES = 5;

/**
 * Fetches each URL given; exits 1 naming those that did not answer, or answered with a server error other than
 * 503 (a health endpoint's "not healthy yet", e.g. timesvc in its first second before the clock is usable).
 */
const PROBE = `
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
function declaredServices(): string[] {
  const names: string[] = [];
  for (const dir of readdirSync(join(repoRoot, 'packages'))) {
    const file = join(repoRoot, 'packages', dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as {
      bin?: Record<string, string>;
      toolkit?: { start?: unknown };
    };
    const bin = Object.keys(pkg.bin ?? {})[0];
    if (pkg.toolkit?.start && bin) names.push(bin);
  }
  return names.sort();
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* already gone */
  }
}

test(`npm start on Node ${process.versions.node}: all services up and a clean Ctrl-C stop, ${CYCLES} times in a row`, async () => {
  requireTool('unshare');
  requireTool('ip');
  requireTool('setsid');
  requireTool('npm');
  requireTool('nsenter');
  const services = declaredServices();
  assert.deepEqual(services, ['playout-monitor', 'punch', 'telemetry-bridge', 'timesvc']);
  mkdirSync(join(repoRoot, 'data'), { recursive: true }); // the mount point
  const data = tempDir('npm-start-');
  // Root: plain network and mount namespaces; otherwise a user namespace maps us to root inside.
  const nsFlags =
    process.getuid?.() === 0 ? ['--net', '--mount'] : ['--user', '--map-root-user', '--net', '--mount'];
  const nsenterFlags = process.getuid?.() === 0 ? ['--net'] : ['--user', '--net', '--preserve-credentials'];
  const inner = 'set -e; ip link set lo up; mount --bind "$1" "$2/data"; cd "$2"; exec npm start';
  try {
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      // setsid: npm leads a new process group, as in a terminal, so a group SIGINT is exactly Ctrl-C.
      const stack = startProcess(
        'setsid',
        ['unshare', ...nsFlags, '--', 'sh', '-c', inner, 'sh', data.path, repoRoot],
        {
          // This Node first on PATH: npm's and tsx's `#!/usr/bin/env node` run on it, and the services with them.
          env: childEnv(process.env, dirname(dirname(process.execPath))),
        },
      );
      const servicePids: number[] = [];
      try {
        await stack.waitForOutput(/Press Ctrl-C to stop|exited unexpectedly|did not become ready/, 120_000);
        const out = stack.output();
        for (const m of out.matchAll(/\(pid (\d+), log/g)) servicePids.push(Number(m[1]));
        for (const name of services) {
          assert.match(
            out,
            new RegExp(`^\\s+${name}\\s+up\\s`, 'm'),
            `cycle ${cycle}: ${name} not up\n${out}`,
          );
        }
        assert.ok(stack.child.pid);
        // Every HTTP URL the launcher printed answers, asked from inside the stack's network namespace.
        const urls = [...out.matchAll(/^\s+.+?\s(http:\/\/127\.0\.0\.1:\d+\/\S*)$/gm)].map((m) => m[1] ?? '');
        assert.ok(urls.length >= services.length, out);
        const probe = spawnSync(
          'nsenter',
          [
            ...nsenterFlags,
            '-t',
            String(stack.child.pid),
            '--',
            process.execPath,
            '--input-type=module',
            '-e',
            PROBE,
            ...urls,
          ],
          { encoding: 'utf8', timeout: 30_000 },
        );
        assert.equal(probe.status, 0, `cycle ${cycle}: ${probe.stdout}${probe.stderr}`);
        process.kill(-stack.child.pid, 'SIGINT');
        const exit = await stack.exited;
        const all = stack.output();
        // The launcher exits 0; npm, having received the SIGINT itself, re-raises it once its script has
        // ended (@npmcli/run-script), so a shell sees 130 as after any Ctrl-C'd npm script.
        assert.match(all, /^start-stack: exit 0$/m, `cycle ${cycle}: launcher\n${all}`);
        assert.ok(
          exit.code === 0 || exit.signal === 'SIGINT',
          `cycle ${cycle}: npm ${exit.code ?? exit.signal}\n${all}`,
        );
        for (const name of services) {
          assert.match(
            all,
            new RegExp(`start-stack: ${name} exited with 0$`, 'm'),
            `cycle ${cycle}: ${name}\n${all}`,
          );
        }
        assert.doesNotMatch(all, /Assertion failed|Segmentation fault|exited unexpectedly/);
        for (const name of services) {
          const log = readFileSync(join(data.path, 'logs', `${name}.log`), 'utf8');
          assert.doesNotMatch(log, /Assertion failed|Aborted|Segmentation fault|"level":60/, `${name}.log`);
        }
      } finally {
        if (stack.child.pid && stack.child.exitCode === null) killQuietly(-stack.child.pid, 'SIGKILL');
        for (const pid of servicePids) killQuietly(-pid, 'SIGKILL'); // each service leads its own group
        await stack.exited;
      }
    }
  } finally {
    data.remove();
  }
});
