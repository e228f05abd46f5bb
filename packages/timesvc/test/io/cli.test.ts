import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import { queryServer } from '../../src/io/query.ts';
import { startTimesvcCli, timesvcBin as bin } from '../helpers/cli.ts';
import { makeCertificate, writeNtsConfig } from '../helpers/nts.ts';

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
  const proc = startTimesvcCli(cfg);
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

test('the NTS cookie key (TIMESVC_NTS_COOKIE_KEY) is never printed: check-config, start-up logs, a SIGHUP', async () => {
  const d = tempDir('timesvc-cli-secret-');
  const key = 'c0ffee'.repeat(11).slice(0, 64);
  const env = { TIMESVC_NTS_COOKIE_KEY: key };
  try {
    const pair = makeCertificate(d.path);
    const cfg = join(d.path, 'c.yaml');
    writeNtsConfig(cfg, pair);
    const shown = execFileSync(process.execPath, [bin, 'check-config', '--config', cfg], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
    assert.equal((JSON.parse(shown) as { nts: { cookie_key: string } }).nts.cookie_key, '[set]');
    assert.doesNotMatch(shown, new RegExp(key.slice(0, 16), 'i'));
    const proc = startTimesvcCli(cfg, env);
    try {
      await proc.waitForOutput(/timesvc started/, 20_000);
      proc.child.kill('SIGHUP');
      await new Promise((r) => setTimeout(r, 500));
      assert.doesNotMatch(
        proc.output(),
        /no NTS cookie key configured/,
        'the key from the environment is used',
      );
    } finally {
      await proc.stop('SIGTERM');
    }
    assert.ok(proc.output().length > 0);
    assert.doesNotMatch(proc.output(), new RegExp(key.slice(0, 16), 'i'));
  } finally {
    d.remove();
  }
});
