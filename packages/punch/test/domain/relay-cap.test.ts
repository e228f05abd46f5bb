import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RELAY_CAP_HEADROOM, declaredBitrate, relayByteCap } from '../../src/domain/relay-cap.ts';

/** The per-session cap (docs/relay.md "The cap per session"): bitrate x 1.5 in bytes, bounded. */
test('declared bitrate with headroom: 1.5 x bits / 8, rounded up', () => {
  assert.equal(RELAY_CAP_HEADROOM, 1.5);
  assert.deepEqual(relayByteCap({ declaredBps: 8_000_000 }), {
    bytesPerSecond: 1_500_000,
    source: 'declared',
  });
  assert.deepEqual(relayByteCap({ declaredBps: 5_000_001 }), { bytesPerSecond: 937_501, source: 'declared' });
});

test('declared wins over measured; measured when nothing is declared; the relay default otherwise', () => {
  assert.deepEqual(relayByteCap({ declaredBps: 4_000_000, measuredBps: 20_000_000 }), {
    bytesPerSecond: 750_000,
    source: 'declared',
  });
  assert.deepEqual(relayByteCap({ measuredBps: 4_000_000 }), { bytesPerSecond: 750_000, source: 'measured' });
  assert.deepEqual(relayByteCap({}), { bytesPerSecond: undefined, source: 'default' });
  // A zero, negative or non-finite rate is no rate.
  for (const bad of [0, -5, NaN, Infinity]) {
    assert.deepEqual(relayByteCap({ declaredBps: bad, measuredBps: bad }), {
      bytesPerSecond: undefined,
      source: 'default',
    });
  }
  assert.equal(relayByteCap({ declaredBps: 0, measuredBps: 2_000_000 }).source, 'measured');
});

test("bounded by the relay's maximum above and by 100 kbit/s below", () => {
  // 100 Mbit/s x 1.5 is above the default maximum of 12.5 MB/s.
  assert.equal(relayByteCap({ declaredBps: 100_000_000 }).bytesPerSecond, 12_500_000);
  assert.equal(
    relayByteCap({ declaredBps: 100_000_000, maxBytesPerSecond: 5_000_000 }).bytesPerSecond,
    5_000_000,
  );
  assert.equal(relayByteCap({ measuredBps: 1_000 }).bytesPerSecond, 12_500);
});

test('the declared bitrate is meta.bitrate, a positive finite number of bits/s', () => {
  assert.equal(declaredBitrate({ bitrate: 6e6 }), 6e6);
  assert.equal(declaredBitrate({ bitrate: '6000000' }), undefined);
  assert.equal(declaredBitrate({ bitrate: -1 }), undefined);
  assert.equal(declaredBitrate({}), undefined);
  assert.equal(declaredBitrate(undefined), undefined);
});
