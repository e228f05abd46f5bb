import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { freePort, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { queryServer } from '../../src/io/query.ts';
import { createTimesvc } from '../../src/io/service.ts';
import { chronyQuery, startChronyServer } from '../helpers/chrony.ts';
import { serialPpsConfig, startSerialReceiver } from '../helpers/nmea-receiver.ts';

test(
  'serialpps: NMEA on a pty at 1 Hz + a sysfs PPS fixture lock the GPSDO; stratum 1 "GPS" accepted by chronyd -Q; ' +
    'closing the pty gives HOLDOVER with a growing bound, then the NTP peer takes over; re-plugged, the GPSDO is back',
  { timeout: 180_000 },
  async () => {
    requireTool('chronyd');
    const dir = tempDir('timesvc-gpsdo-');
    const receiver = await startSerialReceiver(dir.path);
    const chronyPort = await freePort('udp');
    const chrony = await startChronyServer(dir.path, chronyPort, { stratum: 8 });
    const config = configSchema.parse({
      ntp: {
        port: 0,
        interface: '127.0.0.1',
        ref_id: 'GPS',
        upstream_peers: [{ address: `127.0.0.1:${chronyPort}`, minpoll: 1, maxpoll: 2 }],
      },
      gpsdo: serialPpsConfig(receiver.device, receiver.ppsFile),
      web: { port: 0, bind_address: '127.0.0.1' },
    });
    const service = await createTimesvc(config, silentLogger());
    try {
      await service.start();
      const port = service.server()?.addresses[0]?.port ?? 0;
      await waitFor(
        () => service.manager.state === 'LOCKED' && service.manager.snapshot().selected === 'GPSDO:SerialPPS',
        {
          timeoutMs: 60_000,
          intervalMs: 200,
          what: 'LOCKED on the GPSDO',
        },
      );
      const st = service.gpsdo()?.gpsdoStatus();
      assert.ok(st?.locked);
      assert.equal(st.satellitesUsed, 7);
      assert.equal(st.satellites.length, 8);
      assert.ok(st.ppsCount >= 4);
      assert.ok(st.offsetNs !== undefined && Math.abs(st.offsetNs - -500) < 1000, String(st.offsetNs));
      const api = service.gpsdo()?.apiStatus();
      assert.equal(api?.['locked'], true);
      assert.equal(service.gpsdo()?.apiSatellites().length, 8);
      const q = await queryServer('127.0.0.1', port);
      assert.equal(q.stratum, 1);
      assert.equal(q.refId, 'GPS');
      assert.equal(q.leap, 0);
      const chronyRes = await chronyQuery('127.0.0.1', port, { timeoutS: 15 });
      assert.equal(chronyRes.code, 0, chronyRes.output);
      assert.ok(chronyRes.offsetS !== undefined && Math.abs(chronyRes.offsetS) < 0.01, chronyRes.output);
      const metrics = await service.registry.metrics();
      assert.match(metrics, /timesvc_gpsdo_locked 1/);
      assert.match(metrics, /timesvc_gpsdo_satellites 7/);

      // The receiver is unplugged: the pty pair goes away and the PPS stops.
      await receiver.unplug();
      await waitFor(() => service.manager.state === 'HOLDOVER', {
        timeoutMs: 15_000,
        intervalMs: 100,
        what: 'HOLDOVER',
      });
      const status = service.gpsdo()?.gpsdoStatus();
      assert.equal(status?.connected, false);
      assert.match(status?.error ?? '', /serial/);
      const h1 = await queryServer('127.0.0.1', port);
      assert.equal(h1.stratum, 1);
      await new Promise((r) => setTimeout(r, 3000));
      const h2 = await queryServer('127.0.0.1', port);
      assert.ok(h2.rootDispersionS > h1.rootDispersionS, `${h2.rootDispersionS} > ${h1.rootDispersionS}`);
      assert.equal(service.manager.state, 'HOLDOVER');
      // After gpsdo.fallback_after (10 s) the NTP peer takes over.
      await waitFor(() => service.manager.snapshot().selected === `NTP:127.0.0.1:${chronyPort}`, {
        timeoutMs: 30_000,
        intervalMs: 200,
        what: 'the peer selected',
      });
      const p = await queryServer('127.0.0.1', port);
      assert.equal(p.stratum, 9);
      const events = service.gpsdo()?.gpsdoStatus().counters.events ?? {};
      assert.ok((events['holdover'] ?? 0) >= 1 && (events['disconnected'] ?? 0) >= 1, JSON.stringify(events));
      assert.match(await service.registry.metrics(), /timesvc_gpsdo_events_total\{event="holdover"\} 1/);

      // The receiver is plugged in again: the device is reopened, the GPSDO locks and is selected again.
      await receiver.plug();
      await waitFor(() => service.manager.snapshot().selected === 'GPSDO:SerialPPS', {
        timeoutMs: 40_000,
        intervalMs: 200,
        what: 'the GPSDO selected again',
      });
      assert.equal(service.gpsdo()?.gpsdoStatus().connected, true);
      assert.equal(service.gpsdo()?.gpsdoStatus().error, undefined);
      await waitFor(async () => (await queryServer('127.0.0.1', port)).stratum === 1, {
        timeoutMs: 20_000,
        intervalMs: 500,
      });
    } finally {
      await service.close();
      await receiver.stop();
      await chrony.stop();
      dir.remove();
    }
  },
);
