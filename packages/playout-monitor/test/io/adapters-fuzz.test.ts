// fast-check against the adapters themselves (sockets, reducers, store), not only the codecs:
// random datagrams, random XML bodies and random HyperDeck lines never crash an adapter, and the monitor
// keeps answering and keeps its other devices.
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { silentLogger, systemClock, createMetricsRegistry } from '@broadcast-ops/core';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { OscInput } from '../../src/io/osc-input.ts';
import { MalformedInputs } from '../../src/malformed.ts';
import { encodeOsc, oscBundle, oscMessage } from '../../src/protocol/osc.ts';
import {
  health,
  makeConfig,
  readFixture,
  readHex,
  startMonitor,
  waitDevice,
  type MonitorRig,
} from '../helpers.ts';

let xmlBody = '';
let httpServer: HttpServer;
let deckServer: NetServer;
let deckSocket: Socket | undefined;
let monitor: MonitorRig;
let url: string;

before(async () => {
  httpServer = createHttpServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/xml' }).end(xmlBody),
  );
  await new Promise<void>((r) => httpServer.listen(0, '127.0.0.1', () => r()));
  deckServer = createNetServer((s) => {
    deckSocket = s;
    s.on('error', () => undefined);
    s.write('500 connection info:\r\nprotocol version: 1.11\r\nmodel: Fuzz Deck\r\n\r\n');
    s.on('data', () => undefined);
  });
  await new Promise<void>((r) => deckServer.listen(0, '127.0.0.1', () => r()));
  const addr = (s: HttpServer | NetServer): number => (s.address() as { port: number }).port;
  const started = await startMonitor(
    makeConfig([
      {
        id: 1,
        name: 'vMix',
        type: 'http_mixer',
        ip: '127.0.0.1',
        port: addr(httpServer),
        pollIntervalMs: 50,
        timeoutMs: 500,
      },
      {
        id: 2,
        name: 'Deck',
        type: 'tcp_recorder',
        ip: '127.0.0.1',
        port: addr(deckServer),
        pollIntervalMs: 0,
        timeoutMs: 30_000,
        reconnectMinMs: 50,
        reconnectMaxMs: 200,
      },
    ]),
  );
  monitor = started.monitor;
  url = started.url;
});

after(async () => {
  await monitor?.close();
  deckSocket?.destroy();
  httpServer?.closeAllConnections();
  await new Promise<void>((r) => httpServer?.close(() => r()));
  await new Promise<void>((r) => deckServer?.close(() => r()));
});

test('OSC adapter: random and mutated datagrams from a known server never throw', async () => {
  const store = new DeviceStore(systemClock, [
    { id: 5, name: 'C', type: 'osc_player', ip: '127.0.0.1', port: 0, framerate: 50 },
  ]);
  const input = new OscInput({
    port: 0,
    bindAddress: '127.0.0.1',
    servers: [makeConfig([{ id: 5, name: 'C', type: 'osc_player', ip: '127.0.0.1' }]).servers[0] as never],
    defaultFramerate: 50,
    store,
    clock: systemClock,
    logger: silentLogger(),
    malformed: new MalformedInputs(silentLogger(), createMetricsRegistry()),
  });
  await input.start();
  try {
    const seeds = ['casparcg-2.3-playing.hex', 'casparcg-2.0.7-play-1.hex'].map(readHex);
    const address = fc.constantFrom(
      '/channel/1/stage/layer/10/foreground/file/time',
      '/channel/1/stage/layer/10/file/path',
      '/channel/1/framerate',
      '/channel/x',
      '/',
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 512 }),
          fc
            .tuple(fc.constantFrom(...seeds), fc.nat(), fc.integer({ min: 0, max: 255 }))
            .map(([s, at, v]) => {
              const b = new Uint8Array(s);
              b[at % b.length] = v;
              return b;
            }),
          fc
            .tuple(
              address,
              fc.array(
                fc.oneof(
                  fc.float().map((value) => ({ type: 'f' as const, value })),
                  fc.string().map((value) => ({ type: 's' as const, value })),
                  fc.constant({ type: 'T' as const }),
                ),
                { maxLength: 3 },
              ),
            )
            .map(([a, args]) => encodeOsc(oscBundle([oscMessage(a, args)]))),
        ),
        (bytes) => {
          input.handleDatagram(bytes, '127.0.0.1');
          const d = store.get(5);
          assert.ok(d && ['play', 'stop', 'offline'].includes(d.state));
          assert.match(d.timecode, /^\d\d:\d\d:\d\d:\d\d$/);
        },
      ),
      { numRuns: 3000 },
    );
  } finally {
    await input.close();
  }
});

test('vMix adapter: random bodies never crash it; a good document afterwards is read', async () => {
  const good = readFixture('vmix', 'vmix-24-playing.xml');
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.string({ maxLength: 200 }),
        fc
          .tuple(fc.nat(), fc.string({ maxLength: 8 }))
          .map(([at, ins]) => good.slice(0, at % good.length) + ins + good.slice(at % good.length)),
      ),
      async (body) => {
        xmlBody = body;
        const polls = monitor.store.get(1)!.updated;
        await new Promise((r) => setTimeout(r, 60));
        assert.ok(monitor.store.get(1)!.updated >= polls);
      },
    ),
    { numRuns: 40 },
  );
  xmlBody = good;
  await waitDevice(
    monitor,
    1,
    (s) => s.connected && s.state === 'play' && s.filename === 'Playlist - Opener_HD.mp4',
  );
});

test('HyperDeck adapter: random lines never crash it; the monitor keeps answering', async () => {
  await waitDevice(monitor, 2, (s) => s.connected);
  const line = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom(
      '508 transport info:',
      '208 transport info:',
      '205 clips info:',
      'status: play',
      'clip id: 3',
      '3: x 00:00:00:00 00:00:01:00',
      '',
      '200 ok',
      '502 slot info:',
    ),
  );
  const batches = fc.sample(fc.array(line, { maxLength: 30 }), { numRuns: 200, seed: 42 });
  for (const batch of batches) deckSocket?.write(batch.join('\r\n') + '\r\n');
  deckSocket?.write('\r\n508 transport info:\r\nstatus: record\r\ndisplay timecode: 00:00:01:00\r\n\r\n');
  await waitDevice(monitor, 2, (s) => s.connected && s.state === 'rec', 5000);
  const h = await health(url);
  assert.equal(h.devices.total, 2);
  assert.ok((h.inputs.malformed['hyperdeck-unknown-line'] ?? 0) > 0);
});
