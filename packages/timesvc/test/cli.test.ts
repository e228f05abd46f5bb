import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { queryServer } from '../src/io/query.ts';

const bin = join(repoRoot, 'packages/timesvc/bin/timesvc.mjs');

test('npx timesvc help prints the commands', () => {
  const out = execFileSync('npx', ['timesvc', 'help'], { cwd: repoRoot, encoding: 'utf8' });
  assert.match(out, /Usage: timesvc <command>/);
  assert.match(out, /serve/);
  assert.match(out, /--config/);
  assert.match(out, /check-config/);
});

test('a bad config exits 2 naming the key; check-config prints the effective config without secrets', () => {
  const d = tempDir('timesvc-cli-');
  try {
    const bad = join(d.path, 'bad.yaml');
    writeFileSync(bad, 'ntp:\n  prot: 123\n');
    const r = spawnSync(process.execPath, [bin, '--config', bad], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown key "ntp\.prot"/);
    const good = join(d.path, 'good.yaml');
    writeFileSync(good, 'web:\n  jwt_secret: s3cr3t-value\n');
    const out = execFileSync(process.execPath, [bin, 'check-config', '--config', good], { encoding: 'utf8' });
    const parsed = JSON.parse(out) as { web: { jwt_secret: string }; ntp: { port: number } };
    assert.equal(parsed.web.jwt_secret, '[set]');
    assert.equal(parsed.ntp.port, 123);
    assert.doesNotMatch(out, /s3cr3t/);
  } finally {
    d.remove();
  }
});

test('serve: answers NTP and /api/health, exits 0 on SIGTERM', async () => {
  const d = tempDir('timesvc-cli-');
  const cfg = join(d.path, 'c.yaml');
  writeFileSync(
    cfg,
    'ntp:\n  port: 0\n  interface: 127.0.0.1\n  local_stratum: true\n  stratum: 9\nweb:\n  port: 0\n  bind_address: 127.0.0.1\n',
  );
  const proc = startProcess(process.execPath, [bin, '--config', cfg]);
  try {
    const m = await proc.waitForOutput(
      /"ntp":\[\{"family":"IPv4","address":"127\.0\.0\.1","port":(\d+)\}\],"web":"(http:[^"]+)"/,
      20_000,
    );
    const ntpPort = Number(m[1]);
    const web = m[2]!;
    const health = (await (await fetch(`${web}/api/health`)).json()) as { status: string };
    assert.equal(health.status, 'healthy');
    await proc.waitForOutput(/"to":"LOCKED"/, 15_000);
    const r = await queryServer('127.0.0.1', ntpPort);
    assert.equal(r.stratum, 9);
    const exit = await proc.stop('SIGTERM');
    assert.equal(exit.code, 0, proc.output().slice(-2000));
  } finally {
    await proc.stop('SIGKILL');
    d.remove();
  }
});
