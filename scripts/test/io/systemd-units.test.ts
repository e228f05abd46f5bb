/**
 * deploy/systemd/: every unit passes `systemd-analyze verify` (templates both as written and as an instance),
 * with no warning at all (an unknown or misspelt key is only a warning to systemd, and a failure here), and
 * keeps the promises docs/INSTALL.md makes: unprivileged user, state in StateDirectory=, the usual hardening,
 * and CAP_NET_BIND_SERVICE only where a privileged port is bound. `verify` reads the files offline, so this
 * runs in a container without a running systemd.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, requireTool, tempDir } from '@broadcast-ops/core/testing';

const unitsDir = join(repoRoot, 'deploy/systemd');
const units = readdirSync(unitsDir).filter((f) => f.endsWith('.service'));
/** Services that bind a port below 1024 (timesvc: NTP 123, PTP 319/320). */
const PRIVILEGED = new Set(['timesvc.service']);

function verify(file: string): { status: number | null; output: string } {
  const r = spawnSync(requireTool('systemd-analyze'), ['verify', file], {
    encoding: 'utf8',
    timeout: 60_000,
    // Offline: no bus, no pager, no colour; a container without systemd as PID 1 still verifies files.
    env: { ...process.env, SYSTEMD_PAGER: '', SYSTEMD_COLORS: '0', SYSTEMD_LOG_COLOR: '0' },
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** Lines of verify output about our unit (systemd also comments on the host's own units in a container). */
function aboutUnit(output: string, name: string): string[] {
  return output.split('\n').filter((l) => l.includes(name) || l.includes(name.replace('@.', '@test.')));
}

test('deploy/systemd holds a unit per service', () => {
  assert.deepEqual(units.sort(), [
    'broadcast-ops-status.service',
    'playout-monitor@.service',
    'punch@.service',
    'telemetry-bridge@.service',
    'timesvc.service',
  ]);
});

for (const unit of units) {
  test(`systemd-analyze verify ${unit}: no error, no warning`, () => {
    const tmp = tempDir('units-');
    try {
      const files = [join(tmp.path, unit)];
      copyFileSync(join(unitsDir, unit), files[0] ?? '');
      if (unit.includes('@.')) {
        files.push(join(tmp.path, unit.replace('@.', '@test.')));
        copyFileSync(join(unitsDir, unit), files[1] ?? '');
      }
      for (const file of files) {
        const r = verify(file);
        assert.equal(r.status, 0, r.output);
        assert.deepEqual(aboutUnit(r.output, unit), [], r.output);
      }
    } finally {
      tmp.remove();
    }
  });

  test(`${unit}: unprivileged user, StateDirectory, hardening, capabilities only where needed`, () => {
    const text = readFileSync(join(unitsDir, unit), 'utf8');
    const value = (key: string): string | undefined =>
      new RegExp(`^${key}=(.*)$`, 'm').exec(text)?.[1]?.trim();
    assert.equal(value('User'), 'broadcast-ops');
    assert.match(value('StateDirectory') ?? '', /^broadcast-ops\//);
    assert.match(
      value('ExecStart') ?? '',
      /^\/usr\/bin\/node \/opt\/broadcast-ops\/packages\/[a-z-]+\/dist\/start\.cjs/,
    );
    // The start file's code cache in the state directory: the code under /opt is read-only (ProtectSystem).
    assert.match(
      text,
      new RegExp(
        `^Environment=BROADCAST_OPS_CODE_CACHE=/var/lib/${value('StateDirectory') ?? '-'}/v8-cache$`,
        'm',
      ),
    );
    for (const [k, v] of [
      ['NoNewPrivileges', 'yes'],
      ['ProtectSystem', 'strict'],
      ['PrivateTmp', 'yes'],
      ['ProtectHome', 'yes'],
    ])
      assert.equal(value(k ?? ''), v, `${unit}: ${k}`);
    if (PRIVILEGED.has(unit)) {
      assert.equal(value('AmbientCapabilities'), 'CAP_NET_BIND_SERVICE');
      assert.equal(value('CapabilityBoundingSet'), 'CAP_NET_BIND_SERVICE');
    } else {
      assert.equal(value('AmbientCapabilities'), '');
      assert.equal(value('CapabilityBoundingSet'), '');
    }
  });
}

test('a unit with a misspelt key or a missing program fails the check above', () => {
  const tmp = tempDir('units-bad-');
  try {
    const text = readFileSync(join(unitsDir, 'timesvc.service'), 'utf8');
    const bad = join(tmp.path, 'timesvc.service');
    // The same file the checks above accept, with one key misspelt: a warning only, exit status 0.
    writeFileSync(bad, text.replace('NoNewPrivileges=yes', 'NoNewPrivilegs=yes'));
    const r = verify(bad);
    assert.notDeepEqual(aboutUnit(r.output, 'timesvc.service'), [], r.output);
    writeFileSync(bad, text.replace('/usr/bin/node ', '/usr/bin/no-such-node '));
    assert.notEqual(verify(bad).status, 0);
  } finally {
    tmp.remove();
  }
});
