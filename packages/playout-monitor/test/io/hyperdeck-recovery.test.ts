// HyperDeck: a lost reply, an emptied or swapped timeline, display-timecode notifications and the bounded
// clip-list refresh, against the simulator on loopback with the client's default timeouts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { timingBound } from '@broadcast-ops/core/testing';
import { HyperdeckReducer } from '../../src/domain/hyperdeck-reducer.ts';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import { makeConfig, startMonitor, waitDevice } from '../helpers.ts';

function deck(port: number, extra: Record<string, unknown> = {}): unknown {
  return { id: 4, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port, ...extra };
}

test('reducer: 107 timeline empty forgets the clip list and the clip; 513 moves the timecode', () => {
  const r = new HyperdeckReducer({ framerate: undefined, defaultFramerate: 50 });
  r.onConnected();
  r.onClips([{ id: 1, name: 'A.mov', startTimecode: '00:00:00:00', durationTimecode: '00:01:00:00' }]);
  const playing = r.onTransport(
    { status: 'play', clipId: 1, videoFormat: '1080p23976', timecode: '00:00:10:00' },
    false,
  );
  assert.equal(playing.filename, 'A.mov');
  assert.ok(Math.abs((playing.framerate ?? 0) - 24000 / 1001) < 1e-9);
  assert.equal(playing.framerateSource, 'device-format');
  assert.equal(r.onDisplayTimecode('00:00:10:07').timecode, '00:00:10:07');
  const empty = r.onTimelineEmpty();
  assert.equal(empty.filename, '');
  assert.equal(empty.durationMs, undefined);
  assert.equal(r.clipKey.clipId, null);
});

test('a lost reply while pushes keep arriving: the deck reconnects and the timecode moves again within 15 s', async () => {
  // Defaults throughout (replyTimeoutMs 4000, reconnect from 1 s). The deck keeps pushing 513 every frame,
  // so the connection never falls silent: only the per-command timeout can notice the lost reply.
  const sim = new HyperdeckSimulator({ port: 0, videoFormat: '1080p25', fps: 25 });
  const port = await sim.start();
  const { monitor } = await startMonitor(makeConfig([deck(port)]));
  try {
    await waitDevice(monitor, 4, (d) => d.connected && sim.commands.includes('clips get'), 5000);
    sim.play(1);
    await waitDevice(monitor, 4, (d) => d.state === 'play');
    sim.dropNextReply('transport info');
    const lostAt = Date.now();
    // The reply timeout (default 4 s) notices; the client reconnects and polls again.
    const down = await waitDevice(monitor, 4, (d) => d.state === 'offline', 15_000);
    assert.match(down.reason ?? '', /no reply to "transport info" within 4000 ms/);
    const back = await waitDevice(monitor, 4, (d) => d.state === 'play', 15_000);
    const tc = back.timecode;
    await waitDevice(monitor, 4, (d) => d.timecode !== tc, 2000);
    const recoveredMs = Date.now() - lostAt;
    assert.ok(recoveredMs < (await timingBound(15_000)), `recovered after ${recoveredMs} ms`);
  } finally {
    await monitor.close();
    await sim.close();
  }
});

test('107 timeline empty clears the clip; new media brings its own clip list', async () => {
  const sim = new HyperdeckSimulator({ port: 0, videoFormat: '1080i50' });
  const port = await sim.start();
  const { monitor } = await startMonitor(makeConfig([deck(port)]));
  try {
    sim.play(2);
    await waitDevice(monitor, 4, (d) => d.filename === 'B-Roll 02.mov', 5000);
    sim.swapMedia([]);
    const cleared = await waitDevice(monitor, 4, (d) => d.filename === '' && d.state === 'stop', 5000);
    assert.equal(cleared.connected, true);
    sim.swapMedia([{ id: 1, name: 'Other disk.mov', start: '01:00:00:00', duration: '00:00:10:00' }]);
    sim.play(1);
    await waitDevice(monitor, 4, (d) => d.filename === 'Other disk.mov' && d.state === 'play', 5000);
  } finally {
    await monitor.close();
    await sim.close();
  }
});

test('display-timecode notifications (protocol 1.11) move the timecode every frame; 1.10 decks are polled', async () => {
  for (const version of ['1.11', '1.10']) {
    const sim = new HyperdeckSimulator({
      port: 0,
      videoFormat: '1080p25',
      fps: 25,
      protocolVersion: version,
    });
    const port = await sim.start();
    // Polling slowed right down so that only the notifications can move the timecode often.
    const { monitor } = await startMonitor(makeConfig([deck(port, { pollIntervalMs: 5000 })]));
    try {
      await waitDevice(monitor, 4, (d) => d.connected && sim.commands.includes('clips get'), 5000);
      sim.play(1);
      await waitDevice(monitor, 4, (d) => d.state === 'play');
      const seen = new Set<string>();
      const off = monitor.store.onChange((c) => {
        if (c.fields.includes('timecode')) seen.add(c.state.timecode);
      });
      await new Promise((r) => setTimeout(r, 1000));
      off();
      const asked = sim.commands.includes('notify: display timecode: true');
      if (version === '1.11') {
        assert.ok(asked);
        assert.ok(seen.size >= 10, `${seen.size} timecodes in 1 s`);
      } else {
        assert.ok(!asked, 'not asked of a deck whose protocol does not offer it');
        assert.ok(seen.size <= 2, `${seen.size} timecodes in 1 s without notifications`);
      }
    } finally {
      await monitor.close();
      await sim.close();
    }
  }
});

test('a clip id missing from the clip list is looked up again at most every clipsRefreshMinMs', async () => {
  const sim = new HyperdeckSimulator({ port: 0, videoFormat: '1080i50' });
  const port = await sim.start();
  const { monitor } = await startMonitor(makeConfig([deck(port, { pollIntervalMs: 50 })]));
  try {
    await waitDevice(monitor, 4, (d) => d.connected && sim.commands.includes('clips get'), 5000);
    // The deck says clip 9 while its list has 1 and 2 (a clip being written, a list out of step).
    sim.swapMedia([
      { id: 1, name: 'A.mov', start: '00:00:00:00', duration: '00:01:00:00' },
      { id: 2, name: 'B.mov', start: '00:01:00:00', duration: '00:01:00:00' },
    ]);
    sim.forceClipId(9);
    const before = sim.commands.filter((c) => c === 'clips get').length;
    await new Promise((r) => setTimeout(r, 1500));
    const fetched = sim.commands.filter((c) => c === 'clips get').length - before;
    // 30 polls in 1.5 s; the list is fetched for the change to clip 9 and not again within 10 s.
    assert.ok(fetched >= 1 && fetched <= 2, `${fetched} clips get in 1.5 s`);
  } finally {
    await monitor.close();
    await sim.close();
  }
});
