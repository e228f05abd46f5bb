import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { DeviceStore, type DeviceChange } from '../../src/domain/device-store.ts';

function store(clock = new ManualClock()): { s: DeviceStore; changes: DeviceChange[]; clock: ManualClock } {
  const s = new DeviceStore(clock, [
    { id: 7, name: 'VT1', type: 'tcp_recorder', ip: '10.0.0.7', port: 9993, framerate: 25 },
  ]);
  const changes: DeviceChange[] = [];
  s.onChange((c) => changes.push(c));
  return { s, changes, clock };
}

test('initial state is offline, not connected, timecode zero', () => {
  const { s, clock } = store();
  assert.deepEqual(s.get(7), {
    id: 7,
    name: 'VT1',
    type: 'tcp_recorder',
    ip: '10.0.0.7',
    port: 9993,
    state: 'offline',
    timecode: '00:00:00:00',
    filename: '',
    framerate: 25,
    updated: clock.now(),
    connected: false,
    reason: 'not connected yet',
  });
});

test('a change event fires only when a visible field changes; updated follows device data', () => {
  const { s, changes, clock } = store();
  s.apply(7, { state: 'play', connected: true, reason: undefined, timecode: '00:00:01:00' }, true);
  assert.equal(changes.length, 1);
  assert.deepEqual(changes[0]?.fields.sort(), ['connected', 'reason', 'state', 'timecode']);
  assert.equal(changes[0]?.previous.state, 'offline');
  clock.advance(40);
  s.apply(7, { state: 'play', connected: true, timecode: '00:00:01:00' }, true);
  assert.equal(changes.length, 1, 'same values: no event');
  assert.equal(s.get(7)?.updated, clock.now(), 'device data refreshes updated');
  clock.advance(40);
  s.apply(7, { state: 'play' }, false);
  assert.notEqual(s.get(7)?.updated, clock.now(), 'no change from the monitor itself: updated kept');
  s.apply(7, { positionMs: 1000 }, true);
  s.apply(7, { positionMs: undefined }, true);
  assert.equal(changes.length, 3);
  assert.equal('positionMs' in s.get(7)!, false);
  assert.equal(s.apply(99, { state: 'stop' }, true), undefined);
});

test('a throwing listener does not stop the others', () => {
  const { s, changes } = store();
  s.onChange(() => {
    throw new Error('broken output');
  });
  const seen: number[] = [];
  s.onChange((c) => seen.push(c.id));
  s.apply(7, { state: 'stop' }, true);
  assert.equal(changes.length, 1);
  assert.deepEqual(seen, [7]);
});
