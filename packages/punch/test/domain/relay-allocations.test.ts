import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core';
import fc from 'fast-check';
import { AddressPolicy } from '../../src/domain/relay-address-policy.ts';
import { RelayAllocations, type RelayLimits } from '../../src/domain/relay-allocations.ts';

// Public addresses from RFC 5737's documentation ranges stand for the peers' NAT addresses.
const A = '192.0.2.10';
const B = '198.51.100.20';
const EVIL = '203.0.113.66';

function relay(limits: Partial<RelayLimits> = {}) {
  const clock = new ManualClock();
  const r = new RelayAllocations(clock, limits);
  const made = r.allocate({ sessionId: 's1', peers: [A, B], bytesPerSecond: 100_000 });
  assert.ok(made.ok);
  return { clock, r, id: made.allocation.id };
}

describe('relay address policy', () => {
  test('refuses loopback, private-use, link-local, multicast and unspecified destinations', () => {
    const p = new AddressPolicy();
    const cases: [string, string | undefined][] = [
      ['127.0.0.1', 'loopback'],
      ['::1', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['10.1.2.3', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.1.1', 'private'],
      ['100.64.0.1', 'private'],
      ['fd00::1', 'private'],
      ['169.254.1.1', 'link_local'],
      ['fe80::1', 'link_local'],
      ['224.0.0.1', 'multicast'],
      ['239.255.255.250', 'multicast'],
      ['255.255.255.255', 'multicast'],
      ['ff02::1', 'multicast'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['example.org', 'not_an_ip'],
      ['', 'not_an_ip'],
      ['172.32.0.1', undefined],
      [A, undefined],
      ['2001:db8::1', undefined],
    ];
    for (const [ip, want] of cases) assert.equal(p.refusal(ip), want, ip);
  });

  test('an allow list admits a refused range, and a bad entry is a clear error', () => {
    const p = new AddressPolicy(['127.0.0.0/8', '10.9.0.0/16']);
    assert.equal(p.refusal('127.0.0.1'), undefined);
    assert.equal(p.refusal('10.9.1.1'), undefined);
    assert.equal(p.refusal('10.8.1.1'), 'private');
    assert.throws(() => new AddressPolicy(['10.0.0.0/33']), /prefix outside 0..32/);
    assert.throws(() => new AddressPolicy(['nope']), /not an IP address/);
  });
});

describe('relay allocations', () => {
  test('forwards between the latched sides only once both have sent', () => {
    const { r, id } = relay();
    assert.deepEqual(r.admit(id, 0, { address: A, port: 5000 }, 100), {
      forward: false,
      reason: 'peer_not_latched',
    });
    assert.deepEqual(r.admit(id, 1, { address: B, port: 6000 }, 100), {
      forward: true,
      to: { address: A, port: 5000 },
    });
    assert.deepEqual(r.admit(id, 0, { address: A, port: 5000 }, 100), {
      forward: true,
      to: { address: B, port: 6000 },
    });
    assert.equal(r.drops.peer_not_latched, 1);
    assert.deepEqual(r.get(id)?.forwardedPackets, [1, 1]);
    assert.deepEqual(r.get(id)?.forwardedBytes, [100, 100]);
  });

  test('a source not pinned, or a second port from the pinned address, is dropped and counted', () => {
    const { clock, r, id } = relay();
    r.admit(id, 0, { address: A, port: 5000 }, 10);
    r.admit(id, 1, { address: B, port: 6000 }, 10);
    // A stranger on A's relay port, and B's address on A's port (the sides are not interchangeable).
    assert.deepEqual(r.admit(id, 0, { address: EVIL, port: 5000 }, 10), {
      forward: false,
      reason: 'unpinned_source',
    });
    assert.equal(r.admit(id, 0, { address: B, port: 6000 }, 10).forward, false);
    // Another client behind A's NAT cannot take the latched side while A is active.
    assert.deepEqual(r.admit(id, 0, { address: A, port: 5001 }, 10), {
      forward: false,
      reason: 'unlatched_port',
    });
    assert.equal(r.drops.unpinned_source, 2);
    assert.equal(r.drops.unlatched_port, 1);
    // After A has been silent for relatchAfterMs (a restart, a NAT rebinding), a new port from A relatches.
    clock.advance(5_000);
    assert.deepEqual(r.admit(id, 0, { address: A, port: 5001 }, 10), {
      forward: true,
      to: { address: B, port: 6000 },
    });
    assert.equal(r.relatched, 1);
    assert.deepEqual(r.admit(id, 1, { address: B, port: 6000 }, 10), {
      forward: true,
      to: { address: A, port: 5001 },
    });
  });

  test('the byte-rate cap is a token bucket per direction on the injected clock', () => {
    // 100 kB/s with a 250 ms burst: 25,000 bytes at once, then 100 bytes per millisecond.
    const { clock, r, id } = relay();
    r.admit(id, 1, { address: B, port: 6000 }, 0);
    const send = (side: 0 | 1, bytes: number) =>
      r.admit(id, side, { address: side === 0 ? A : B, port: side === 0 ? 5000 : 6000 }, bytes);
    let passed = 0;
    for (let i = 0; i < 30; i++) if (send(0, 1000).forward) passed++;
    assert.equal(passed, 25);
    assert.equal(r.drops.over_rate, 5);
    // The other direction has its own bucket (the receiver's ACKs and NAKs survive a saturated forward path).
    assert.equal(send(1, 1000).forward, true);
    clock.advance(10);
    assert.equal(send(0, 1000).forward, true);
    assert.equal(send(0, 1000).forward, false);
    // Over a long run the rate converges to the cap: 1 s at 1000-byte datagrams offered every 1 ms.
    let bytes = 0;
    for (let ms = 0; ms < 1000; ms++) {
      clock.advance(1);
      if (send(0, 1000).forward) bytes += 1000;
    }
    assert.ok(bytes >= 99_000 && bytes <= 101_000, `forwarded ${bytes} bytes in 1 s at a 100 kB/s cap`);
  });

  test('expiry and idle timeout end an allocation; its datagrams are then dropped as no_allocation', () => {
    const { clock, r, id } = relay({ idleTimeoutMs: 30_000, defaultLifetimeMs: 60_000 });
    r.admit(id, 0, { address: A, port: 5000 }, 10);
    r.admit(id, 1, { address: B, port: 6000 }, 10);
    // Traffic every 20 s keeps it past the 30 s idle timeout, but not past its 60 s lifetime.
    for (const step of [20_000, 20_000, 19_999]) {
      clock.advance(step);
      assert.equal(r.admit(id, 0, { address: A, port: 5000 }, 10).forward, true);
      assert.deepEqual(r.sweep(), []);
    }
    clock.advance(1);
    assert.deepEqual(r.admit(id, 0, { address: A, port: 5000 }, 10), {
      forward: false,
      reason: 'no_allocation',
    });
    assert.deepEqual(r.sweep(), [{ id, reason: 'expired' }]);
    assert.equal(r.size, 0);

    const idle = r.allocate({ sessionId: 's2', peers: [A, B] });
    assert.ok(idle.ok);
    clock.advance(30_000);
    assert.deepEqual(r.sweep(), [{ id: idle.allocation.id, reason: 'idle' }]);
    assert.deepEqual(r.ended, { expired: 1, idle: 1, released: 0 });
  });

  test('per-session and server-wide caps, refused destinations and bad requests are refused and counted', () => {
    const clock = new ManualClock();
    const r = new RelayAllocations(clock, { maxAllocations: 3, maxPerSession: 2 });
    assert.ok(r.allocate({ sessionId: 'x', peers: [A, B] }).ok);
    assert.ok(r.allocate({ sessionId: 'x', peers: [A, B] }).ok);
    assert.deepEqual(r.allocate({ sessionId: 'x', peers: [A, B] }), { ok: false, reason: 'session_cap' });
    assert.ok(r.allocate({ sessionId: 'y', peers: [A, B] }).ok);
    assert.deepEqual(r.allocate({ sessionId: 'z', peers: [A, B] }), { ok: false, reason: 'server_cap' });
    assert.deepEqual(r.allocate({ sessionId: 'z', peers: [A, '10.0.0.1'] }), {
      ok: false,
      reason: 'private',
    });
    assert.deepEqual(r.allocate({ sessionId: 'z', peers: ['224.1.1.1', B] }), {
      ok: false,
      reason: 'multicast',
    });
    assert.deepEqual(r.allocate({ sessionId: 'z', peers: [A, B], bytesPerSecond: 0 }), {
      ok: false,
      reason: 'bad_request',
    });
    assert.deepEqual(Object.fromEntries(r.refusals), {
      session_cap: 1,
      server_cap: 1,
      private: 1,
      multicast: 1,
      bad_request: 1,
    });
    const first = r.list()[0];
    assert.ok(first && r.release(first.id));
    assert.equal(r.release(first.id), false);
    assert.ok(r.allocate({ sessionId: 'z', peers: [A, B] }).ok);
  });

  test('a requested rate and lifetime are clamped to the relay maxima', () => {
    const clock = new ManualClock();
    const r = new RelayAllocations(clock, { maxBytesPerSecond: 1000, maxLifetimeMs: 10_000 });
    const made = r.allocate({ sessionId: 's', peers: [A, B], bytesPerSecond: 1e9, lifetimeMs: 1e9 });
    assert.ok(made.ok);
    assert.equal(made.allocation.bytesPerSecond, 1000);
    assert.equal(made.allocation.expiresAtMs, 10_000);
  });
});

describe('relay admission, over random traffic', () => {
  test('never forwards more than the rate allows, and only between the two latched sources', () => {
    const source = fc.record({
      side: fc.constantFrom<0 | 1>(0, 1),
      address: fc.constantFrom(A, B, EVIL),
      port: fc.constantFrom(5000, 5001, 6000),
      bytes: fc.integer({ min: 0, max: 1500 }),
      afterMs: fc.integer({ min: 0, max: 50 }),
    });
    fc.assert(
      fc.property(
        fc.array(source, { maxLength: 400 }),
        fc.integer({ min: 1000, max: 200_000 }),
        (events, rate) => {
          const clock = new ManualClock();
          const r = new RelayAllocations(clock, { relatchAfterMs: 1_000_000 });
          const made = r.allocate({ sessionId: 's', peers: [A, B], bytesPerSecond: rate });
          assert.ok(made.ok);
          const burst = Math.max(1500, Math.round(rate * 0.25));
          const forwarded = [0, 0];
          const firstFrom: ({ address: string; port: number } | undefined)[] = [undefined, undefined];
          for (const e of events) {
            clock.advance(e.afterMs);
            const pinned = e.side === 0 ? A : B;
            if (e.address === pinned) firstFrom[e.side] ??= { address: e.address, port: e.port };
            const v = r.admit(made.allocation.id, e.side, { address: e.address, port: e.port }, e.bytes);
            if (!v.forward) continue;
            forwarded[e.side] = (forwarded[e.side] ?? 0) + e.bytes;
            // Only the first source from the pinned address is forwarded, and only to the other side's.
            assert.deepEqual({ address: e.address, port: e.port }, firstFrom[e.side]);
            assert.deepEqual(v.to, firstFrom[e.side === 0 ? 1 : 0]);
            // The token bucket: at most one burst plus the rate over the elapsed time, per direction.
            assert.ok((forwarded[e.side] ?? 0) <= burst + (clock.monotonicMs() * rate) / 1000);
          }
          const counted = Object.values(r.drops).reduce((a, b) => a + b, 0);
          const packets = made.allocation.id
            ? (r.get(made.allocation.id)?.forwardedPackets ?? [0, 0])
            : [0, 0];
          assert.equal(
            counted + (packets[0] ?? 0) + (packets[1] ?? 0),
            events.length,
            'every datagram judged once',
          );
        },
      ),
      { numRuns: 300, interruptAfterTimeLimit: 20_000 },
    );
  });
});
