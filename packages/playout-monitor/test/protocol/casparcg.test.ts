// CasparCG addresses and reducer, on fixtures written from the server's source at each tag
// (fixtures/osc/make-fixtures.py) and on the simulator's ticks, with the default timeouts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import { ManualClock, expectDecoded } from '@broadcast-ops/core/testing';
import { CasparcgReducer, type CasparReducerOptions } from '../../src/domain/casparcg-reducer.ts';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { OscInput } from '../../src/io/osc-input.ts';
import { MalformedInputs } from '../../src/malformed.ts';
import { parseCasparMessage } from '../../src/protocol/casparcg.ts';
import { decodeOsc, oscMessages } from '../../src/protocol/osc.ts';
import { CasparcgSimulator, type CasparLayout } from '@broadcast-ops/simulators/playout';
import { makeConfig, readHex } from '../pure-helpers.ts';

/** The defaults of the configuration (staleTimeoutMs 5000, layerQuietMs 1000). */
function reducer(o: Partial<CasparReducerOptions> = {}): CasparcgReducer {
  return new CasparcgReducer({
    channel: 1,
    layer: 10,
    framerate: undefined,
    videoFormat: undefined,
    defaultFramerate: 50,
    staleTimeoutMs: 5000,
    layerQuietMs: 1000,
    advanceWindowMs: 500,
    ...o,
  });
}

function feed(r: CasparcgReducer, datagram: Uint8Array, now: number): void {
  const { packet, skipped } = expectDecoded(decodeOsc(datagram));
  assert.deepEqual(skipped, []);
  for (const m of oscMessages(packet)) {
    const p = parseCasparMessage(m);
    assert.ok(p.ok, m.address);
    r.onEvent(p.value, now);
  }
}

test('address families: 2.0 and 2.2+ paths map to the same fields; audio streams report 0 0', () => {
  const parse = (address: string, args: Parameters<typeof parseCasparMessage>[0]['args']) =>
    parseCasparMessage({ kind: 'message', address, args });
  const a = parse('/channel/2/stage/layer/20/file/time', [
    { type: 'f', value: 1.5 },
    { type: 'f', value: 10 },
  ]);
  const b = parse('/channel/2/stage/layer/20/foreground/file/time', [
    { type: 'f', value: 1.5 },
    { type: 'f', value: 10 },
  ]);
  assert.ok(a.ok && b.ok);
  assert.deepEqual({ ...a.value, layout: undefined }, { ...b.value, layout: undefined });
  assert.equal(a.value.layout, '2.0');
  assert.equal(b.value.layout, '2.2');
  const video = parse('/channel/1/stage/layer/10/foreground/file/streams/0/fps', [
    { type: 'i', value: 30000 },
    { type: 'i', value: 1001 },
  ]);
  assert.ok(video.ok && video.value.field === 'streamFps');
  assert.ok(Math.abs((video.value.fps ?? 0) - 29.97) < 0.001);
  for (const den of [0, 1]) {
    const audio = parse('/channel/1/stage/layer/10/foreground/file/streams/1/fps', [
      { type: 'i', value: 0 },
      { type: 'i', value: den },
    ]);
    assert.ok(audio.ok && audio.value.field === 'streamFps' && audio.value.fps === undefined, `0 ${den}`);
  }
  assert.equal(
    parse('/channel/1/stage/layer/10/foreground/file/streams/1/fps', [{ type: 's', value: 'x' }]).ok,
    false,
  );
  const single = parse('/channel/1/framerate', [{ type: 'i', value: 25 }]);
  assert.ok(single.ok && single.value.field === 'channelFramerate' && single.value.fps === 25);
  const bad = parse('/channel/1/stage/layer/10/foreground/file/time', [{ type: 's', value: 'x' }]);
  assert.ok(!bad.ok && bad.error.code === 'bad-arguments');
  assert.equal(bad.error.address, '/channel/1/stage/layer/10/foreground/file/time');
  assert.equal(parse('/other/thing', []).ok, false);
});

test('2.0.7 (tag 2.0.7): playing at file frame 125 of a 25 fps clip on a 1080i5000 channel', () => {
  const r = reducer({ videoFormat: '1080i5000' });
  feed(r, readHex('casparcg-2.0.7-play-1.hex'), 1000);
  feed(r, readHex('casparcg-2.0.7-play-2.hex'), 1000);
  const s = r.derive(1000);
  assert.equal(s.state, 'play');
  assert.equal(s.timecode, '00:00:05:00');
  assert.equal(s.filename, 'AMB.mp4');
  assert.equal(s.framerate, 25);
  assert.equal(s.framerateSource, 'config-format');
  assert.equal(s.durationMs, 60_000);
  assert.equal(s.remainingMs, 55_000);
  assert.equal(s.loop, false);
});

test('2.0.7: PAUSE keeps the clip (stop, same timecode); STOP (`/paused F` only) clears it after the quiet bound', () => {
  const r = reducer({ framerate: 25 });
  feed(r, readHex('casparcg-2.0.7-play-1.hex'), 0);
  feed(r, readHex('casparcg-2.0.7-play-2.hex'), 0);
  for (let t = 40; t <= 3000; t += 40) feed(r, readHex('casparcg-2.0.7-paused.hex'), t);
  const paused = r.derive(3000);
  assert.equal(paused.state, 'stop');
  assert.equal(paused.filename, 'AMB.mp4');
  assert.equal(paused.timecode, '00:00:05:00');
  const s = reducer({ framerate: 25 });
  feed(s, readHex('casparcg-2.0.7-play-1.hex'), 0);
  feed(s, readHex('casparcg-2.0.7-play-2.hex'), 0);
  for (let t = 40; t <= 900; t += 40) feed(s, readHex('casparcg-2.0.7-stopped.hex'), t);
  // Within layerQuietMs of the last file message nothing is judged yet beyond "time not advancing".
  assert.equal(s.derive(900).filename, 'AMB.mp4');
  for (let t = 940; t <= 1200; t += 40) feed(s, readHex('casparcg-2.0.7-stopped.hex'), t);
  const stopped = s.derive(1200);
  assert.equal(stopped.state, 'stop');
  assert.equal(stopped.filename, '');
  assert.equal(stopped.timecode, '00:00:00:00');
  assert.equal(stopped.connected, true);
});

test('2.1 (tag 2.1.0_Beta2): /channel/1/format 1080i5000 is the frame rate (25), whatever is configured', () => {
  const r = reducer({ framerate: 50 });
  feed(r, readHex('casparcg-2.1-play-1.hex'), 0);
  feed(r, readHex('casparcg-2.1-play-2.hex'), 0);
  const s = r.derive(0);
  assert.equal(s.framerate, 25);
  assert.equal(s.framerateSource, 'device-format');
  assert.equal(s.timecode, '00:00:06:06');
});

test('2.3 (tag v2.3.0-lts-stable): paused frame 624 is stop at 00:00:12:24; playing is play; STOP clears', () => {
  const r = reducer();
  feed(r, readHex('casparcg-2.3-paused.hex'), 1000);
  const paused = r.derive(1000);
  assert.equal(paused.state, 'stop');
  // 12.48 s is below 12.48 in float32: the quarter-frame bias recovers frame 624.
  assert.equal(paused.timecode, '00:00:12:24');
  assert.equal(paused.filename, 'AMB');
  assert.equal(paused.framerate, 50);
  assert.equal(paused.framerateSource, 'device-rate');
  assert.equal(paused.positionMs, 12_480);
  assert.equal(paused.remainingMs, 47_520);
  const p = reducer();
  feed(p, readHex('casparcg-2.3-playing.hex'), 0);
  feed(p, readHex('casparcg-2.3-playing-next.hex'), 20);
  assert.equal(p.derive(20).state, 'play');
  assert.equal(p.derive(20).timecode, '00:00:12:25');
  feed(p, readHex('casparcg-2.3-stopped.hex'), 40);
  const stopped = p.derive(40);
  assert.equal(stopped.state, 'stop');
  assert.equal(stopped.filename, '');
  assert.equal(stopped.timecode, '00:00:00:00');
});

test('1080i50: 2.4 (/format) and 2.2 with videoFormat give 00:00:06:06 at field 313; 2.2 without it counts fields', () => {
  const v24 = reducer();
  feed(v24, readHex('casparcg-2.4-1080i50.hex'), 0);
  assert.equal(v24.derive(0).framerate, 25);
  assert.equal(v24.derive(0).timecode, '00:00:06:06');
  const v22 = reducer({ videoFormat: '1080i5000' });
  feed(v22, readHex('casparcg-2.2-1080i50.hex'), 0);
  assert.equal(v22.derive(0).framerate, 25);
  assert.equal(v22.derive(0).timecode, '00:00:06:06');
  // Without the setting, 2.2's `framerate 50 1` is all there is: 1080i50 and 1080p50 look the same.
  const bare = reducer();
  feed(bare, readHex('casparcg-2.2-1080i50.hex'), 0);
  assert.equal(bare.derive(0).framerate, 50);
  assert.equal(bare.derive(0).framerateSource, 'device-rate');
  assert.equal(bare.derive(0).timecode, '00:00:06:13');
});

/** Feed `seconds` of simulator ticks and collect every FF the reducer shows. */
function framesSeen(
  layout: CasparLayout,
  options: Partial<CasparReducerOptions>,
  seconds: number,
): Set<number> {
  const sim = new CasparcgSimulator({
    targetHost: '127.0.0.1',
    targetPort: 9,
    layout,
    videoFormat: '1080i5000',
  });
  sim.play('AMB.mp4', { durationSec: 60 });
  const r = reducer(options);
  const ff = new Set<number>();
  const period = 1000 / sim.tickRate;
  for (let n = 1; n <= seconds * sim.tickRate; n++) {
    const now = n * period;
    for (const d of sim.nextTick()) feed(r, d, now);
    const s = r.derive(now);
    assert.equal(s.state, 'play');
    ff.add(Number(s.timecode?.slice(9)));
  }
  return ff;
}

test('1080i50 over 2 s of ticks: 2.4 gives frames 0-24; 2.2 and 2.3 with videoFormat too', () => {
  for (const [layout, options] of [
    ['2.4', {}],
    ['2.2', { videoFormat: '1080i5000' }],
    ['2.3', { videoFormat: '1080i5000' }],
  ] as const) {
    const ff = framesSeen(layout, options, 2);
    assert.equal(Math.max(...ff), 24, layout);
    assert.equal(ff.size, 25, layout);
  }
});

test('silence mid-play goes straight from play to offline after 5 s, keeping file and timecode', () => {
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 1, name: 'CCG', type: 'osc_player', ip: '127.0.0.2', port: 6250, framerate: 50 },
  ]);
  const states: string[] = [];
  store.onChange((c) => {
    if (c.fields.includes('state')) states.push(c.state.state);
  });
  const sim = new CasparcgSimulator({ targetHost: '127.0.0.1', targetPort: 9, layout: '2.3', fps: 50 });
  sim.play('AMB.mp4', { durationSec: 60 });
  const r = reducer();
  let last = 0;
  for (let n = 1; n <= 150; n++) {
    last = n * 20;
    for (const d of sim.nextTick()) feed(r, d, last);
    store.apply(1, r.derive(last), true);
  }
  const playing = store.get(1);
  assert.equal(playing?.state, 'play');
  // The server stops sending; the monitor ticks every 250 ms.
  for (let t = last + 250; t <= last + 7000; t += 250) store.apply(1, r.derive(t), false);
  assert.deepEqual(states, ['play', 'offline'], 'no stop on the way to offline');
  const off = store.get(1);
  assert.equal(off?.reason, 'no OSC for 5 s');
  assert.equal(off?.timecode, playing.timecode);
  assert.equal(off?.filename, 'AMB.mp4');
  assert.equal(r.derive(last + 5000).state, 'play', 'still play at exactly the stale bound');
});

test('derive() is pure: asking about the far future changes nothing about the present', () => {
  const r = reducer();
  feed(r, readHex('casparcg-2.3-playing.hex'), 0);
  feed(r, readHex('casparcg-2.3-playing-next.hex'), 20);
  const before = r.derive(20);
  assert.equal(r.derive(60_000).state, 'offline');
  assert.equal(r.derive(1500).state, 'play', 'a quiet wall clock alone is not a quiet layer');
  assert.deepEqual(r.derive(20), before);
});

test('awaitsSilence: only while the server was heard within staleTimeoutMs (the one rule that reads the time)', () => {
  const r = reducer();
  assert.equal(r.awaitsSilence(0), false, 'never heard: derive() cannot change with time');
  feed(r, readHex('casparcg-2.3-playing.hex'), 1000);
  assert.equal(r.awaitsSilence(1000), true);
  assert.equal(r.awaitsSilence(6000), true, 'at exactly the stale bound it is still play');
  assert.equal(r.derive(6000).state, 'play');
  assert.equal(r.awaitsSilence(6001), false, 'past it: offline, and it stays so until the next message');
  assert.deepEqual(r.derive(6001), r.derive(600_000));
});

async function oscInput(): Promise<{
  input: OscInput;
  store: DeviceStore;
  clock: ManualClock;
  malformed: MalformedInputs;
}> {
  const config = makeConfig([
    { id: 1, name: 'CCG', type: 'osc_player', ip: '127.0.0.2', port: 0, videoFormat: '1080p5000' },
  ]);
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 1, name: 'CCG', type: 'osc_player', ip: '127.0.0.2', port: 0, framerate: 50 },
  ]);
  const malformed = new MalformedInputs(silentLogger(), createMetricsRegistry());
  const input = new OscInput({
    port: 0,
    bindAddress: '127.0.0.1',
    servers: config.servers as never,
    defaultFramerate: 50,
    store,
    clock,
    logger: silentLogger(),
    malformed,
  });
  await input.start();
  return { input, store, clock, malformed };
}

test('10 s of 2.3 traffic with video and audio streams counts no malformed input', async () => {
  const { input, store, clock, malformed } = await oscInput();
  try {
    const sim = new CasparcgSimulator({ targetHost: '127.0.0.1', targetPort: 9, layout: '2.3', fps: 50 });
    sim.play('AMB.mp4', { durationSec: 60 });
    let datagrams = 0;
    for (let n = 0; n < 500; n++) {
      clock.advance(20);
      for (const d of sim.nextTick()) {
        input.handleDatagram(d, '127.0.0.2');
        datagrams++;
      }
    }
    assert.ok(datagrams >= 500);
    assert.deepEqual(malformed.counts(), {});
    assert.equal(store.get(1)?.state, 'play');
    assert.equal(store.get(1)?.timecode, '00:00:10:00');
  } finally {
    await input.close();
  }
});

test('garbage from a configured CasparCG address is counted and keeps nothing connected', async () => {
  const { input, store, clock, malformed } = await oscInput();
  try {
    const sim = new CasparcgSimulator({ targetHost: '127.0.0.1', targetPort: 9, layout: '2.3', fps: 50 });
    sim.play('AMB.mp4', { durationSec: 60 });
    for (const d of sim.nextTick()) input.handleDatagram(d, '127.0.0.2');
    assert.equal(store.get(1)?.connected, true);
    const garbage = new TextEncoder().encode('this is not OSC at all!!');
    const foreign = new TextEncoder().encode('/foo\0\0\0\0,i\0\0\0\0\0\x01');
    for (let t = 0; t < 6000; t += 100) {
      clock.advance(100);
      input.handleDatagram(garbage, '127.0.0.2');
      input.handleDatagram(foreign, '127.0.0.2');
    }
    assert.equal(store.get(1)?.state, 'offline');
    assert.equal(store.get(1)?.connected, false);
    assert.equal(store.get(1)?.filename, 'AMB.mp4', 'the last clip is kept through offline');
    assert.ok((malformed.counts()['osc-datagram'] ?? 0) >= 60);
  } finally {
    await input.close();
  }
});

test('fast-check: any sequence of CasparCG events gives a valid state, and derive() never changes the facts', () => {
  const ev = fc.oneof(
    fc.record({
      field: fc.constant('time' as const),
      elapsed: fc.double({ min: 0, max: 1e5, noNaN: true }),
      total: fc.option(fc.double({ min: 0, max: 1e5, noNaN: true }), { nil: undefined }),
    }),
    fc.record({ field: fc.constant('paused' as const), paused: fc.boolean() }),
    fc.record({
      field: fc.constant('producer' as const),
      producer: fc.constantFrom('ffmpeg', 'empty', 'color'),
    }),
    fc.record({ field: fc.constant('name' as const), name: fc.string({ maxLength: 8 }) }),
    fc.record({
      field: fc.constant('channelFramerate' as const),
      fps: fc.double({ min: -10, max: 1000, noNaN: true }),
    }),
    fc.record({
      field: fc.constant('channelFormat' as const),
      format: fc.constantFrom('1080i5000', '720p5994', 'PAL', 'bogus', '2160p12000'),
    }),
    fc.record({ field: fc.constant('layerOther' as const) }),
  );
  fc.assert(
    fc.property(
      fc.array(fc.tuple(ev, fc.nat({ max: 2000 }), fc.constantFrom(1, 2), fc.constantFrom(10, 20)), {
        maxLength: 60,
      }),
      fc.nat({ max: 20_000 }),
      (steps, probe) => {
        const r = reducer();
        let now = 0;
        for (const [e, dt, channel, layer] of steps) {
          now += dt;
          const channelLevel = e.field === 'channelFramerate' || e.field === 'channelFormat';
          r.onEvent({ ...e, channel, layer: channelLevel ? undefined : layer, layout: '2.2' } as never, now);
          const first = r.derive(now);
          r.derive(now + probe);
          assert.deepEqual(r.derive(now), first, 'derive is pure');
          assert.ok(first.framerate !== undefined && first.framerate >= 1 && first.framerate <= 100);
          if (first.timecode !== undefined) assert.match(first.timecode, /^\d\d:[0-5]\d:[0-5]\d:\d\d$/);
          assert.ok(['play', 'stop', 'offline'].includes(first.state ?? ''), first.state);
        }
      },
    ),
    { numRuns: 500 },
  );
});

test('the OSC tick sleeps while no server is heard, runs from the first message, and sleeps again once it went offline', async () => {
  const { input, store, clock } = await oscInput();
  try {
    assert.equal(input.ticking, false, 'nothing heard yet: no timer');
    assert.equal(clock.pendingTimers, 0);
    const sim = new CasparcgSimulator({ targetHost: '127.0.0.1', targetPort: 9, layout: '2.3', fps: 50 });
    sim.play('AMB.mp4', { durationSec: 60 });
    for (let n = 0; n < 10; n++) {
      clock.advance(20);
      for (const d of sim.nextTick()) input.handleDatagram(d, '127.0.0.2');
    }
    assert.equal(store.get(1)?.state, 'play');
    assert.equal(input.ticking, true, 'a message wakes the tick');
    // Silence: the tick (every 250 ms) turns the device offline after 5 s, then sleeps.
    for (let i = 0; i < 21 && store.get(1)?.state !== 'offline'; i++) clock.advance(250);
    assert.equal(store.get(1)?.state, 'offline');
    assert.equal(store.get(1)?.reason, 'no OSC for 5 s');
    assert.equal(input.ticking, false, 'offline: asleep');
    assert.equal(clock.pendingTimers, 0);
    for (const d of sim.nextTick()) input.handleDatagram(d, '127.0.0.2');
    assert.equal(input.ticking, true, 'the server back: awake');
  } finally {
    await input.close();
  }
});
