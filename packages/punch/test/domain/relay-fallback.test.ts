import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { SessionBroker } from '../../src/domain/broker.ts';
import { pathOf } from '../../src/domain/session.ts';
import { SignallingHub, type RelayPort } from '../../src/domain/signalling.ts';
import { MemoryStore } from '../../src/domain/store.ts';
import type { RelayPathReport } from '../../src/protocol/relay-path-view.ts';
import type { TokenClaims } from '../../src/protocol/token.ts';
import { FakeLink, msg, settle } from '../hub-fakes.ts';

/**
 * Detection of a failed rendezvous and the move to the relay (docs/relay.md "Detection"), in the domain:
 * the hub and the broker on a ManualClock, links that record what they are sent, and a relay port that
 * records its allocations (the UDP relay itself is tested in relay-udp.test.ts and end to end in
 * relay-fallback-e2e.test.ts).
 */
const IP_A = '203.0.113.1';
const IP_B = '198.51.100.2';
const RELAY = '192.0.2.50';

class FakeRelay implements RelayPort {
  readonly allocated: Parameters<RelayPort['allocate']>[0][] = [];
  readonly released: string[] = [];
  refuse: string | null = null;
  /** Prepended to the ids: `<relay>.` names the relay an allocation is on (relays on Redis). */
  idPrefix = '';
  /** The relay port of slot a (slot b's is the next one). */
  portBase = 40000;
  async allocate(req: Parameters<RelayPort['allocate']>[0]) {
    await Promise.resolve();
    if (this.refuse !== null) return { ok: false as const, reason: this.refuse };
    this.allocated.push(req);
    return {
      ok: true as const,
      id: `${this.idPrefix}r${this.allocated.length}`,
      address: RELAY,
      ports: [this.portBase, this.portBase + 1] as const,
    };
  }
  release(id: string): void {
    this.released.push(id);
  }
  /** What the relay measured, by allocation id (docs/relay.md "What the relay measures"). */
  readonly measured = new Map<string, RelayPathReport>();
  figures(id: string): RelayPathReport | undefined {
    return this.measured.get(id);
  }
}

async function setup(options: { relayAfterMs?: number } = {}) {
  const clock = new ManualClock();
  const broker = new SessionBroker({ store: new MemoryStore(), clock, maxSessions: 0, tombstoneMs: 60_000 });
  await broker.start();
  const created = await broker.create({ name: 's', latency: 200, ttl: 3600 });
  assert.ok(created.ok);
  const relay = new FakeRelay();
  const fallbacks: [string, string | null][] = [];
  const logged: string[] = [];
  const log = {
    info: (_o: unknown, m?: string) => void logged.push(String(m)),
    warn: (_o: unknown, m?: string) => void logged.push(String(m)),
    error: (_o: unknown, m?: string) => void logged.push(String(m)),
  };
  const hub = new SignallingHub({
    broker,
    clock,
    relay,
    ...options,
    log: log as never,
    onRelayFallback: (outcome, reason) => fallbacks.push([outcome, reason]),
  });
  const claims: TokenClaims = { session: 's', role: 'peer', stream: 'default', exp: 0 };
  const join = (ip: string, holder: string) => {
    const l = new FakeLink(ip, holder, claims);
    assert.deepEqual(hub.attach(l, 's'), { ok: true });
    return l;
  };
  const stream = () => broker.get('s')?.streams[0];
  /** Both peers registered, `ready`, `start`ed, each reporting `connecting` (an agent's first status). */
  const started = async () => {
    const a = join(IP_A, 'tok-a');
    const b = join(IP_B, 'tok-b');
    hub.handle(a, msg({ type: 'register', port: 5000, role: 'sender' }));
    await settle();
    hub.handle(b, msg({ type: 'register', port: 5000, role: 'receiver' }));
    await settle();
    for (const l of [a, b]) hub.handle(l, msg({ type: 'ready' }));
    assert.ok(a.last('start') && b.last('start'));
    for (const l of [a, b]) hub.handle(l, msg({ type: 'status', srt: 'connecting' }));
    await settle();
    return { a, b };
  };
  return { clock, broker, hub, relay, fallbacks, logged, join, stream, started };
}

test('no connected within the window after start: the stream moves to the relay, peers get its address and their ports', async () => {
  const { clock, broker, relay, fallbacks, logged, stream, started, hub } = await setup();
  const { a, b } = await started();
  clock.advance(7_999);
  await settle();
  assert.equal(relay.allocated.length, 0, 'not before the window ends');
  assert.equal(broker.get('s')?.state, 'READY');
  clock.advance(1);
  await settle();
  await settle();
  // The session's expiry (1 h) is nearer than the relay's usual lifetime (6 h): that is asked for.
  assert.deepEqual(relay.allocated, [
    { sessionId: broker.get('s')?.id, peers: [IP_A, IP_B], lifetimeMs: 6 * 3_600_000 },
  ]);
  assert.equal(broker.get('s')?.state, 'RELAYING');
  assert.equal(stream()?.state, 'relaying');
  assert.equal(pathOf(stream()!), 'relayed');
  assert.deepEqual(fallbacks, [['allocated', null]]);
  assert.ok(logged.some((m) => /no SRT connection within the detection window/.test(m)));
  // Each peer's partner is now the relay, at its own relay port; the local port stays the stream's.
  assert.deepEqual(
    [a.last('peer')?.['ip'], a.last('peer')?.['port'], a.last('peer')?.['localPort']],
    [RELAY, 40000, 5000],
  );
  assert.deepEqual(
    [b.last('peer')?.['ip'], b.last('peer')?.['port'], b.last('peer')?.['localPort']],
    [RELAY, 40001, 5000],
  );
  assert.deepEqual(a.last('session'), {
    type: 'session',
    state: 'RELAYING',
    streams: { default: { state: 'relaying', peers: 2, path: 'relayed' } },
    connected: 0,
    total: 1,
  });
  // A new pair of `ready`s starts the rendezvous towards the relay.
  const startsBefore = a.sent.filter((m) => m['type'] === 'start').length;
  hub.handle(a, msg({ type: 'ready' }));
  assert.equal(a.sent.filter((m) => m['type'] === 'start').length, startsBefore, 'start waits for both');
  hub.handle(b, msg({ type: 'ready' }));
  assert.equal(a.sent.filter((m) => m['type'] === 'start').length, startsBefore + 1);
  // A `disconnected` while on the relay keeps the stream relaying (never `ready` with a relay held).
  hub.handle(a, msg({ type: 'status', srt: 'disconnected' }));
  await settle();
  assert.equal(stream()?.state, 'relaying');
  // SRT up over the relay: CONNECTED, path relayed; no second allocation after the new `start`.
  hub.handle(b, msg({ type: 'status', srt: 'connected' }));
  await settle();
  assert.equal(broker.get('s')?.state, 'CONNECTED');
  assert.equal(stream()?.state, 'connected');
  assert.equal(pathOf(stream()!), 'relayed');
  clock.advance(60_000);
  await settle();
  assert.equal(relay.allocated.length, 1);
  // The allocation ends with the session.
  assert.ok((await broker.close('s', 'admin_closed')).ok);
  assert.deepEqual(relay.released, ['r1']);
});

test('a peer reporting connected within the window, or a client that never reports its SRT state: no relay', async () => {
  {
    const { clock, relay, started, hub, stream } = await setup();
    const { a } = await started();
    clock.advance(3_000);
    hub.handle(a, msg({ type: 'status', srt: 'connected' }));
    await settle();
    clock.advance(30_000);
    await settle();
    assert.equal(relay.allocated.length, 0);
    assert.equal(pathOf(stream()!), 'direct');
  }
  {
    // Spec clients: coordinates and `ready` only, never a `status`. The broker cannot tell a failure.
    const { clock, relay, join, hub, broker } = await setup();
    const a = join(IP_A, 'tok-a');
    const b = join(IP_B, 'tok-b');
    hub.handle(a, msg({ type: 'register', port: 5000 }));
    await settle();
    hub.handle(b, msg({ type: 'register', port: 5000 }));
    await settle();
    for (const l of [a, b]) hub.handle(l, msg({ type: 'ready' }));
    clock.advance(60_000);
    await settle();
    assert.equal(relay.allocated.length, 0);
    assert.equal(broker.get('s')?.state, 'READY');
    assert.equal(a.sent.filter((m) => m['type'] === 'peer').length, 1, 'no second peer');
  }
});

test('a direct link that was connected and goes down for good moves to the relay after the window; one that comes back does not', async () => {
  {
    const { clock, relay, started, hub, stream, broker } = await setup();
    const { a, b } = await started();
    hub.handle(a, msg({ type: 'status', srt: 'connected' }));
    await settle();
    clock.advance(60_000);
    await settle();
    assert.equal(relay.allocated.length, 0, 'a link that is up is never moved');
    assert.equal(pathOf(stream()!), 'direct');
    // The NAT rebinds: both sides see SRT drop, restart it, and keep reporting `connecting`.
    for (const l of [a, b]) hub.handle(l, msg({ type: 'status', srt: 'disconnected' }));
    await settle();
    for (const l of [a, b]) hub.handle(l, msg({ type: 'status', srt: 'connecting' }));
    await settle();
    assert.equal(stream()?.state, 'ready');
    clock.advance(7_999);
    await settle();
    assert.equal(relay.allocated.length, 0, 'not before the window ends');
    clock.advance(1);
    await settle();
    await settle();
    assert.equal(relay.allocated.length, 1);
    assert.equal(broker.get('s')?.state, 'RELAYING');
    assert.equal(a.last('peer')?.['ip'], RELAY);
    assert.equal(b.last('peer')?.['ip'], RELAY);
  }
  {
    // A drop that the peers recover from directly within the window: the link stays direct.
    const { clock, relay, started, hub, stream } = await setup();
    const { a, b } = await started();
    hub.handle(a, msg({ type: 'status', srt: 'connected' }));
    await settle();
    hub.handle(a, msg({ type: 'status', srt: 'disconnected' }));
    hub.handle(b, msg({ type: 'status', srt: 'disconnected' }));
    await settle();
    clock.advance(2_000);
    hub.handle(b, msg({ type: 'status', srt: 'connected' }));
    await settle();
    clock.advance(60_000);
    await settle();
    assert.equal(relay.allocated.length, 0);
    assert.equal(stream()?.state, 'connected');
    assert.equal(pathOf(stream()!), 'direct');
  }
});

test('the window is configurable; a refused allocation is shown with its reason and the stream stays direct', async () => {
  const { clock, relay, started, broker, stream, fallbacks } = await setup({ relayAfterMs: 3_000 });
  relay.refuse = 'server_cap';
  const { a } = await started();
  const peers = a.sent.filter((m) => m['type'] === 'peer').length;
  clock.advance(3_000);
  await settle();
  await settle();
  assert.deepEqual(fallbacks, [['refused', 'server_cap']]);
  assert.equal(broker.get('s')?.state, 'READY');
  assert.equal(stream()?.state, 'ready');
  assert.deepEqual([stream()?.relay?.state, stream()?.relay?.reason], ['refused', 'server_cap']);
  assert.equal(pathOf(stream()!), 'direct');
  assert.equal(a.sent.filter((m) => m['type'] === 'peer').length, peers, 'no new coordinates');
});

test('a departed peer whose slot is released frees the allocation; the relay ending one is shown', async () => {
  {
    const { clock, relay, started, hub, stream } = await setup();
    const { b } = await started();
    clock.advance(8_000);
    await settle();
    await settle();
    assert.equal(relay.allocated.length, 1);
    hub.detach(b);
    clock.advance(30_000);
    await settle();
    await settle();
    assert.deepEqual(relay.released, ['r1']);
    assert.equal(stream()?.relay ?? null, null);
    assert.equal(stream()?.state, 'waiting');
  }
  {
    const { clock, relay, started, hub, stream, broker } = await setup();
    await started();
    clock.advance(8_000);
    await settle();
    await settle();
    hub.relayEnded('r1', 'idle');
    await settle();
    assert.deepEqual([stream()?.relay?.state, stream()?.relay?.reason], ['ended', 'idle']);
    assert.equal(stream()?.state, 'ready');
    assert.equal(broker.get('s')?.state, 'READY');
    assert.equal(pathOf(stream()!), 'direct');
    assert.deepEqual(relay.released, [], 'an allocation the relay ended is not released again');
  }
});

test('a peer back from another address leaves the relay pinned to the old one; the next window allocates anew', async () => {
  const { clock, relay, started, hub, join, stream } = await setup();
  const { a, b } = await started();
  clock.advance(8_000);
  await settle();
  await settle();
  assert.deepEqual(relay.allocated[0]?.peers, [IP_A, IP_B]);
  // B's network changed: the same token reconnects from another address.
  hub.detach(b);
  const moved = '198.51.100.77';
  const b2 = join(moved, 'tok-b');
  hub.handle(b2, msg({ type: 'register', port: 5000, role: 'receiver' }));
  await settle();
  assert.deepEqual(relay.released, ['r1']);
  assert.equal(stream()?.relay ?? null, null);
  assert.equal(stream()?.state, 'ready');
  // Both sides get direct coordinates again (the relay could not admit B's new address).
  assert.deepEqual([a.last('peer')?.['ip'], a.last('peer')?.['port']], [moved, 5000]);
  assert.deepEqual([b2.last('peer')?.['ip'], b2.last('peer')?.['port']], [IP_A, 5000]);
  for (const l of [a, b2]) hub.handle(l, msg({ type: 'ready' }));
  hub.handle(b2, msg({ type: 'status', srt: 'connecting' }));
  await settle();
  clock.advance(8_000);
  await settle();
  await settle();
  assert.deepEqual(relay.allocated[1]?.peers, [IP_A, moved]);
  assert.equal(stream()?.state, 'relaying');
  assert.deepEqual([b2.last('peer')?.['ip'], b2.last('peer')?.['port']], [RELAY, 40001]);
});

test('a lost relay: its streams are re-allocated and both peers get the new coordinates; with none left, direct again', async () => {
  const { clock, broker, hub, relay, fallbacks, logged, stream, started } = await setup();
  relay.idPrefix = 'R1.';
  const { a, b } = await started();
  clock.advance(8_000);
  await settle();
  await settle();
  assert.equal(stream()?.relay?.id, 'R1.r1');
  const peersBefore = [a, b].map((l) => l.sent.filter((m) => m['type'] === 'peer').length);
  // Another relay's loss changes nothing.
  hub.relayLost('R9');
  await settle();
  assert.equal(relay.allocated.length, 1);
  relay.idPrefix = 'R2.';
  relay.portBase = 41000;
  hub.relayLost('R1');
  await settle();
  await settle();
  assert.equal(relay.allocated.length, 2);
  assert.equal(stream()?.relay?.id, 'R2.r2');
  assert.equal(pathOf(stream()!), 'relayed');
  assert.deepEqual(fallbacks.at(-1), ['allocated', 'relay_lost']);
  assert.ok(logged.some((m) => /relay was lost; re-allocating/.test(m)));
  assert.deepEqual(
    [a, b].map((l) => l.sent.filter((m) => m['type'] === 'peer').length),
    peersBefore.map((n) => n + 1),
  );
  assert.deepEqual(
    [a.last('peer')?.['ip'], a.last('peer')?.['port'], b.last('peer')?.['port']],
    [RELAY, 41000, 41001],
  );
  // The second relay is lost and none takes the stream: shown as ended (relay_lost), peers sent direct.
  relay.refuse = 'no_relay';
  hub.relayLost('R2');
  await settle();
  await settle();
  assert.equal(stream()?.relay?.state, 'ended');
  assert.equal(stream()?.relay?.reason, 'relay_lost');
  assert.equal(pathOf(stream()!), 'direct');
  assert.deepEqual([a.last('peer')?.['ip'], b.last('peer')?.['ip']], [IP_B, IP_A]);
  assert.deepEqual(fallbacks.at(-1), ['refused', 'no_relay']);
  assert.equal(broker.get('s')?.state, 'READY');
});

test('the cap asked for: the declared meta.bitrate with headroom; on a re-allocation the measured rate; else none (the relay default)', async () => {
  // Declared by the sender in `register` (docs/relay.md "The cap per session"): 8 Mbit/s x 1.5 / 8.
  const declared = await setup();
  const a = declared.join(IP_A, 'tok-a');
  const b = declared.join(IP_B, 'tok-b');
  declared.hub.handle(a, msg({ type: 'register', port: 5000, role: 'sender', meta: { bitrate: 8_000_000 } }));
  await settle();
  declared.hub.handle(b, msg({ type: 'register', port: 5000, role: 'receiver' }));
  await settle();
  for (const l of [a, b]) declared.hub.handle(l, msg({ type: 'ready' }));
  for (const l of [a, b]) declared.hub.handle(l, msg({ type: 'status', srt: 'connecting' }));
  await settle();
  declared.clock.advance(8_000);
  await settle();
  await settle();
  assert.equal(declared.relay.allocated[0]?.bytesPerSecond, 1_500_000);

  // Nothing declared: the first allocation asks for no rate (the link never carried media, so nothing
  // measured counts); moved off a lost relay, the rate the peers report on the running link does.
  const measured = await setup();
  const peers = await measured.started();
  measured.relay.idPrefix = 'R1.';
  measured.clock.advance(8_000);
  await settle();
  await settle();
  assert.equal(measured.relay.allocated.length, 1);
  assert.equal(measured.relay.allocated[0]?.bytesPerSecond, undefined);
  measured.hub.handle(peers.b, msg({ type: 'status', srt: 'connected' }));
  measured.hub.handle(peers.a, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 4_000_000 }));
  measured.hub.handle(peers.b, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 3_900_000 }));
  await settle();
  measured.relay.idPrefix = 'R2.';
  measured.hub.relayLost('R1');
  await settle();
  await settle();
  assert.equal(measured.relay.allocated.length, 2);
  assert.equal(measured.relay.allocated[1]?.bytesPerSecond, 750_000);
});

test("health_report carries the relay's figures while the stream is relayed, and not after", async () => {
  const { clock, broker, hub, relay, stream, started } = await setup();
  const { b } = await started();
  clock.advance(8_000);
  await settle();
  await settle();
  const id = stream()?.relay?.id ?? '';
  const leg = { packets: 0, lost: 0, retransmitted: 0, reordered: 0 };
  const none = { rttMs: null, rttVarMs: null, senderLegMs: null, receiverLegMs: null, rttAgeMs: null };
  relay.measured.set(id, {
    at: clock.now(),
    directions: [
      {
        ...leg,
        packets: 500,
        lost: 3,
        rttMs: 40,
        rttVarMs: 2,
        senderLegMs: 15,
        receiverLegMs: 25,
        rttAgeMs: 5,
      },
      { ...leg, ...none },
    ],
  });
  const exp = (broker.get('s')?.expiresAt ?? 0) / 1000;
  const admin = new FakeLink('192.0.2.9', 'adm', { session: 's', role: 'admin', stream: null, exp });
  hub.attach(admin, 's');
  hub.handle(b, msg({ type: 'status', srt: 'connected' }));
  hub.handle(b, msg({ type: 'health', rtt: 40, retransmit: 0, bitrate: 4e6 }));
  await settle();
  const entry = (admin.last('health_report')?.['streams'] as Record<string, Record<string, unknown>>)[
    'default'
  ];
  assert.equal(entry?.['path'], 'relayed');
  assert.deepEqual(entry?.['relay'], {
    at: new Date(clock.now()).toISOString(),
    age: 0,
    stale: false,
    a_to_b: {
      packets: 500,
      lost_upstream: 3,
      retransmitted: 0,
      rtt_ms: 40,
      rtt_var_ms: 2,
      sender_leg_ms: 15,
      receiver_leg_ms: 25,
      rtt_age: 0,
    },
    b_to_a: {
      packets: 0,
      lost_upstream: 0,
      retransmitted: 0,
      rtt_ms: null,
      rtt_var_ms: null,
      sender_leg_ms: null,
      receiver_leg_ms: null,
      rtt_age: null,
    },
  });
  // Off the relay (the relay ended the allocation): no figures, no path.
  hub.relayEnded(id, 'idle');
  await settle();
  clock.advance(1_000);
  hub.handle(b, msg({ type: 'health', rtt: 40, retransmit: 0, bitrate: 4e6 }));
  await settle();
  const after = (admin.last('health_report')?.['streams'] as Record<string, Record<string, unknown>>)[
    'default'
  ];
  assert.equal(after?.['relay'], undefined);
  assert.equal(after?.['path'], undefined);
});
