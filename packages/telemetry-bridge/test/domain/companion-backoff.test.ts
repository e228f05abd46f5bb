/**
 * The Companion link's reconnect delay (docs/companion.md "Setting it up": attempt n waits
 * min(max, delay × 2^(n-1)) plus jitter): exponential from reconnectDelay, capped, plus jitter. Recovery as a
 * client sees it: test/io/companion-recovery.test.ts.
 */ import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay } from '../../src/domain/companion/types.ts';

test('backoff: exponential from reconnectDelay, capped, plus jitter in [0, reconnectJitter)', () => {
  const o = { reconnectDelay: 100, maxReconnectDelay: 1000, reconnectJitter: 50 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 60].map((n) => backoffDelay(n, o, () => 0)),
    [100, 200, 400, 800, 1000, 1000, 1000],
  );
  assert.equal(
    backoffDelay(1, o, () => 0.999),
    150,
  );
  assert.equal(
    backoffDelay(3, o, () => 0.5),
    425,
  );
});
