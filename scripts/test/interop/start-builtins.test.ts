/**
 * What each service's start file has loaded of Node's own modules when it starts listening, in its demo
 * configuration without the simulators (docs/at-rest.md "What was cut" and "One start file"): Node's TLS,
 * HTTP/2, HTTPS, readline, the promise-based fs and DNS, TTY and (from the second start on) crypto load on
 * first use, not at every start. A dependency or a module of ours that loads one at start again fails this
 * test, with the service named.
 *
 * Each service runs its own `dist/start.cjs` (the runner builds first) in a network namespace of its own
 * (`unshare`), so its demo ports collide with nothing, from a temporary working directory holding a copy of
 * the repository's config/, so its data/ is not the checkout's. A preload records `process.moduleLoadList`
 * when the service's ready port starts listening, and the process exits there.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, requireTool, tempDir } from '@broadcast-ops/core/testing';
import { STATUS_BIN, discover } from '../../stack/services.ts';
import { UNSHARE_FLAGS } from '../npm-start-helpers.ts';

/** Loaded by a service only when a feature that needs it is used. */
const NOT_AT_START = ['tls', 'https', 'http2', 'readline', 'fs/promises', 'dns/promises', 'tty'];

/**
 * Loaded on first use too, but a first start in a new data directory uses it: playout-monitor generates
 * its admin token there (packages/playout-monitor/README.md). So it is checked at the second start in the
 * same directory, which is every start after the first.
 */
const NOT_AT_RESTART = ['crypto'];

/**
 * Loaded at every start here by these services: telemetry-bridge draws its event log's new epoch, a UUIDv7,
 * from node:crypto's random bytes when it opens a log it did not close cleanly, as after this test's exit
 * at `listening` (a restart after a clean stop keeps the epoch: packages/telemetry-bridge/README.md
 * "Durability"); playout-monitor's Ember+ library brings `debug`, which reads `tty` when loaded, and its
 * TSL sender looks its destination's name up as it starts.
 */
const AT_START_BY: Readonly<Record<string, readonly string[]>> = {
  'telemetry-bridge': ['crypto'],
  'playout-monitor': ['dns/promises', 'tty'],
};

/** The flags that start a demo's in-process simulators (devices talking to the service: not at rest). */
const SIMULATOR_FLAGS = ['--with-simulators', '--companion-sim'];

interface Start {
  name: string;
  dir: string;
  args: string[];
  env: Record<string, string>;
  port: number;
}

/** The services with a ready URL, as `npm start` finds them (scripts/stack/services.ts), status aside. */
function starts(): Start[] {
  const packages = join(repoRoot, 'packages');
  return discover(packages, join(packages, 'status'), process.env, false)
    .filter((s) => s.name !== STATUS_BIN && s.start.ready && s.bin.endsWith('start.cjs'))
    .map((s) => ({
      name: basename(s.dir),
      dir: s.dir,
      args: (s.start.args ?? []).filter((a) => !SIMULATOR_FLAGS.includes(a)),
      env: s.start.env ?? {},
      port: Number(new URL(s.start.ready ?? '').port),
    }));
}

const PRELOAD = `
const net = require('node:net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  this.once('listening', () => {
    if (this.address()?.port !== Number(process.env.START_PORT)) return;
    require('node:fs').writeFileSync(process.env.START_OUT, process.moduleLoadList.join('\\n'));
    process.exit(0);
  });
  return listen.apply(this, args);
};
`;

test("each service's start file loads no TLS, HTTP/2, HTTPS, readline, promises of fs or DNS, TTY or crypto before it listens", () => {
  for (const tool of ['unshare', 'ip']) requireTool(tool);
  const services = starts();
  assert.deepEqual(
    services.map((s) => s.name),
    ['playout-monitor', 'punch', 'telemetry-bridge', 'timesvc'],
  );
  const tmp = tempDir('start-builtins-');
  try {
    cpSync(join(repoRoot, 'config'), join(tmp.path, 'config'), { recursive: true });
    const preload = join(tmp.path, 'preload.cjs');
    writeFileSync(preload, PRELOAD);
    for (const s of services)
      for (const restart of [false, true]) {
        const out = join(tmp.path, `${s.name}.loaded`);
        const r = spawnSync(
          'unshare',
          [
            ...UNSHARE_FLAGS.filter((f) => f !== '--mount'),
            'sh',
            '-c',
            'ip link set lo up && exec "$@"',
            'sh',
            process.execPath,
            '-r',
            preload,
            join(s.dir, 'dist', 'start.cjs'),
            ...s.args,
          ],
          {
            cwd: tmp.path,
            encoding: 'utf8',
            timeout: 60_000,
            env: { ...process.env, NODE_OPTIONS: '', ...s.env, START_PORT: String(s.port), START_OUT: out },
          },
        );
        assert.equal(r.status, 0, `${s.name}: ${r.stderr}`);
        const loaded = readFileSync(out, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('NativeModule '))
          .map((l) => l.slice('NativeModule '.length));
        assert.ok(loaded.includes('http'), `${s.name}: the record is of a started service`);
        const early = [...NOT_AT_START, ...(restart ? NOT_AT_RESTART : [])].filter(
          (m) => loaded.includes(m) && !AT_START_BY[s.name]?.includes(m),
        );
        assert.deepEqual(
          early,
          [],
          `${s.name} loaded ${early.join(', ')} before listening${restart ? ' (its second start)' : ''}`,
        );
      }
  } finally {
    tmp.remove();
  }
});
