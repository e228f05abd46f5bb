import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { metricValue } from '@broadcast-ops/core';
import { freePort, requireTool, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { refIdToIpv4 } from '../../src/protocol/ntp-packet.ts';
import { queryServer } from '../../src/io/query.ts';
import { chronyQuery, medianOf, startChronyServer } from '../helpers/chrony.ts';
import { startService } from '../helpers/service.ts';
import { OffsetUpstream, Probe, checkProbe } from '../helpers/offset-upstream.ts';

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
  const chronyPort = await freePort('udp');
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
  const chronyPort = await freePort('udp');
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

test('chronyd -Q measures the +20 ms that timesvc serves while following an offset upstream', async () => {
  const up = await OffsetUpstream.start(0.02);
  const { service, port } = await startService({
    upstream_peers: [{ address: up.address, iburst: true, minpoll: 0, maxpoll: 0 }],
  });
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 20_000, intervalMs: 100 });
    const offsets: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await chronyQuery('127.0.0.1', port, { timeoutS: 10, samples: 1 });
      assert.equal(r.code, 0, r.output);
      assert.ok(r.offsetS !== undefined, r.output);
      offsets.push(r.offsetS);
    }
    const median = medianOf(offsets);
    console.log(`chronyd -Q against timesvc following +20 ms: ${offsets.join(' ')} s`);
    // "System clock wrong by +x": the host clock is x behind the server, i.e. timesvc serves host + 20 ms.
    assert.ok(Math.abs(median - 0.02) < 0.001, `median ${median} s, expected 0.020`);
  } finally {
    await service.close();
    await up.close();
  }
});

test('timesvc behind a chronyd -x that follows an offset upstream: serves the upstream time (+20 ms) within its bound', async () => {
  const dir = tempDir('timesvc-chrony-offset-');
  const up = await OffsetUpstream.start(0.02);
  const chronyPort = await freePort('udp');
  // chronyd -x serves its corrected time (the offset it measured), not the host clock: the bench checks this too.
  const chrony = await startChronyServer(dir.path, chronyPort, {
    stratum: null,
    extra: [`server 127.0.0.1 port ${up.port} iburst minpoll 0 maxpoll 0`],
  });
  const { service, port } = await startService({
    rate_limit: { enabled: false },
    upstream_peers: [{ address: `127.0.0.1:${chronyPort}`, iburst: true, minpoll: 0, maxpoll: 0 }],
  });
  const probe = new Probe(port, up);
  await probe.start();
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 30_000, intervalMs: 100 });
    await new Promise((r) => setTimeout(r, 5000));
    const last = probe.last!;
    assert.equal(last.leap, 0);
    assert.equal(last.stratum, 3, 'offset upstream 1, chronyd 2, timesvc 3');
    assert.ok(Math.abs(last.errorS) < 0.001, `timesvc vs the offset upstream: ${last.errorS} s`);
    const c = checkProbe(probe.records);
    console.log(
      `timesvc behind chronyd -x behind +20 ms: error ${(last.errorS * 1e6).toFixed(0)} µs, worst beyond bound ${(c.worstBeyondBoundS * 1e6).toFixed(0)} µs`,
    );
    assert.equal(c.worstBackwardS, 0);
    assert.ok(
      c.worstBeyondBoundS <= 0,
      JSON.stringify(c.worst, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
    );
  } finally {
    await probe.stop();
    await service.close();
    await chrony.stop();
    await up.close();
    dir.remove();
  }
});
