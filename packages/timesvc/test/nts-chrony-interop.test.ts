import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { chronyNtsClientConf, makeCertificate, startNtsService } from './helpers/nts.ts';

function chronyc(sock: string, ...args: string[]): string {
  return execFileSync(requireTool('chronyc'), ['-h', sock, '-n', ...args], { encoding: 'utf8' });
}

test('chronyd -x as NTS client: NTS-KE, cookies, authenticated polls with no NAK, timesvc selected', async () => {
  const chronyd = requireTool('chronyd');
  const dir = tempDir('timesvc-nts-chrony-');
  const pair = makeCertificate(dir.path);
  const { service, ntpPort, kePort } = await startNtsService(pair);
  mkdirSync(join(dir.path, 'run'), { mode: 0o700 });
  const conf = join(dir.path, 'client.conf');
  writeFileSync(conf, chronyNtsClientConf(dir.path, kePort, pair.cert).join('\n'));
  const client = startProcess(chronyd, ['-x', '-d', '-u', 'root', '-f', conf]);
  const sock = join(dir.path, 'run', 'chronyd.sock');
  try {
    // Several authenticated polls at 0.25 s (minpoll -2): wait for the source to be selected.
    const line = await waitFor(
      () =>
        chronyc(sock, '-c', 'sources')
          .split('\n')
          .find((l) => l.startsWith('^,*,127.0.0.1,')),
      { timeoutMs: 30_000, intervalMs: 500, what: 'chronyd selecting timesvc over NTS' },
    );
    await new Promise((r) => setTimeout(r, 2000));
    const auth = chronyc(sock, '-c', 'authdata').trim().split(',');
    // Name,Mode,KeyID,Type,KLen,Last,Atmp,NAK,Cook,CLen
    console.log(`chronyc authdata: ${auth.join(',')}`);
    assert.equal(auth[1], 'NTS');
    assert.equal(auth[3], '15', 'AEAD_AES_SIV_CMAC_256');
    assert.equal(auth[4], '256');
    assert.equal(auth[7], '0', 'no NAKs');
    assert.ok(Number(auth[8]) >= 6, `cookies held: ${auth[8]}`);
    assert.equal(auth[9], '100', 'cookie length');
    const ntpdata = chronyc(sock, 'ntpdata');
    assert.match(ntpdata, /Authenticated\s*:\s*Yes/);
    assert.match(ntpdata, new RegExp(`Remote port\\s*:\\s*${ntpPort}`), 'Port record honoured');
    const fields = line.split(',');
    const offsetS = Number(fields[8]);
    console.log(
      `chrony NTS client: sources ${line}; offset ${(Number(fields[7]) * 1e6).toFixed(1)} µs (last sample ${(offsetS * 1e6).toFixed(1)} µs)`,
    );
    const ntsSide = service.nts();
    assert.ok(ntsSide);
    assert.ok(ntsSide.ke.counters.success >= 1);
    assert.ok(ntsSide.responder.counters.authenticated >= 4, 'several authenticated polls');
    assert.equal(ntsSide.responder.counters.naks, 0);
    assert.ok(ntsSide.responder.activeSessions() >= 1);
    assert.ok(Math.abs(offsetS) < 0.005, `offset ${offsetS}`);
  } finally {
    await client.stop('SIGTERM');
    await service.close();
    dir.remove();
  }
});
