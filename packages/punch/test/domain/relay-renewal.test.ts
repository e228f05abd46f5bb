import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { SessionBroker } from '../../src/domain/broker.ts';
import { RelayAllocations } from '../../src/domain/relay-allocations.ts';
import { relayLifetimeMs, renewAfterMs } from '../../src/domain/relay-renewal.ts';
import { SignallingHub, type RelayPort } from '../../src/domain/signalling.ts';
import { MemoryStore } from '../../src/domain/store.ts';
import type { TokenClaims } from '../../src/protocol/token.ts';
import { FakeLink, msg, settle } from '../hub-fakes.ts';

/**
 * Renewal of relay allocations (docs/relay.md "Renewal"), on a ManualClock: the lifetime asked for, the
 * relay's allocation extended, and the owning hub renewing a live session's allocation at three quarters
 * of its lifetime, again and again, until the session closes.
 */
const H = 3_600_000;

test('the lifetime asked for: the later of the usual lifetime and the session expiry, at most the maximum', () => {
  const base = { now: 0, lifetimeMs: 6 * H, maxLifetimeMs: 24 * H };
  assert.equal(relayLifetimeMs({ ...base, sessionExpiresAt: 1 * H }), 6 * H);
  assert.equal(relayLifetimeMs({ ...base, sessionExpiresAt: 10 * H }), 10 * H);
  assert.equal(relayLifetimeMs({ ...base, sessionExpiresAt: 30 * H }), 24 * H);
  // Overtime: the session's expiry is past, the link still carries media: the usual lifetime.
  assert.equal(relayLifetimeMs({ ...base, sessionExpiresAt: -2 * H }), 6 * H);
  assert.equal(renewAfterMs(6 * H), 4.5 * H);
});

test("the relay's allocation: renew extends from now, never shortens, is bounded, and ends only after the new expiry", () => {
  const clock = new ManualClock();
  const relay = new RelayAllocations(clock, { defaultLifetimeMs: 10_000, maxLifetimeMs: 60_000 });
  const made = relay.allocate({ sessionId: 's', peers: ['203.0.113.1', '198.51.100.2'] });
  assert.ok(made.ok);
  const id = made.allocation.id;
  const start = clock.monotonicMs();
  clock.advance(7_000);
  assert.equal(relay.renew(id, 10_000), start + 17_000);
  assert.equal(relay.renew(id, 1_000), start + 17_000, 'not shortened');
  assert.equal(relay.renew(id, 10 * 60_000), start + 67_000, 'bounded by the maximum');
  assert.equal(relay.renew('nope', 10_000), undefined);
  assert.equal(relay.renewed, 3);
  // Traffic keeps it from idling; past the first lifetime it is still there.
  clock.advance(20_000);
  // (Past the first lifetime it would be `no_allocation`; side 1 has not sent, so nowhere to forward yet.)
  assert.deepEqual(relay.admit(id, 0, { address: '203.0.113.1', port: 5000 }, 100), {
    forward: false,
    reason: 'peer_not_latched',
  });
  assert.deepEqual(relay.sweep(), []);
  assert.ok(relay.get(id));
});

class RenewingRelay implements RelayPort {
  readonly renewed: [string, number][] = [];
  readonly lifetimes: (number | undefined)[] = [];
  async allocate(req: Parameters<RelayPort['allocate']>[0]) {
    await Promise.resolve();
    this.lifetimes.push(req.lifetimeMs);
    return {
      ok: true as const,
      id: `R1.r${this.lifetimes.length}`,
      address: '192.0.2.50',
      ports: [40000, 40001] as const,
    };
  }
  release(): void {}
  renew(id: string, lifetimeMs: number): void {
    this.renewed.push([id, lifetimeMs]);
  }
}

test('the owning hub renews a live relayed stream every three quarters of its lifetime, and stops when the session closes', async () => {
  const clock = new ManualClock();
  const broker = new SessionBroker({ store: new MemoryStore(), clock, maxSessions: 0, tombstoneMs: 60_000 });
  await broker.start();
  assert.ok((await broker.create({ name: 's', latency: 200, ttl: 10 * 3600 })).ok);
  const relay = new RenewingRelay();
  const hub = new SignallingHub({ broker, clock, relay, relayLifetimeMs: 6 * H });
  const claims: TokenClaims = { session: 's', role: 'peer', stream: 'default', exp: 0 };
  const [a, b] = ['203.0.113.1', '198.51.100.2'].map((ip, k) => {
    const l = new FakeLink(ip, `tok-${k}`, claims);
    assert.deepEqual(hub.attach(l, 's'), { ok: true });
    return l;
  }) as [FakeLink, FakeLink];
  hub.handle(a, msg({ type: 'register', port: 5000, role: 'sender' }));
  await settle();
  hub.handle(b, msg({ type: 'register', port: 5000, role: 'receiver' }));
  await settle();
  for (const l of [a, b]) hub.handle(l, msg({ type: 'ready' }));
  for (const l of [a, b]) hub.handle(l, msg({ type: 'status', srt: 'connecting' }));
  await settle();
  clock.advance(8_000);
  await settle();
  await settle();
  // A 10 h session: its allocation is asked to live to the session's expiry (10 h less the 8 s window).
  assert.deepEqual(relay.lifetimes, [10 * H - 8_000]);
  hub.handle(b, msg({ type: 'status', srt: 'connected' }));
  await settle();

  const renewAt = renewAfterMs(10 * H - 8_000);
  clock.advance(renewAt - 1);
  await settle();
  assert.deepEqual(relay.renewed, [], 'not before three quarters of the lifetime');
  clock.advance(1);
  await settle();
  // 2.5 h of the session left: the usual lifetime (6 h) is the longer.
  assert.deepEqual(relay.renewed, [['R1.r1', 6 * H]]);
  clock.advance(renewAfterMs(6 * H));
  await settle();
  assert.deepEqual(relay.renewed, [
    ['R1.r1', 6 * H],
    ['R1.r1', 6 * H],
  ]);

  // Closed: the next renewal does not happen.
  await broker.close('s', 'admin_closed');
  await settle();
  clock.advance(renewAfterMs(6 * H));
  await settle();
  assert.equal(relay.renewed.length, 2);
  hub.stop();
});
