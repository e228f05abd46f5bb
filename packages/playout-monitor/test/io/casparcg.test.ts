import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { after, before, test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { CasparcgSimulator, type CasparLayout } from '@broadcast-ops/simulators/playout';
import { framesToTimecode } from '../../src/domain/timecode.ts';
import { health, healthState, makeConfig, startMonitor, waitDevice, type MonitorRig } from '../helpers.ts';

// The configuration's defaults throughout: staleTimeoutMs 5000, layerQuietMs 1000.
let monitor: MonitorRig;
let url: string;
let oscPort: number;
let stranger: CasparcgSimulator;
/** One simulated server per supported version, each on its own source address. */
const servers: {
  id: number;
  name: string;
  sim?: CasparcgSimulator;
  layout: CasparLayout;
  from: string;
  videoFormat: string;
  configured?: string;
  channel: number;
  layer: number;
}[] = [
  {
    id: 1,
    name: '2.3, 1080p5000',
    layout: '2.3',
    from: '127.0.0.1',
    videoFormat: '1080p5000',
    channel: 1,
    layer: 10,
  },
  {
    id: 2,
    name: '2.0.7, 1080i5000 (configured), channel 2 layer 20',
    layout: '2.0',
    from: '127.0.0.2',
    videoFormat: '1080i5000',
    configured: '1080i5000',
    channel: 2,
    layer: 20,
  },
  {
    id: 3,
    name: '2.1, 1080i5000 (sent by the server)',
    layout: '2.1',
    from: '127.0.0.4',
    videoFormat: '1080i5000',
    channel: 1,
    layer: 10,
  },
  {
    id: 4,
    name: '2.2, 1080i5000 (configured)',
    layout: '2.2',
    from: '127.0.0.5',
    videoFormat: '1080i5000',
    configured: '1080i5000',
    channel: 1,
    layer: 10,
  },
  {
    id: 5,
    name: '2.4, 1080i5000 (sent by the server)',
    layout: '2.4',
    from: '127.0.0.6',
    videoFormat: '1080i5000',
    channel: 1,
    layer: 10,
  },
];

function sim(id: number): CasparcgSimulator {
  const s = servers.find((x) => x.id === id)?.sim;
  assert.ok(s);
  return s;
}

before(async () => {
  const config = makeConfig(
    servers.map((s) => ({
      id: s.id,
      name: s.name,
      type: 'osc_player',
      ip: s.from,
      port: 0,
      channel: s.channel,
      layer: s.layer,
      ...(s.configured !== undefined ? { videoFormat: s.configured } : {}),
    })),
  );
  const started = await startMonitor(config);
  monitor = started.monitor;
  url = started.url;
  oscPort = started.oscPort;
  for (const s of servers) {
    s.sim = new CasparcgSimulator({
      targetHost: '127.0.0.1',
      targetPort: started.oscPort,
      sourceAddress: s.from,
      layout: s.layout,
      videoFormat: s.videoFormat,
      channel: s.channel,
      layer: s.layer,
    });
  }
  stranger = new CasparcgSimulator({
    targetHost: '127.0.0.1',
    targetPort: started.oscPort,
    sourceAddress: '127.0.0.3',
    layout: '2.3',
  });
  await Promise.all([...servers.map((s) => s.sim?.start()), stranger.start()]);
});

after(async () => {
  await Promise.all([...servers.map((s) => s.sim?.close()), stranger?.close()]);
  await monitor?.close();
});

test('connected with an empty layer is stop, not offline', async () => {
  for (const s of servers) await waitDevice(monitor, s.id, (d) => d.connected && d.state === 'stop');
});

for (const { id, name } of servers) {
  test(`play, pause (exact timecode), stop and clear reach the state and /health: ${name}`, async () => {
    const sim = servers.find((x) => x.id === id)?.sim;
    assert.ok(sim);
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
    assert.equal(d.framerate, id === 1 ? 50 : 25);
    // Servers that count fields may pause on the second field of a frame: half a frame further in.
    assert.ok(
      Math.abs((d.positionMs ?? -1) - (frame / sim.fps) * 1000) <= 1000 / sim.tickRate,
      `${d.positionMs} ms at frame ${frame}`,
    );
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

test('silence mid-play: straight from play to offline after the 5 s stale timeout, file and timecode kept', async () => {
  const sim1 = sim(1);
  sim1.play('AMB.mp4', { durationSec: 60 });
  await waitDevice(monitor, 1, (s) => s.state === 'play');
  const seen: string[] = [];
  const off = monitor.store.onChange((c) => {
    if (c.id === 1 && c.fields.includes('state')) seen.push(c.state.state);
  });
  const t0 = Date.now();
  sim1.offline();
  const last = monitor.store.get(1);
  const down = await waitDevice(monitor, 1, (s) => s.state === 'offline', 5000 + 1000 + 3000);
  off();
  const took = Date.now() - t0;
  assert.ok(took >= 5000 - 50, `offline after ${took} ms, before the stale bound`);
  assert.deepEqual(seen, ['offline'], 'no stop on the way');
  assert.equal(down.connected, false);
  assert.equal(down.reason, 'no OSC for 5 s');
  assert.equal(down.filename, 'AMB.mp4', 'the last file name is kept while offline');
  // The timecode is the last one shown while the server was still sending (give or take the frame in flight).
  assert.ok(
    Math.abs(
      Number(down.timecode.slice(6, 8)) * 50 +
        Number(down.timecode.slice(9)) -
        (Number(last?.timecode.slice(6, 8)) * 50 + Number(last?.timecode.slice(9))),
    ) <= 2,
    `${down.timecode} vs ${last?.timecode}`,
  );
  const h = await health(url);
  assert.equal(h.devices.list.find((x) => x.id === 1)?.state, 'offline');
  assert.equal(h.devices.list.find((x) => x.id === 2)?.connected, true, 'the other servers are unaffected');
  assert.equal(h.status, 'healthy');
  sim1.online();
  await waitDevice(monitor, 1, (s) => s.connected && s.state === 'play');
});

test('1080i50 frame numbers stay 0-24 on 2.1, 2.2 (configured), 2.4; every version counts no malformed input', async () => {
  for (const id of [3, 4, 5]) sim(id).play('AMB.mp4', { durationSec: 60 });
  const ff = new Map<number, number>();
  const stop = monitor.store.onChange((c) => {
    if (c.id >= 3 && c.fields.includes('timecode'))
      ff.set(c.id, Math.max(ff.get(c.id) ?? 0, Number(c.state.timecode.slice(9))));
  });
  // The stranger (a server nobody configured) keeps sending and is counted: leave it out.
  const kinds = async (): Promise<Record<string, number>> => {
    const { ['osc-unknown-source']: _, ...rest } = (await health(url)).inputs.malformed;
    return rest;
  };
  const before = await kinds();
  await new Promise((r) => setTimeout(r, 2500));
  stop();
  for (const id of [3, 4, 5]) assert.equal(ff.get(id), 24, `device ${id}: highest frame ${ff.get(id)}`);
  assert.deepEqual(await kinds(), before, 'healthy traffic is not malformed');
});

test('malformed datagrams and strangers are counted, never fatal, and the devices keep updating', async () => {
  const sim20 = sim(2);
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
  const sim22 = sim(1);
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
