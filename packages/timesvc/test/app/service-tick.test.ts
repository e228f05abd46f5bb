// The service's once-a-second tick (src/io/service-tick.ts): one timer of the injected clock, tasks in order.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { ServiceTick } from '../../src/io/service-tick.ts';

test('one timer of the injected clock runs every task once a second, in the order added, until stopped', () => {
  const clock = new ManualClock();
  const tick = new ServiceTick({ clock });
  const ran: string[] = [];
  tick.every(() => ran.push('a'));
  const offB = tick.every(() => ran.push('b'));
  tick.start();
  tick.start(); // a second start arms no second timer
  assert.equal(clock.pendingTimers, 1);
  clock.advance(999);
  assert.equal(ran.length, 0);
  clock.advance(1);
  assert.deepEqual(ran, ['a', 'b']);
  offB();
  tick.every(() => ran.push('c'));
  clock.advance(1000);
  assert.deepEqual(ran, ['a', 'b', 'a', 'c']);
  assert.equal(clock.pendingTimers, 1);
  tick.stop();
  clock.advance(5000);
  assert.deepEqual(ran, ['a', 'b', 'a', 'c']);
  assert.equal(clock.pendingTimers, 0);
});

test('a task that throws does not stop the others or the tick', () => {
  const clock = new ManualClock();
  const errors: unknown[] = [];
  const logger = { error: (o: unknown) => errors.push(o) } as unknown as ConstructorParameters<
    typeof ServiceTick
  >[0]['logger'];
  const tick = new ServiceTick({ clock, logger });
  let after = 0;
  tick.every(() => {
    throw new Error('boom');
  });
  tick.every(() => after++);
  tick.start();
  clock.advance(3000);
  assert.equal(after, 3);
  assert.equal(errors.length, 3);
  tick.stop();
});
