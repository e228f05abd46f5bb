import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { freePort, requireTool, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../src/config.ts';
import { queryServer } from '../src/io/query.ts';
import { createTimesvc } from '../src/io/service.ts';
import { formatPpsAssert } from '../src/protocol/pps.ts';
import { chronyQuery, startChronyServer } from './helpers/chrony.ts';
import { nmeaSecond, serialPpsConfig } from './helpers/nmea-receiver.ts';

test(
  'serialpps: NMEA on a pty at 1 Hz + a sysfs PPS fixture lock the GPSDO; stratum 1 "GPS" accepted by chronyd -Q; ' +
    'closing the pty gives HOLDOVER with a growing bound, then the NTP peer takes over; re-plugged, the GPSDO is back',
  { timeout: 180_000 },
  async () => {
    const socat = requireTool('socat');
    requireTool('chronyd');
    const dir = tempDir('timesvc-gpsdo-');
    const ttyA = join(dir.path, 'ttyA'); // the receiver's side (the test writes here)
    const ttyB = join(dir.path, 'ttyB'); // timesvc's serial_device
    const assertFile = join(dir.path, 'pps0-assert');
    writeFileSync(assertFile, '0.000000000#0\n');
    const pty = startProcess(socat, [
      '-d',
      '-d',
      `pty,raw,echo=0,link=${ttyA}`,
      `pty,raw,echo=0,link=${ttyB}`,
    ]);
    const chronyPort = await freePort('udp');
    const chrony = await startChronyServer(dir.path, chronyPort, { stratum: 8 });
    let timer: NodeJS.Timeout | undefined;
    let fd: number | undefined;
    const extra: ReturnType<typeof startProcess>[] = [];
    const config = configSchema.parse({
      ntp: {
        port: 0,
        interface: '127.0.0.1',
        ref_id: 'GPS',
        upstream_peers: [{ address: `127.0.0.1:${chronyPort}`, minpoll: 1, maxpoll: 2 }],
      },
      gpsdo: serialPpsConfig(ttyB, assertFile),
      web: { port: 0, bind_address: '127.0.0.1' },
    });
    const service = createTimesvc(config, silentLogger());
    try {
      await waitFor(() => existsSync(ttyA) && existsSync(ttyB), { timeoutMs: 10_000, what: 'socat ptys' });
      fd = openSync(ttyA, 'w');
      let writer = fd;
      let seq = 0;
      // At each second edge (+5 ms): the "kernel" records the assert edge of that second (host clock 500 ns
      // behind the receiver), and 120 ms later the receiver sends the sentences naming that second.
      const schedule = (): void => {
        const wait = 1005 - (Date.now() % 1000);
        timer = setTimeout(() => {
          const sec = Math.floor(Date.now() / 1000);
          seq++;
          writeFileSync(assertFile, formatPpsAssert({ sec, nsec: 500, sequence: seq }));
          timer = setTimeout(() => {
            try {
              writeSync(writer, nmeaSecond(sec));
            } catch {
              /* pty gone */
            }
            schedule();
          }, 120);
        }, wait);
      };
      schedule();
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
      if (timer) clearTimeout(timer);
      await pty.stop();
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
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
      const pty2 = startProcess(socat, [
        '-d',
        '-d',
        `pty,raw,echo=0,link=${ttyA}`,
        `pty,raw,echo=0,link=${ttyB}`,
      ]);
      extra.push(pty2);
      await waitFor(() => existsSync(ttyA), { timeoutMs: 10_000, what: 'socat ptys again' });
      fd = openSync(ttyA, 'w');
      writer = fd;
      schedule();
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
      if (timer) clearTimeout(timer);
      if (fd !== undefined) closeSync(fd);
      await service.close();
      await pty.stop();
      for (const p of extra) await p.stop();
      await chrony.stop();
      dir.remove();
    }
  },
);
