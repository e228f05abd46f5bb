import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { repoRoot, waitFor } from '@broadcast-ops/core/testing';
import { configSchema, loadTimesvcConfig } from '../../src/config.ts';
import { queryServer } from '../../src/io/query.ts';
import { createTimesvc } from '../../src/io/service.ts';

test('the demo config (npm start) serves stratum 1 "GPS" from the dummy GPSDO, with satellites', async () => {
  const demo = loadTimesvcConfig(join(repoRoot, 'config/timesvc.demo.yaml'), {});
  const config = configSchema.parse({
    ...demo,
    ntp: { ...demo.ntp, port: 0, interface: '127.0.0.1' },
    web: { ...demo.web, port: 0 },
  });
  const service = await createTimesvc(config, silentLogger());
  try {
    await service.start();
    const port = service.server()?.addresses[0]?.port ?? 0;
    await waitFor(() => service.manager.state === 'LOCKED', {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: 'LOCKED',
    });
    const q = await queryServer('127.0.0.1', port);
    assert.equal(q.stratum, 1);
    assert.equal(q.refId, 'GPS');
    assert.equal(q.leap, 0);
    const sats = service.gpsdo()?.apiSatellites() ?? [];
    assert.equal(sats.length, 9);
    assert.equal(sats.filter((s) => s['used'] === true).length, 7);
    const body = service.gpsdo()?.apiStatus() ?? {};
    assert.equal(body['type'], 'dummy');
    assert.equal(body['locked'], true);
    assert.equal(body['satellites'], 7);
    assert.ok(Number(body['pps_count']) >= 4);
    assert.equal(body['model'], 'dummy GPSDO');
  } finally {
    await service.close();
  }
});

test('dummy lock loss (asked for): HOLDOVER with a growing bound, stratum kept; lock returns to LOCKED', async () => {
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', ref_id: 'GPS' },
    gpsdo: { enabled: true, type: 'dummy', dummy: { lose_lock_after: 7, regain_lock_after: 6 } },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger());
  const states: string[] = [];
  service.manager.on((e) => {
    if (e.type === 'state') states.push(e.to);
  });
  try {
    await service.start();
    const port = service.server()?.addresses[0]?.port ?? 0;
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 30_000, intervalMs: 100 });
    await waitFor(() => service.manager.state === 'HOLDOVER', { timeoutMs: 20_000, intervalMs: 100 });
    const a = await queryServer('127.0.0.1', port);
    await new Promise((r) => setTimeout(r, 2000));
    const b = await queryServer('127.0.0.1', port);
    assert.equal(a.stratum, 1);
    assert.ok(b.rootDispersionS > a.rootDispersionS);
    const st = service.gpsdo()?.gpsdoStatus();
    assert.equal(st?.locked, false);
    assert.ok((st?.counters.events['lock_lost'] ?? 0) >= 1);
    await waitFor(() => service.manager.state === 'LOCKED', {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: 'LOCKED again',
    });
    assert.deepEqual(states.slice(0, 3), ['SYNCING', 'LOCKED', 'HOLDOVER']);
  } finally {
    await service.close();
  }
});
