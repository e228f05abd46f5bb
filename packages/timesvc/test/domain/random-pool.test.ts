import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBuffer, randomInto } from '../../src/domain/random-pool.ts';

test('random pool: nonces never repeat across refills, writes stay inside their range', () => {
  // 1,000 nonces of 16 bytes cross the 4 KiB pool boundary several times; any reuse of pool bytes would
  // repeat a nonce (a repeated 128-bit random value is otherwise out of reach).
  const seen = new Set<string>();
  for (let i = 0; i < 1000; i++) seen.add(randomBuffer(16).toString('hex'));
  assert.equal(seen.size, 1000);
  // Odd sizes that straddle the refill point.
  for (let i = 0; i < 300; i++) seen.add(randomBuffer(12 + (i % 7)).toString('hex'));
  assert.equal(seen.size, 1300);

  const target = Buffer.alloc(64, 0xee);
  randomInto(target, 10, 20);
  assert.ok(
    target.subarray(0, 10).every((b) => b === 0xee),
    'bytes before the range untouched',
  );
  assert.ok(
    target.subarray(30).every((b) => b === 0xee),
    'bytes after the range untouched',
  );
  assert.notDeepEqual(target.subarray(10, 30), Buffer.alloc(20, 0xee));

  // Larger than the pool: filled directly, still random.
  const big = randomBuffer(10_000);
  assert.notDeepEqual(big.subarray(0, 5000), big.subarray(5000));
  assert.ok(new Set(big).size > 200, 'a 10 KB draw covers most byte values');
});
