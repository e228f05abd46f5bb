import assert from 'node:assert/strict';
import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { ntsKeyExchange } from '../../src/io/nts-ke-client.ts';
import { NtsKeServer } from '../../src/io/nts-ke-server.ts';
import { startTimesvcCli } from '../helpers/cli.ts';
import { makeCertificate, writeNtsConfig } from '../helpers/nts.ts';

async function trusts(port: number, ca: string): Promise<boolean> {
  try {
    await ntsKeyExchange({ host: '127.0.0.1', port, caFile: ca, timeoutMs: 3000 });
    return true;
  } catch {
    return false;
  }
}

test('NTS-KE certificate: reloaded when the files change; a broken file keeps the previous pair', async () => {
  const dir = tempDir('timesvc-nts-reload-');
  const a = makeCertificate(dir.path, 'a');
  const b = makeCertificate(dir.path, 'b');
  const live = { cert: join(dir.path, 'live.crt'), key: join(dir.path, 'live.key') };
  copyFileSync(a.cert, live.cert);
  copyFileSync(a.key, live.key);
  const ke = new NtsKeServer({
    port: 0,
    host: '127.0.0.1',
    certPath: live.cert,
    keyPath: live.key,
    cookies: new NtsCookieJar({ now: Date.now }),
    ntpPort: () => 123,
    logger: silentLogger(),
    watchIntervalMs: 100,
  });
  await ke.start();
  try {
    assert.equal(await trusts(ke.port, a.cert), true);
    assert.equal(await trusts(ke.port, b.cert), false);
    copyFileSync(b.key, live.key);
    copyFileSync(b.cert, live.cert);
    await waitFor(async () => (await trusts(ke.port, b.cert)) || undefined, {
      timeoutMs: 10_000,
      intervalMs: 200,
      what: 'the new certificate in use',
    });
    assert.equal(await trusts(ke.port, a.cert), false, 'the old certificate is gone');
    writeFileSync(live.cert, 'not a certificate\n');
    assert.equal(ke.reload('test'), false);
    assert.equal(await trusts(ke.port, b.cert), true, 'still serving with the previous pair');
    assert.ok(ke.certExpiry && ke.certExpiry.getTime() > Date.now());
  } finally {
    await ke.close();
    dir.remove();
  }
});

test('timesvc serve: SIGHUP re-reads the NTS-KE certificate and the process keeps running', async () => {
  const dir = tempDir('timesvc-nts-sighup-');
  const pair = makeCertificate(dir.path);
  const cfg = join(dir.path, 'c.yaml');
  writeNtsConfig(cfg, pair);
  const proc = startTimesvcCli(cfg);
  try {
    const m = await proc.waitForOutput(/"port":(\d+),"msg":"NTS-KE listening"/, 20_000);
    const port = Number(m[1]);
    await proc.waitForOutput(/timesvc started/, 10_000);
    assert.equal(await trusts(port, pair.cert), true);
    proc.child.kill('SIGHUP');
    await proc.waitForOutput(
      /"trigger":"SIGHUP".*NTS-KE certificate loaded|NTS-KE certificate loaded.*"trigger":"SIGHUP"/,
      10_000,
    );
    assert.equal(await trusts(port, pair.cert), true, 'still serving after SIGHUP');
    const exit = await proc.stop('SIGTERM');
    assert.equal(exit.code, 0, proc.output().slice(-2000));
  } finally {
    await proc.stop('SIGKILL');
    dir.remove();
  }
});
