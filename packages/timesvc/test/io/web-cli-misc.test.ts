// check-config warnings, hash-password, the human query output (the CLI as a child process).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { verifyPassword } from '../../src/io/web/passwords.ts';
import { run } from '../helpers/cli.ts';
import { startService } from '../helpers/service.ts';
import { until } from '../helpers/web.ts';

const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

test('check-config: the GPSDO example (GPSDO implemented) draws no not-implemented warning; stratum 1 without a GPSDO does', async () => {
  const r = await run(['check-config', '--config', join(repoRoot, 'config/timesvc.gpsdo.example.yaml')], {
    TIMESVC_JWT_SECRET: '',
  });
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /gpsdo\.enabled|not implemented/);
  assert.doesNotMatch(r.stderr, /ntp\.stratum: 1 is served only/);
  const dir = await mkdtemp(join(tmpdir(), 'timesvc-check-'));
  try {
    const file = join(dir, 'stratum1.yaml');
    await writeFile(file, 'ntp:\n  stratum: 1\n  ref_id: GPS\n');
    const s1 = await run(['check-config', '--config', file]);
    assert.equal(s1.code, 0, s1.stderr);
    assert.match(s1.stderr, /^warning: ntp\.stratum: 1 is served only with a locked GPSDO/m);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const demo = await run(['check-config', '--config', join(repoRoot, 'config/timesvc.demo.yaml')]);
  assert.match(demo.stderr, /warning: web\.jwt_secret: the documented lab credential/);
  assert.match(demo.stderr, /warning: web\.users\[0\] \(admin\): the documented lab credential/);
});

test('hash-password prints a scrypt hash of the password on stdin; short passwords refused', async () => {
  const r = await run(['hash-password'], {}, 'a long enough password\n');
  assert.equal(r.code, 0, r.stderr);
  const hash = r.stdout.trim();
  assert.match(hash, /^scrypt\$17\$8\$1\$/);
  assert.ok(await verifyPassword('a long enough password', hash));
  const short = await run(['hash-password'], {}, 'short\n');
  assert.equal(short.code, 2);
});

test('query prints a human summary with the refid as text; --json keeps the raw sample', async () => {
  const local = await startService({ local_stratum: true, stratum: 10, interface: '127.0.0.1' });
  closers.push(() => local.service.close());
  await until(() => local.service.manager.state === 'LOCKED' || undefined, 10_000, 'locked');
  const r = await run(['query', `127.0.0.1:${local.port}`]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    /^127\.0\.0\.1:\d+ {2}offset [+-]\d+(ns|us|ms) {2}delay \d+(ns|us|ms) {2}stratum 10 {2}refid LOCL /,
  );
  assert.ok(r.stdout.length < 250, 'one short line');
  const j = await run(['query', '--json', `127.0.0.1:${local.port}`]);
  assert.equal((JSON.parse(j.stdout) as { stratum: number }).stratum, 10);
});
