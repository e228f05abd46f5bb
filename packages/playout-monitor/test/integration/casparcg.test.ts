import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { after, before, test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { CasparcgSimulator } from '../../src/simulators/casparcg-sim.ts';
import { framesToTimecode } from '../../src/protocol/timecode.ts';
import type { Monitor } from '../../src/monitor.ts';
import { health, healthState, makeConfig, startMonitor, waitDevice } from '../helpers.ts';

const STALE_MS = 1000;
let monitor: Monitor;
let url: string;
let sim22: CasparcgSimulator;
let sim20: CasparcgSimulator;
let stranger: CasparcgSimulator;
let oscPort: number;

before(async () => {
  const config = makeConfig([
    { id: 1, name: 'CCG 2.3', type: 'osc_player', ip: '127.0.0.1', port: 0, staleTimeoutMs: STALE_MS },
    {
      id: 2,
      name: 'CCG 2.0.7',
      type: 'osc_player',
      ip: '127.0.0.2',
      port: 0,
      framerate: 25,
      channel: 2,
      layer: 20,
      staleTimeoutMs: STALE_MS,
    },
  ]);
  const started = await startMonitor(config);
  monitor = started.monitor;
  url = started.url;
  oscPort = started.oscPort;
  sim22 = new CasparcgSimulator({
    targetHost: '127.0.0.1',
    targetPort: started.oscPort,
    sourceAddress: '127.0.0.1',
    layout: '2.2',
    fps: 50,
  });
  sim20 = new CasparcgSimulator({
    targetHost: '127.0.0.1',
    targetPort: started.oscPort,
    sourceAddress: '127.0.0.2',
    layout: '2.0',
    fps: 25,
    channel: 2,
    layer: 20,
  });
  stranger = new CasparcgSimulator({
    targetHost: '127.0.0.1',
    targetPort: started.oscPort,
    sourceAddress: '127.0.0.3',
    layout: '2.2',
  });
  await Promise.all([sim22.start(), sim20.start(), stranger.start()]);
});

after(async () => {
  await Promise.all([sim22?.close(), sim20?.close(), stranger?.close()]);
  await monitor?.close();
});

test('connected with an empty layer is stop, not offline (P13)', async () => {
  await waitDevice(monitor, 1, (d) => d.connected && d.state === 'stop');
  await waitDevice(monitor, 2, (d) => d.connected && d.state === 'stop');
});

for (const [id, name] of [
  [1, '2.2+ layout, 50 fps'],
  [2, '2.0.7 layout, 25 fps, channel 2 layer 20'],
] as const) {
  test(`play, pause (exact timecode), stop and clear reach the state and /health: ${name}`, async () => {
    const sim = id === 1 ? sim22 : sim20;
    sim.play('AMB.mp4', { durationSec: 60, startFrame: 600 });
    let d = await waitDevice(monitor, id, (s) => s.state === 'play' && s.filename === 'AMB.mp4');
    assert.equal(d.connected, true);
    assert.equal(d.durationMs, 60_000);
    assert.match(d.timecode, /^00:00:(1[2-9]|[2-5]\d):\d\d$/);
    assert.equal((await healthState(url, id))?.state, 'play');
    sim.pause();
    const frame = sim.frame;
    d = await waitDevice(
      monitor,
      id,
      (s) => s.state === 'stop' && s.timecode === framesToTimecode(frame, sim.fps),
    );
    assert.equal(d.filename, 'AMB.mp4');
    assert.equal(d.framerate, sim.fps);
    assert.equal(d.positionMs, Math.round((frame / sim.fps) * 1000));
    assert.equal((await healthState(url, id))?.state, 'stop');
    sim.resume();
    await waitDevice(monitor, id, (s) => s.state === 'play');
    sim.stop();
    d = await waitDevice(monitor, id, (s) => s.state === 'stop' && s.filename === '');
    assert.equal(d.timecode, '00:00:00:00');
    sim.play('GO1080P25.mp4', { durationSec: 10, loop: true });
    await waitDevice(
      monitor,
      id,
      (s) => s.state === 'play' && s.filename === 'GO1080P25.mp4' && s.loop === true,
    );
    sim.clear();
    await waitDevice(monitor, id, (s) => s.state === 'stop' && s.filename === '', 3000);
  });
}

test('a server that goes silent is offline within its bound, and comes back by itself', async () => {
  sim22.play('AMB.mp4', { durationSec: 60 });
  await waitDevice(monitor, 1, (s) => s.state === 'play');
  const t0 = Date.now();
  sim22.offline();
  const off = await waitDevice(monitor, 1, (s) => s.state === 'offline', STALE_MS + 1000 + 3000);
  const took = Date.now() - t0;
  assert.ok(took >= STALE_MS - 50, `offline after ${took} ms, before the stale bound`);
  assert.equal(off.connected, false);
  assert.equal(off.reason, 'no OSC for 1 s');
  assert.equal(off.filename, 'AMB.mp4', 'the last file name is kept while offline');
  const h = await health(url);
  assert.equal(h.devices.list.find((x) => x.id === 1)?.state, 'offline');
  assert.equal(
    h.devices.list.find((x) => x.id === 2)?.connected,
    true,
    `the other server is unaffected: ${JSON.stringify(monitor.store.get(2))} sent ${sim20.datagramsSent}`,
  );
  assert.equal(h.status, 'healthy');
  sim22.online();
  await waitDevice(monitor, 1, (s) => s.connected && s.state === 'play');
});

test('malformed datagrams and strangers are counted, never fatal, and the devices keep updating', async () => {
  sim20.play('AMB.mp4', { durationSec: 60 });
  for (const kind of ['garbage', 'truncated', 'unknown-tag', 'bad-arguments', 'oversized-element'] as const) {
    for (let i = 0; i < 50; i++) sim20.sendMalformed(kind);
  }
  stranger.play('X.mp4');
  const h = await waitFor(
    async () => {
      const r = await health(url);
      const m = r.inputs.malformed;
      return (m['osc-unknown-source'] ?? 0) > 0 && (m['osc-arguments'] ?? 0) > 0 ? r : undefined;
    },
    { what: 'the stranger and the bad arguments to be counted' },
  );
  // UDP on loopback may drop a few of a burst; every kind must have been seen and counted.
  assert.ok((h.inputs.malformed['osc-datagram'] ?? 0) > 0, JSON.stringify(h.inputs.malformed));
  assert.ok((h.inputs.malformed['osc-element'] ?? 0) > 0, JSON.stringify(h.inputs.malformed));
  const before = monitor.store.get(2)!.timecode;
  await waitDevice(monitor, 2, (s) => s.state === 'play' && s.timecode !== before);
  await waitDevice(monitor, 1, (s) => s.connected);
});

test('a flood of datagrams (garbage from a known server, valid OSC from a stranger) does not stall the others', async () => {
  sim22.play('AMB.mp4', { durationSec: 600 });
  await waitDevice(monitor, 1, (s) => s.state === 'play');
  const sockets = await Promise.all(
    ['127.0.0.2', '127.0.0.9'].map(async (address) => {
      const sock = createSocket('udp4');
      await new Promise<void>((r) => sock.bind(0, address, () => r()));
      return sock;
    }),
  );
  const garbage = Buffer.from('flood flood flood flood!');
  const valid = Buffer.from(sim22.datagramsForFrame()[0]!);
  const before = (await health(url)).inputs.malformed;
  try {
    for (let batch = 0; batch < 40; batch++) {
      for (let i = 0; i < 250; i++) {
        sockets[0]!.send(garbage, oscPort, '127.0.0.1');
        sockets[1]!.send(valid, oscPort, '127.0.0.1');
      }
      await new Promise((r) => setImmediate(r));
    }
    // Device 1 keeps moving during and after the flood; /health keeps answering.
    const tc = monitor.store.get(1)!.timecode;
    await waitDevice(monitor, 1, (s) => s.state === 'play' && s.timecode !== tc);
    const after = (await health(url)).inputs.malformed;
    assert.ok((after['osc-datagram'] ?? 0) > (before['osc-datagram'] ?? 0));
    assert.ok((after['osc-unknown-source'] ?? 0) > (before['osc-unknown-source'] ?? 0));
  } finally {
    for (const s of sockets) s.close();
  }
});
