import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { ntsKeyExchange } from '../../src/io/nts-ke-client.ts';
import { createTimesvc } from '../../src/io/service.ts';
import { startChronyServer } from '../helpers/chrony.ts';
import { freePort, makeCertificate } from '../helpers/nts.ts';

test('timesvc NTS client against chronyd as NTS server: NTS-KE, authenticated polls, peer selected', async () => {
  const dir = tempDir('timesvc-nts-upstream-');
  const pair = makeCertificate(dir.path);
  const ntpPort = await freePort('udp');
  const kePort = await freePort('tcp');
  const chrony = await startChronyServer(dir.path, ntpPort, {
    stratum: 6,
    extra: [
      `ntsport ${kePort}`,
      `ntsserverkey ${pair.key}`,
      `ntsservercert ${pair.cert}`,
      `ntsdumpdir ${dir.path}`,
      'ntsprocesses 0',
    ],
  });
  const config = configSchema.parse({
    ntp: {
      port: 0,
      interface: '127.0.0.1',
      upstream_peers: [
        {
          address: '127.0.0.1',
          nts_enabled: true,
          nts_ke_port: kePort,
          minpoll: -2,
          maxpoll: -2,
          iburst: true,
        },
      ],
    },
    nts: { ca_path: pair.cert },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger());
  let selected: string | undefined;
  service.manager.on((e) => {
    if (e.type === 'selected' && e.to !== undefined) selected = e.to;
  });
  try {
    await service.start();
    const peer = service.peers[0];
    assert.ok(peer);
    await waitFor(() => selected === peer.id, {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: 'NTS peer selected',
    });
    const nts = peer.ntsStatus;
    assert.ok(nts);
    console.log(
      `timesvc NTS client vs chronyd: ${JSON.stringify(nts)}; peer ${JSON.stringify(peer.status())}`,
    );
    assert.equal(nts.keExchanges, 1);
    assert.ok(nts.authenticated >= 4, `authenticated replies ${nts.authenticated}`);
    assert.equal(nts.rejected, 0);
    assert.equal(nts.naks, 0);
    assert.deepEqual(
      nts.ntpTarget,
      { host: '127.0.0.1', port: ntpPort },
      'chrony sent its NTP port (Port record)',
    );
    assert.ok(nts.cookies >= 7);
    assert.equal(peer.status().usable, true);
    assert.equal(peer.status().stratum, 6);
    // Selected by the clock manager, not only usable: the selection outcome, the reference the served clock
    // follows, the state and the stratum timesvc advertises (upstream + 1).
    const snap = service.manager.snapshot();
    assert.equal(snap.selected, peer.id);
    assert.equal(snap.lastReference, peer.id);
    assert.ok(snap.state === 'SYNCING' || snap.state === 'LOCKED', `clock state ${snap.state}`);
    assert.equal(snap.stratum, 7);
    const src = snap.sources.find((s) => s.id === peer.id);
    assert.ok(src, 'NTS peer listed in the selection');
    assert.equal(src.selected, true);
    assert.equal(src.verdict, 'selected');
    assert.equal(src.authenticated, true, 'selected on authenticated samples');
    assert.equal(service.manager.serverState.stratum, 7);
    // chrony counts the NTS-KE session and the authenticated packets on its side.
    const stats = execFileSync(
      requireTool('chronyc'),
      ['-h', join(dir.path, 'run', 'chronyd.sock'), '-n', 'serverstats'],
      { encoding: 'utf8' },
    );
    console.log(stats.trim());
    const accepted = /NTS-KE connections accepted\s*:\s*(\d+)/.exec(stats);
    const authed = /Authenticated NTP packets\s*:\s*(\d+)/.exec(stats);
    assert.equal(accepted?.[1], '1');
    assert.ok(Number(authed?.[1]) >= 4);
  } finally {
    await service.close();
    await chrony.stop();
    dir.remove();
  }
});

test('NTS-KE client refuses a server whose certificate is not trusted (no CA file)', async () => {
  const dir = tempDir('timesvc-nts-untrusted-');
  const pair = makeCertificate(dir.path);
  const ntpPort = await freePort('udp');
  const kePort = await freePort('tcp');
  const chrony = await startChronyServer(dir.path, ntpPort, {
    extra: [`ntsport ${kePort}`, `ntsserverkey ${pair.key}`, `ntsservercert ${pair.cert}`, 'ntsprocesses 0'],
  });
  try {
    await assert.rejects(
      ntsKeyExchange({ host: '127.0.0.1', port: kePort, timeoutMs: 5000 }),
      /self.signed|certificate/i,
    );
    const ok = await ntsKeyExchange({ host: '127.0.0.1', port: kePort, caFile: pair.cert, timeoutMs: 5000 });
    assert.equal(ok.aead, 15);
    assert.ok(ok.cookies.length >= 1);
  } finally {
    await chrony.stop();
    dir.remove();
  }
});
