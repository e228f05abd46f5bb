import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  OFFLINE_POLL_MAX_MS,
  pollDelayMs,
  reconnectDelayMs,
  retryInstantMs,
} from '../../src/domain/backoff.ts';

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

test('retry instants: the early steps of a backoff keep their own delay', () => {
  assert.equal(retryInstantMs(10_000, 1000, 5000, 123), undefined);
  assert.equal(retryInstantMs(10_000, 3999, 5000, 123), undefined);
});

test('retry instants at the cap: on the grid, after now, at most one period away', () => {
  fc.assert(
    fc.property(
      fc.double({ min: 0, max: 1e9, noNaN: true }),
      fc.integer({ min: 4000, max: 5000 }),
      fc.double({ min: 0, max: 4999, noNaN: true }),
      (now, delay, phase) => {
        const at = retryInstantMs(now, delay, 5000, phase);
        assert.ok(at !== undefined);
        assert.ok(at > now && at <= now + 5000, `${at} after ${now}`);
        const k = (at - phase) / 5000;
        assert.ok(Math.abs(k - Math.round(k)) < 1e-6, 'on the grid');
      },
    ),
  );
});

test('retry instants: two devices failing within one period are retried at the same instant', () => {
  // A HyperDeck refused at 12,001.5 ms and a vMix poll refused at 12,003.2 ms (phase 2,000: grid 17,000).
  const a = retryInstantMs(12_001.5, 4500, 5000, 2000);
  const b = retryInstantMs(12_003.2, 4100, 5000, 2000);
  assert.equal(a, 17_000);
  assert.equal(b, 17_000);
});

test('retry instants: a longer delay (the vMix TCP API link at 30 s) is not lengthened, nor cut by more than a period', () => {
  fc.assert(
    fc.property(
      fc.double({ min: 0, max: 1e9, noNaN: true }),
      fc.integer({ min: 5000, max: 30_000 }),
      fc.double({ min: 0, max: 4999, noNaN: true }),
      (now, delay, phase) => {
        const at = retryInstantMs(now, delay, 5000, phase) ?? NaN;
        assert.ok(at > now + delay - 5000 && at <= now + delay, `${at} for ${delay} after ${now}`);
      },
    ),
  );
});

test('retry instants: a retry scheduled just before the instant that has run (its timer fired early) goes to the next one', () => {
  // The instant 5,000 ran at 4,999.7 by the monotonic clock; the refused device asks again.
  assert.equal(retryInstantMs(4999.7, 4500, 5000, 0), 5000, 'without the last instant: the same one again');
  assert.equal(retryInstantMs(4999.7, 4500, 5000, 0, 5000), 10_000);
  assert.equal(retryInstantMs(5000.2, 4500, 5000, 0, 5000), 10_000);
});
