import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { metricValue } from '@broadcast-ops/core';
import { requireTool, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { refIdToIpv4 } from '../src/protocol/ntp-packet.ts';
import { queryServer } from '../src/io/query.ts';
import { chronyQuery, medianOf, startChronyServer } from './helpers/chrony.ts';
import { startService } from './helpers/service.ts';

/** A free UDP port on loopback for chronyd (it cannot be told to use port 0 and report it). */
async function freeUdpPort(): Promise<number> {
  const { createSocket } = await import('node:dgram');
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise<void>((r) => s.close(r));
  return port;
}

test('chronyd -Q measures timesvc within 1 ms (median of 5 runs), over IPv4 and IPv6', async () => {
  const { service, port } = await startService({ local_stratum: true, stratum: 5 });
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 10_000 });
    const offsets: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await chronyQuery(i % 2 ? '::1' : '127.0.0.1', port, { timeoutS: 10, samples: 1 });
      assert.equal(r.code, 0, r.output);
      assert.ok(r.offsetS !== undefined, r.output);
      offsets.push(r.offsetS);
    }
    const median = medianOf(offsets);
    console.log(`chronyd -Q offsets against timesvc (s): ${offsets.join(' ')}; median ${median}`);
    assert.ok(Math.abs(median) < 0.001, `median offset ${median} s`);
  } finally {
    await service.close();
  }
});

test('a long-running chronyd -x client selects timesvc as its source (chronyc sources shows *)', async () => {
  const chronyd = requireTool('chronyd');
  const chronyc = requireTool('chronyc');
  const dir = tempDir('timesvc-chrony-client-');
  const { service, port } = await startService({ local_stratum: true, stratum: 4 });
  const run = join(dir.path, 'run');
  mkdirSync(run, { mode: 0o700 });
  const conf = join(dir.path, 'client.conf');
  writeFileSync(
    conf,
    [
      `server 127.0.0.1 port ${port} iburst minpoll 0 maxpoll 0`,
      'port 0',
      'cmdport 0',
      `bindcmdaddress ${join(run, 'chronyd.sock')}`,
      `pidfile ${join(dir.path, 'chronyd.pid')}`,
      `driftfile ${join(dir.path, 'chronyd.drift')}`,
      '',
    ].join('\n'),
  );
  const client = startProcess(chronyd, ['-x', '-d', '-u', 'root', '-f', conf]);
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 10_000 });
    const line = await waitFor(
      () => {
        const out = execFileSync(chronyc, ['-h', join(run, 'chronyd.sock'), '-n', '-c', 'sources'], {
          encoding: 'utf8',
        });
        return out.split('\n').find((l) => l.startsWith(`^,*,127.0.0.1,`));
      },
      { timeoutMs: 30_000, intervalMs: 1000, what: 'chronyd selecting 127.0.0.1' },
    );
    const fields = line.split(',');
    assert.equal(fields[3], '4', 'chrony sees our stratum');
    const tracking = execFileSync(chronyc, ['-h', join(run, 'chronyd.sock'), '-n', '-c', 'tracking'], {
      encoding: 'utf8',
    });
    const t = tracking.trim().split(',');
    assert.equal(t[1], '127.0.0.1', `tracking: ${tracking}`);
    assert.equal(t[2], '5', 'chrony serves our stratum + 1');
    // chrony's own estimate of our offset (last offset, seconds).
    console.log(`chronyd -x tracking against timesvc: last offset ${t[6]} s, rms ${t[7]} s`);
    assert.ok(Number.isFinite(Number(t[6])), 'chrony reports an offset for the selected source');
  } finally {
    await client.stop('SIGTERM');
    await service.close();
    dir.remove();
  }
});

test('timesvc with a local chronyd as upstream peer reaches LOCKED and serves stratum+1, refid = chrony', async () => {
  const dir = tempDir('timesvc-chrony-upstream-');
  const chronyPort = await freeUdpPort();
  const chrony = await startChronyServer(dir.path, chronyPort, { stratum: 6 });
  const { service, port } = await startService({
    upstream_peers: [{ address: `127.0.0.1:${chronyPort}`, iburst: true, minpoll: 0, maxpoll: 0 }],
  });
  try {
    const early = await queryServer('127.0.0.1', port);
    assert.equal(early.leap, 3, 'unsynchronised before the first samples');
    assert.equal(early.stratum, 0);
    await waitFor(() => service.manager.state === 'LOCKED', {
      timeoutMs: 40_000,
      intervalMs: 200,
      what: `LOCKED (state ${service.manager.state})`,
    });
    const r = await queryServer('127.0.0.1', port, 2000, { localAddress: '127.0.0.9' });
    assert.equal(r.leap, 0);
    assert.equal(r.stratum, 7, "chrony's stratum 6 + 1");
    assert.equal(refIdToIpv4(r.packet.referenceId), '127.0.0.1', "refid = chrony's IPv4 address");
    const snap = service.manager.snapshot();
    assert.equal(snap.selected, `NTP:127.0.0.1:${chronyPort}`);
    console.log(
      `timesvc locked to chronyd: offset ${(snap.offsetS * 1e6).toFixed(1)} µs, jitter ${(snap.jitterS * 1e6).toFixed(1)} µs, drift ${snap.driftPpb.toFixed(0)} ppb`,
    );
    assert.equal(await metricValue(service.registry, 'timesvc_clock_state', { state: 'locked' }), 1);
    assert.equal(await metricValue(service.registry, 'timesvc_ntp_peer_count', { reachable: 'true' }), 1);
  } finally {
    await service.close();
    await chrony.stop();
    dir.remove();
  }
});

test('an IPv6 upstream (chronyd on [::1]) is used; the refid is the first 4 bytes of MD5(address)', async () => {
  const dir = tempDir('timesvc-chrony-upstream6-');
  const chronyPort = await freeUdpPort();
  const chrony = await startChronyServer(dir.path, chronyPort, { stratum: 5 });
  const { service, port } = await startService({
    upstream_peers: [{ address: `[::1]:${chronyPort}`, minpoll: 0, maxpoll: 0 }],
  });
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 40_000, intervalMs: 200 });
    const r = await queryServer('::1', port);
    assert.equal(r.stratum, 6);
    const md5 = createHash('md5').update(Buffer.from('00000000000000000000000000000001', 'hex')).digest();
    assert.equal(r.packet.referenceId, md5.readUInt32BE(0));
    assert.equal(service.manager.snapshot().selected, `NTP:[::1]:${chronyPort}`);
  } finally {
    await service.close();
    await chrony.stop();
    dir.remove();
  }
});
