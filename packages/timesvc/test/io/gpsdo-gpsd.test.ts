import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { requireTool, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { queryServer } from '../../src/io/query.ts';
import { createTimesvc } from '../../src/io/service.ts';
import { capture } from '../helpers/gpsd-capture.ts';
import { nmeaSecond } from '../helpers/nmea-receiver.ts';

/**
 * A fake gpsd on 127.0.0.1:0 replaying the recorded gpsd 3.22 session: VERSION on connect; after ?WATCH the
 * DEVICES/WATCH/DEVICE answers, then one TOFF/TPV/SKY group per second, looping, with the recorded times
 * shifted to the present (differences such as TOFF's real − clock kept).
 */
function fakeGpsd(): Promise<{ server: Server; port: number; watches: string[]; kick: () => void }> {
  const lines = capture.lines;
  const header = lines.filter((l) => /"class":"(DEVICES|WATCH|DEVICE)"/.test(l));
  const body = lines.filter((l) => /"class":"(TOFF|TPV|SKY)"/.test(l));
  const firstToff = /"clock_sec":(\d+)/.exec(body.find((l) => l.includes('TOFF')) ?? '')?.[1];
  const t0 = Number(firstToff);
  const watches: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    sock.write(`${lines[0] ?? ''}\n`);
    let timer: NodeJS.Timeout | undefined;
    sock.on('data', (d) => {
      watches.push(d.toString());
      if (timer) return;
      for (const h of header) sock.write(h + '\n');
      let i = 0;
      let group = 0;
      timer = setInterval(() => {
        const shift = Math.floor(Date.now() / 1000) - t0 - group;
        // One second's objects: up to and including the next SKY.
        for (;;) {
          const l = body[i % body.length] ?? '';
          i++;
          const moved = l
            .replace(
              /"(real|clock)_sec":(\d+)/g,
              (_m, k: string, v: string) => `"${k}_sec":${Number(v) + shift}`,
            )
            .replace(
              /"time":"([^"]+)"/,
              (_m, t: string) => `"time":"${new Date(Date.parse(t) + shift * 1000).toISOString()}"`,
            );
          if (!sock.destroyed) sock.write(moved + '\n');
          if (l.includes('"SKY"')) break;
        }
        group++;
        if (i >= body.length) {
          i = 0;
          group = 0;
        }
      }, 1000);
      sock.on('close', () => clearInterval(timer));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        server,
        port: (server.address() as AddressInfo).port,
        watches,
        kick: () => {
          for (const s of sockets) s.destroy();
        },
      });
    });
  });
}

test('network GPSDO: a fake gpsd replaying recorded JSON drives the source to a lock; stratum 1; reconnects', async () => {
  const gpsd = await fakeGpsd();
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', ref_id: 'GPS' },
    gpsdo: { enabled: true, type: 'network', network_address: `127.0.0.1:${gpsd.port}`, nmea_delay: '100ms' },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger());
  try {
    await service.start();
    const port = service.server()?.addresses[0]?.port ?? 0;
    await waitFor(() => service.gpsdo()?.gpsdoStatus().locked, {
      timeoutMs: 15_000,
      intervalMs: 100,
      what: 'gpsd lock',
    });
    assert.match(gpsd.watches[0] ?? '', /^\?WATCH=\{"enable":true,"json":true,"pps":true\}\n$/);
    const st = service.gpsdo()?.gpsdoStatus();
    assert.equal(st?.satellitesUsed, 7);
    assert.equal(st?.satellites.length, 8);
    assert.equal(st?.hdop, 0.92);
    assert.equal(st?.receiver.firmware, 'gpsd 3.22');
    assert.equal(st?.receiver.vendor, 'NMEA0183');
    assert.ok(st?.altitudeM !== undefined && Math.abs(st.altitudeM - 45.3) < 1e-9);
    // TOFF real − clock ≈ −0.10…−0.115 s, with nmea_delay 100 ms removed: within 20 ms.
    assert.ok(st?.offsetNs !== undefined && Math.abs(st.offsetNs) < 20e6, String(st?.offsetNs));
    await waitFor(() => service.manager.state === 'LOCKED', {
      timeoutMs: 40_000,
      intervalMs: 200,
      what: 'LOCKED',
    });
    const q = await queryServer('127.0.0.1', port);
    assert.equal(q.stratum, 1);
    assert.equal(q.refId, 'GPS');
    // gpsd goes away: reported, then the client reconnects and WATCHes again.
    gpsd.kick();
    await waitFor(() => service.gpsdo()?.gpsdoStatus().connected === false, {
      timeoutMs: 5000,
      what: 'disconnected',
    });
    assert.match(service.gpsdo()?.gpsdoStatus().error ?? '', /gpsd/);
    await waitFor(() => gpsd.watches.length >= 2 && service.gpsdo()?.gpsdoStatus().connected, {
      timeoutMs: 10_000,
      what: 'reconnected',
    });
  } finally {
    await service.close();
    gpsd.kick();
    await new Promise((r) => gpsd.server.close(r));
  }
});

test('network GPSDO against the real gpsd (Debian gpsd, device = a socat pty fed NMEA at 1 Hz): lock, satellites', async () => {
  const gpsdBin = requireTool('gpsd');
  const socat = requireTool('socat');
  const dir = tempDir('timesvc-gpsd-');
  const ttyA = join(dir.path, 'ttyA');
  const ttyB = join(dir.path, 'ttyB');
  const pty = startProcess(socat, ['-d', '-d', `pty,raw,echo=0,link=${ttyA}`, `pty,raw,echo=0,link=${ttyB}`]);
  const tcpPort = await new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  let timer: NodeJS.Timeout | undefined;
  let fd: number | undefined;
  let gpsd: ReturnType<typeof startProcess> | undefined;
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', ref_id: 'GPS' },
    gpsdo: { enabled: true, type: 'network', network_address: `127.0.0.1:${tcpPort}`, nmea_delay: '100ms' },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger());
  try {
    await waitFor(() => existsSync(ttyA) && existsSync(ttyB), { timeoutMs: 10_000, what: 'socat ptys' });
    // -N foreground, -n poll without clients, -b read-only (never writes to the "receiver"), -S port.
    gpsd = startProcess(gpsdBin, [
      '-N',
      '-n',
      '-b',
      '-S',
      String(tcpPort),
      '-F',
      join(dir.path, 'gpsd.sock'),
      ttyB,
    ]);
    fd = openSync(ttyA, 'w');
    const writer = fd;
    const tick = (): void => {
      timer = setTimeout(
        () => {
          const out = nmeaSecond(Math.floor(Date.now() / 1000));
          try {
            writeSync(writer, out);
          } catch {
            /* pty gone */
          }
          tick();
        },
        1100 - (Date.now() % 1000),
      );
    };
    tick();
    await service.start();
    await waitFor(() => service.gpsdo()?.gpsdoStatus().locked, {
      timeoutMs: 40_000,
      intervalMs: 200,
      what: 'lock',
    });
    const st = service.gpsdo()?.gpsdoStatus();
    assert.equal(st?.satellitesUsed, 7);
    assert.equal(st?.satellites.length, 8);
    assert.match(st?.receiver.firmware ?? '', /^gpsd 3\./);
    assert.ok(st?.offsetNs !== undefined && Math.abs(st.offsetNs) < 50e6, String(st?.offsetNs));
  } finally {
    if (timer) clearTimeout(timer);
    if (fd !== undefined) closeSync(fd);
    await service.close();
    await gpsd?.stop();
    await pty.stop();
    dir.remove();
  }
});
