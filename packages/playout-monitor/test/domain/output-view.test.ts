import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { OutputView, type OutputDevice } from '../../src/domain/output-view.ts';

function setup(): { clock: ManualClock; store: DeviceStore; view: OutputView; seen: OutputDevice[] } {
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 7, name: 'VT', type: 'tcp_recorder', ip: '127.0.0.1', port: 9993, framerate: 25 },
  ]);
  const view = new OutputView(clock);
  view.attach(store, new Map([[7, 5000]]));
  const seen: OutputDevice[] = [];
  view.onChange((d) => seen.push({ ...d }));
  return { clock, store, view, seen };
}

test('a device whose data stops is never shown playing past its stale timeout; file and timecode kept', () => {
  const { clock, store, view, seen } = setup();
  store.apply(7, { state: 'play', connected: true, filename: 'A.mov', timecode: '00:00:10:00' }, true);
  assert.equal(view.get(7)?.state, 'play');
  // Data keeps coming for 4 s (no visible change, only `updated`).
  for (let i = 0; i < 16; i++) {
    clock.advance(250);
    store.apply(7, {}, true);
    view.tick();
  }
  assert.equal(view.get(7)?.state, 'play');
  // Then silence: past 5 s the outputs show offline, stale, with the last file and timecode.
  for (let i = 0; i < 21; i++) {
    clock.advance(250);
    view.tick();
    if (clock.monotonicMs() - 4000 <= 5000)
      assert.equal(view.get(7)?.state, 'play', `at ${clock.monotonicMs()}`);
  }
  const shown = view.get(7)!;
  assert.equal(shown.state, 'offline');
  assert.equal(shown.stale, true);
  assert.equal(shown.filename, 'A.mov');
  assert.equal(shown.timecode, '00:00:10:00');
  assert.match(shown.reason ?? '', /no data/);
  assert.equal(seen.at(-1)?.state, 'offline', 'listeners were told');
  // Data again (no visible change, so no change event): playing again at the next tick.
  store.apply(7, {}, true);
  view.tick();
  assert.equal(view.get(7)?.state, 'play');
});

test('a wall-clock step neither hides nor fakes staleness (ages are monotonic)', () => {
  const { clock, store, view } = setup();
  store.apply(7, { state: 'rec', connected: true }, true);
  clock.stepWall(-3_600_000); // an hour back: `updated` is now in the "future"
  clock.advance(6000);
  view.tick();
  assert.equal(view.get(7)?.state, 'offline', 'stale although now − updated is negative');
  store.apply(7, {}, true);
  clock.stepWall(7_200_000); // two hours forward: fresh data must not look old
  clock.advance(250);
  view.tick();
  assert.equal(view.get(7)?.state, 'rec');
});

test('a simulation overlays the device, runs its timecode, ends by itself, and the real state returns', () => {
  const { clock, store, view } = setup();
  store.apply(7, { state: 'stop', connected: true, filename: 'REAL.mov' }, true);
  view.simulate(7, { state: 'play', filename: 'SIM.mov', timecode: '01:00:00:00', durationSec: 2 });
  assert.equal(view.get(7)?.simulated, true);
  assert.equal(view.get(7)?.state, 'play');
  clock.advance(1000);
  store.apply(7, {}, true); // the real input keeps running underneath
  view.tick();
  assert.equal(view.get(7)?.timecode, '01:00:01:00');
  assert.equal(view.get(7)?.filename, 'SIM.mov');
  clock.advance(1000);
  view.tick();
  const back = view.get(7)!;
  assert.equal(back.simulated, undefined);
  assert.equal(back.state, 'stop');
  assert.equal(back.filename, 'REAL.mov');
});

test('attaching a new store tells every output to rebuild; simulations of removed devices end', () => {
  const { clock, view } = setup();
  view.simulate(7, { state: 'rec' });
  let resets = 0;
  view.onReset(() => resets++);
  const next = new DeviceStore(clock, [
    { id: 8, name: 'New', type: 'http_mixer', ip: '127.0.0.1', port: 8088, framerate: 25 },
  ]);
  view.attach(next, new Map([[8, 7750]]));
  assert.equal(resets, 1);
  assert.deepEqual(
    view.list().map((d) => [d.id, d.staleAfterMs]),
    [[8, 7750]],
  );
  assert.equal(view.isSimulated(7), false);
});

test('needsTick: only while time alone can change what is shown (a play or rec, a fresh mixer tally, a simulation)', () => {
  const { clock, store, view } = setup();
  assert.equal(view.needsTick, false, 'never heard: nothing to age');
  store.apply(7, { state: 'stop', connected: true }, true);
  assert.equal(view.needsTick, false, 'connected and stopped: the guard never applies to stop');
  store.apply(7, { state: 'play', connected: true }, true);
  assert.equal(view.needsTick, true, 'playing: the guard may turn it offline');
  clock.advance(6000);
  view.tick();
  assert.equal(view.get(7)?.stale, true);
  assert.equal(view.needsTick, true, 'stale play: the reason counts the age');
  store.apply(7, { state: 'offline', connected: false, reason: 'gone' }, false);
  assert.equal(view.needsTick, false, 'offline: asleep');
  view.simulate(7, { state: 'stop' });
  assert.equal(view.needsTick, true, 'a simulation runs');
  view.endSimulation(7);
  assert.equal(view.needsTick, false);
});

test('needsTick: a mixer tally is ticked until the guard has turned it unknown, and again once data moves', () => {
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port: 8088, framerate: 25 },
  ]);
  const view = new OutputView(clock);
  view.attach(store, new Map([[2, 1000]]));
  const inputs = [{ key: 'a', number: 1, title: 'A', tally: 'program' as const }];
  store.apply(2, { state: 'stop', connected: true, inputs }, true);
  assert.equal(view.needsTick, true, 'a fresh tally can still go stale');
  clock.advance(1000);
  view.tick();
  assert.equal(view.get(2)?.inputs?.[0]?.tally, 'program', 'at the bound still shown');
  assert.equal(view.needsTick, true);
  clock.advance(250);
  view.tick();
  assert.equal(view.get(2)?.inputs?.[0]?.tally, 'unknown', 'past it: unknown');
  assert.equal(view.needsTick, false, 'nothing left to age');
  // Data moves without a visible change in the store (no change event): seen as needing a tick.
  store.apply(2, {}, true);
  assert.equal(view.needsTick, true);
  view.tick();
  assert.equal(view.get(2)?.inputs?.[0]?.tally, 'program');
});

test('needsTick: a mixer that is offline with its tally all unknown (its reason changing on each failed poll) needs none', () => {
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port: 8088, framerate: 25 },
  ]);
  const view = new OutputView(clock);
  view.attach(store, new Map([[2, 1000]]));
  const inputs = [{ key: 'a', number: 1, title: 'A', tally: 'unknown' as const }];
  store.apply(2, { state: 'offline', connected: false, reason: 'refused (3 failed polls)', inputs }, false);
  assert.equal(view.needsTick, false);
  clock.advance(2000);
  store.apply(2, { reason: 'refused (4 failed polls)' }, false); // `updated` moves with the reason
  assert.equal(view.needsTick, false, 'nothing the guard could change');
  store.apply(2, { state: 'offline', connected: false, inputs: [] }, false);
  assert.equal(view.needsTick, false, 'no inputs');
});
