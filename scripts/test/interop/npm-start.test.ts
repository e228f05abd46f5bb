/**
 * The real `npm start` (every service package, embedded defaults, demo configs) on the Node running this test,
 * stopped the way a terminal's Ctrl-C stops it: SIGINT to the whole foreground process group (npm, tsx and the
 * launcher; the services sit in their own groups and are stopped by the launcher). Five cycles in a row on the
 * same data directory, so later cycles also restart on the state the earlier ones saved, and on the code cache
 * the first one wrote (docs/at-rest.md "One start file").
 *
 * The stack runs in its own network and mount namespaces (`unshare`): the default ports cannot collide with
 * anything else on the machine or with other tests, and `data/` is a bind mount of a temporary directory, so
 * the checkout's own data/ is never touched.
 *
 * It runs what users run: `npm start` builds (prestart) and starts the compiled services on plain node. The
 * test runner's `--conditions=source` is taken out of NODE_OPTIONS, and each service process is checked to be
 * `node <package>/dist/start.cjs` (the start file) with no TypeScript loader.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import {
  declaredServices,
  endStack,
  nodeInStackNet,
  PROBE,
  requireStackTools,
  startStack,
} from '../npm-start-helpers.ts';

const CYCLES = 5;

/** The packages whose `npm start` runs a start file: each declares `toolkit.start`. */
function serviceDirs(): string[] {
  return readdirSync(join(repoRoot, 'packages'))
    .map((d) => join(repoRoot, 'packages', d))
    .filter((d) => existsSync(join(d, 'dist', 'start.cjs')));
}

/** Every service process runs compiled JavaScript on plain node: `node …/packages/<pkg>/dist/start.cjs`. */
function assertPlainNode(pids: number[], out: string): void {
  assert.ok(pids.length > 0, out);
  for (const pid of pids) {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    assert.match(argv[1] ?? '', /\/packages\/[^/]+\/dist\/start\.cjs$/, `pid ${pid}: ${argv.join(' ')}`);
    assert.doesNotMatch(
      argv.join(' '),
      /tsx|--import|--loader|--conditions/,
      `pid ${pid}: ${argv.join(' ')}`,
    );
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
    assert.doesNotMatch(environ, /NODE_OPTIONS=[^\0]*(tsx|--import|--conditions)/, `pid ${pid} NODE_OPTIONS`);
  }
}

test(`npm start on Node ${process.versions.node}: all services up and a clean Ctrl-C stop, ${CYCLES} times in a row`, async () => {
  requireStackTools();
  const services = declaredServices();
  assert.deepEqual(services, [
    'broadcast-ops-status',
    'playout-monitor',
    'punch',
    'telemetry-bridge',
    'timesvc',
  ]);
  mkdirSync(join(repoRoot, 'data'), { recursive: true }); // the mount point
  const data = tempDir('npm-start-');
  const inner = 'set -e; ip link set lo up; mount --bind "$1" "$2/data"; cd "$2"; exec npm start';
  try {
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      const stack = startStack(inner, data.path);
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
        assertPlainNode(servicePids, out);
        // The landing page is the first URL printed.
        assert.match(/http:\/\/\S+/.exec(out)?.[0] ?? '', /^http:\/\/127\.0\.0\.1:8600\/$/, out);
        // Every HTTP URL the launcher printed answers, asked from inside the stack's network namespace.
        const urls = [...out.matchAll(/^\s+.+?\s(http:\/\/127\.0\.0\.1:\d+\/\S*)$/gm)].map((m) => m[1] ?? '');
        assert.ok(urls.length >= services.length, out);
        const probe = nodeInStackNet(stack.child.pid, PROBE, urls);
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
        await endStack(stack, servicePids);
      }
      // Each service, once started, left its start file's code cache for this Node.js, used from cycle 2.
      assert.equal(serviceDirs().length, services.length);
      for (const dir of serviceDirs()) {
        const cache = join(dir, 'dist', 'v8-cache');
        const files = existsSync(cache) ? readdirSync(cache) : [];
        assert.ok(
          files.some((f) => f.endsWith(`.${process.version}-${process.arch}.bin`)),
          `cycle ${cycle}: ${cache}: ${files.join(', ')}`,
        );
      }
    }
  } finally {
    data.remove();
  }
});
