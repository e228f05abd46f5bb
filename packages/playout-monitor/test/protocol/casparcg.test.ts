import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCasparMessage, casparFormatFps } from '../../src/protocol/casparcg.ts';
import { decodeOsc, oscMessages } from '../../src/protocol/osc.ts';
import { CasparcgReducer, type CasparReducerOptions } from '../../src/domain/casparcg-reducer.ts';
import { readHex } from '../helpers.ts';

function reducer(o: Partial<CasparReducerOptions> = {}): CasparcgReducer {
  return new CasparcgReducer({
    channel: 1,
    layer: 10,
    framerate: undefined,
    defaultFramerate: 50,
    staleTimeoutMs: 5000,
    layerQuietMs: 1000,
    advanceWindowMs: 500,
    ...o,
  });
}

function feed(r: CasparcgReducer, datagram: Uint8Array, now: number): void {
  r.onDatagram(now);
  for (const m of oscMessages(decodeOsc(datagram).packet)) {
    const p = parseCasparMessage(m);
    assert.ok(p.ok, m.address);
    r.onEvent(p.event, now);
  }
}

test('address families: 2.0 and 2.2+ paths map to the same fields', () => {
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
  assert.deepEqual({ ...a.event, layout: undefined }, { ...b.event, layout: undefined });
  assert.equal(a.event.layout, '2.0');
  assert.equal(b.event.layout, '2.2');
  const fps = parse('/channel/1/stage/layer/10/foreground/file/streams/1/fps', [
    { type: 'i', value: 30000 },
    { type: 'i', value: 1001 },
  ]);
  assert.ok(fps.ok && fps.event.field === 'fileFps');
  assert.ok(Math.abs(fps.event.fps - 29.97) < 0.001);
  const single = parse('/channel/1/framerate', [{ type: 'i', value: 25 }]);
  assert.ok(single.ok && single.event.field === 'channelFramerate' && single.event.fps === 25);
  assert.deepEqual(parse('/channel/1/stage/layer/10/foreground/file/time', [{ type: 's', value: 'x' }]), {
    ok: false,
    reason: 'bad-arguments',
    address: '/channel/1/stage/layer/10/foreground/file/time',
  });
  assert.equal(parse('/other/thing', []).ok, false);
  // HH:MM:SS:FF cannot count more than 100 frames a second: such rates are refused (found by fast-check).
  assert.equal(
    parse('/channel/1/framerate', [
      { type: 'i', value: 1000 },
      { type: 'i', value: 1 },
    ]).ok,
    false,
  );
  assert.equal(casparFormatFps('2160p12000'), undefined);
  assert.equal(casparFormatFps('1080i5000'), 25);
  assert.equal(casparFormatFps('720p5000'), 50);
  assert.ok(Math.abs((casparFormatFps('1080p5994') ?? 0) - 59.94) < 0.001);
});

test('CasparCG 2.0.7 capture: AMB.mp4 playing at frame 125 of a 25 fps clip', () => {
  const r = reducer({ framerate: 25 });
  feed(r, readHex('casparcg-2.0.7-play-1.hex'), 1000);
  feed(r, readHex('casparcg-2.0.7-play-2.hex'), 1000);
  const s = r.derive(1000);
  assert.equal(s.state, 'play');
  assert.equal(s.timecode, '00:00:05:00');
  assert.equal(s.filename, 'AMB.mp4');
  assert.equal(s.framerate, 25);
  assert.equal(s.durationMs, 60_000);
  assert.equal(s.remainingMs, 55_000);
  assert.equal(s.loop, false);
  assert.equal(s.connected, true);
});

test('CasparCG 2.3 capture: paused on frame 624 is stop at 00:00:12:24 (channel 50p), playing is play', () => {
  const r = reducer();
  feed(r, readHex('casparcg-2.3-paused.hex'), 1000);
  const paused = r.derive(1000);
  assert.equal(paused.state, 'stop');
  // 12.48 s is below 12.48 in float32; rounding recovers frame 624 where flooring would give 623.
  assert.equal(paused.timecode, '00:00:12:24');
  assert.equal(paused.filename, 'AMB');
  assert.equal(paused.framerate, 50);
  assert.equal(paused.positionMs, 12_480);
  assert.equal(paused.remainingMs, 47_520);
  const r2 = reducer();
  feed(r2, readHex('casparcg-2.3-playing.hex'), 1000);
  assert.equal(r2.derive(1000).state, 'play');
});

test('CasparCG 2.3: STOP (empty producer) is stop with no file; a quiet layer is stop; silence is offline', () => {
  const r = reducer();
  feed(r, readHex('casparcg-2.3-playing.hex'), 0);
  feed(r, readHex('casparcg-2.3-stopped.hex'), 40);
  const stopped = r.derive(40);
  assert.equal(stopped.state, 'stop');
  assert.equal(stopped.filename, '');
  assert.equal(stopped.timecode, '00:00:00:00');
  // Playing, then the layer goes quiet while channel messages still arrive.
  const q = reducer();
  feed(q, readHex('casparcg-2.3-playing.hex'), 0);
  assert.equal(q.derive(0).state, 'play');
  for (let t = 100; t <= 1500; t += 100) {
    q.onDatagram(t);
    const p = parseCasparMessage({
      kind: 'message',
      address: '/channel/1/framerate',
      args: [
        { type: 'i', value: 50 },
        { type: 'i', value: 1 },
      ],
    });
    assert.ok(p.ok);
    q.onEvent(p.event, t);
  }
  assert.equal(q.derive(1500).state, 'stop');
  assert.equal(q.derive(1500).filename, '');
  // No datagram at all for longer than the stale bound: offline, with the reason.
  const off = q.derive(1500 + 5001);
  assert.equal(off.state, 'offline');
  assert.equal(off.connected, false);
  assert.equal(off.reason, 'no OSC for 5 s');
});

test('time not advancing without a paused flag (end of clip) becomes stop after the window', () => {
  const r = reducer();
  feed(r, readHex('casparcg-2.0.7-play-1.hex'), 0);
  assert.equal(r.derive(0).state, 'play');
  for (let t = 40; t <= 800; t += 40) feed(r, readHex('casparcg-2.0.7-play-1.hex'), t);
  assert.equal(r.derive(800).state, 'stop');
});

test('other channels and layers do not disturb the watched layer (demux by channel + layer)', () => {
  const r = reducer();
  feed(r, readHex('casparcg-2.3-paused.hex'), 0);
  feed(r, readHex('casparcg-2.3-nested.hex'), 10);
  const s = r.derive(10);
  assert.equal(s.filename, 'AMB');
  const other = reducer({ channel: 2 });
  feed(other, readHex('casparcg-2.3-paused.hex'), 0);
  assert.equal(other.derive(0).state, 'stop');
  assert.equal(other.derive(0).filename, '');
});
