import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { OFFLINE_POLL_MAX_MS, pollDelayMs, reconnectDelayMs } from '../../src/domain/backoff.ts';

test('1 s × 2ⁿ capped at 30 s (no jitter at random = 0.5)', () => {
  const delays = [0, 1, 2, 3, 4, 5, 6, 10, 100].map((n) => reconnectDelayMs(n, 1000, 30_000, () => 0.5));
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
});

test('jitter stays within ±20 % and never exceeds the cap', () => {
  assert.equal(
    reconnectDelayMs(0, 1000, 30_000, () => 0),
    800,
  );
  assert.equal(
    reconnectDelayMs(0, 1000, 30_000, () => 1),
    1200,
  );
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 1000 }), fc.double({ min: 0, max: 1, noNaN: true }), (n, r) => {
      const d = reconnectDelayMs(n, 1000, 30_000, () => r);
      assert.ok(d >= 800 && d <= 30_000, String(d));
    }),
    { numRuns: 500 },
  );
});

test('pollDelayMs: the poll period until the device is declared offline, then doubling to the 5 s cap', () => {
  const mid = () => 0.5; // no jitter
  const delays = [0, 1, 2, 3, 4, 5, 6, 50].map((n) => pollDelayMs(n, 3, 250, OFFLINE_POLL_MAX_MS, mid));
  assert.deepEqual(delays, [250, 250, 250, 500, 1000, 2000, 4000, 5000]);
  // A period longer than the cap is kept as it is (never polled faster for being offline).
  assert.equal(pollDelayMs(10, 3, 8000, OFFLINE_POLL_MAX_MS, mid), 8000);
  fc.assert(
    fc.property(fc.integer({ min: 3, max: 1000 }), fc.double({ min: 0, max: 1, noNaN: true }), (n, r) => {
      const d = pollDelayMs(n, 3, 250, OFFLINE_POLL_MAX_MS, () => r);
      assert.ok(d >= 400 && d <= OFFLINE_POLL_MAX_MS, String(d));
    }),
    { numRuns: 300 },
  );
});
