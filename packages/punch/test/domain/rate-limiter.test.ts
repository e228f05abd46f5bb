import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FixedWindowLimiter } from '../../src/domain/rate-limiter.ts';

test('10 per minute: the 11th is refused with the seconds left in the window', () => {
  const l = new FixedWindowLimiter({ limit: 10, windowMs: 60_000 });
  for (let i = 0; i < 10; i++) assert.equal(l.hit('1.2.3.4', 1000 + i * 1000).allowed, true);
  assert.deepEqual(l.hit('1.2.3.4', 20_500), { allowed: false, retryAfterS: 41 });
  // Another key is independent.
  assert.equal(l.hit('5.6.7.8', 20_500).allowed, true);
  // The window of the key starts at its first request (t=1000): at 61000 it is fresh again.
  assert.equal(l.hit('1.2.3.4', 60_999).allowed, false);
  assert.equal(l.hit('1.2.3.4', 61_000).allowed, true);
});

test('Retry-After is at least 1 second', () => {
  const l = new FixedWindowLimiter({ limit: 1, windowMs: 60_000 });
  l.hit('k', 0);
  assert.deepEqual(l.hit('k', 59_999.5), { allowed: false, retryAfterS: 1 });
});

test('memory is bounded: a full table forgets the least recently seen key and still serves a newcomer', () => {
  const l = new FixedWindowLimiter({ limit: 5, windowMs: 1000, maxKeys: 100 });
  for (let i = 0; i < 100; i++) assert.equal(l.hit(`ip${i}`, 0).allowed, true);
  assert.equal(l.size, 100);
  // ip0 is used again, so ip1 becomes the least recently seen.
  assert.equal(l.hit('ip0', 5).allowed, true);
  assert.equal(l.hit('newcomer', 10).allowed, true, 'a new client is served, not refused');
  assert.equal(l.size, 100);
  assert.equal(l.evicted, 1);
  // ip1 was forgotten (its count restarts); ip0 was kept with its count of 2.
  for (let i = 0; i < 3; i++) assert.equal(l.hit('ip0', 20).allowed, true);
  assert.equal(l.hit('ip0', 20).allowed, false);
  // After the window, the sweep frees the table.
  assert.equal(l.hit('newcomer', 1010).allowed, true);
  assert.equal(l.size, 1);
});
