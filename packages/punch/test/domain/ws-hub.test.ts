import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { SessionBroker } from '../../src/domain/broker.ts';
import { SignallingHub } from '../../src/domain/signalling.ts';
import { MemoryStore } from '../../src/domain/store.ts';
import type { TokenClaims } from '../../src/protocol/token.ts';
import { FakeLink, msg, settle } from '../hub-fakes.ts';

async function setup(options: { maxConnections?: number } = {}) {
  const clock = new ManualClock();
  const broker = new SessionBroker({ store: new MemoryStore(), clock, maxSessions: 0, tombstoneMs: 60_000 });
  await broker.start();
  const created = await broker.create({ name: 's', latency: 200, ttl: 3600 });
  assert.ok(created.ok);
  const hub = new SignallingHub({ broker, clock, healthReportMs: 0, ...options });
  const claims: TokenClaims = {
    session: 's',
    role: 'peer',
    stream: 'default',
    exp: created.session.expiresAt / 1000,
  };
  const join = (ip: string, holder: string, answersPing = true) => {
    const l = new FakeLink(ip, holder, claims, answersPing);
    assert.deepEqual(hub.attach(l, 's'), { ok: true });
    return l;
  };
  return { clock, broker, hub, join };
}

test('a slot whose holder has been gone 30 s can be taken by another peer; before that: SESSION_FULL', async () => {
  const { clock, hub, join } = await setup();
  const a = join('203.0.113.1', 'tok-a');
  const b = join('198.51.100.2', 'tok-b');
  hub.handle(a, msg({ type: 'register', port: 5000 }));
  await settle();
  hub.handle(b, msg({ type: 'register', port: 5000 }));
  await settle();
  assert.equal(a.last('peer')?.['ip'], '198.51.100.2');
  hub.detach(b);
  const c = join('192.0.2.3', 'tok-c');
  hub.handle(c, msg({ type: 'register', port: 6000 }));
  await settle();
  assert.equal(c.last('error')?.['code'], 'SESSION_FULL');
  clock.advance(29_999);
  hub.handle(c, msg({ type: 'register', port: 6000 }));
  await settle();
  assert.equal(c.sent.filter((m) => m['type'] === 'error').length, 2);
  clock.advance(1);
  hub.handle(c, msg({ type: 'register', port: 6000 }));
  await settle();
  // C takes B's slot on the stream's port; both sides get fresh coordinates.
  assert.deepEqual([c.last('peer')?.['ip'], c.last('peer')?.['localPort']], ['203.0.113.1', 5000]);
  assert.deepEqual([a.last('peer')?.['ip'], a.last('peer')?.['port']], ['192.0.2.3', 5000]);
  // B comes back with its token: its slot is gone to C, so it is refused (C is live).
  const b2 = join('198.51.100.2', 'tok-b');
  hub.handle(b2, msg({ type: 'register', port: 5000 }));
  await settle();
  assert.equal(b2.last('error')?.['code'], 'SESSION_FULL');
});

test('IPv4 and IPv6 peers are not matched: INVALID_MESSAGE, the first peer hears nothing', async () => {
  const { hub, join, broker } = await setup();
  const a = join('203.0.113.1', 'tok-a');
  const b = join('2001:db8::7', 'tok-b');
  hub.handle(a, msg({ type: 'register', port: 5000 }));
  await settle();
  const before = a.sent.length;
  hub.handle(b, msg({ type: 'register', port: 5000 }));
  await settle();
  assert.match(String(b.last('error')?.['message']), /address family/);
  assert.equal(b.last('error')?.['code'], 'INVALID_MESSAGE');
  assert.equal(a.sent.length, before);
  assert.equal(broker.get('s')?.streams[0]?.peerB, null);
});

test('connections per session are bounded; peer sockets that never register do not fill the cap', async () => {
  const { hub, join } = await setup({ maxConnections: 3 });
  // Unregistered peer connections (bounded by the io layer's registration deadline) are not counted.
  for (let i = 0; i < 5; i++) join(`198.51.100.${i + 1}`, `idle${i}`);
  const admin = (i: number) =>
    new FakeLink(`192.0.2.${i}`, `adm${i}`, { session: 's', role: 'admin', stream: null, exp: 0 });
  const a = join('192.0.2.100', 'peer-a');
  hub.handle(a, msg({ type: 'register', port: 5000 }));
  await settle();
  assert.equal(hub.holdsSlot(a), true);
  for (let i = 0; i < 2; i++) assert.equal(hub.attach(admin(i + 1), 's').ok, true);
  const extra = admin(9);
  const r = hub.attach(extra, 's');
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.code, 'SESSION_FULL');
  assert.deepEqual(extra.sent, []);
});

test('a peer that does not answer the probe is replaced; one that answers keeps its slot', async () => {
  const { hub, join } = await setup();
  const frozen = join('203.0.113.1', 'tok-a', false);
  const b = join('198.51.100.2', 'tok-b');
  hub.handle(frozen, msg({ type: 'register', port: 5000 }));
  hub.handle(b, msg({ type: 'register', port: 5000 }));
  await settle();
  const again = join('203.0.113.9', 'tok-a');
  hub.handle(again, msg({ type: 'register', port: 5000 }));
  await settle();
  await settle();
  assert.equal(frozen.ended, 'replaced');
  assert.equal(again.last('peer')?.['ip'], '198.51.100.2');
  assert.equal(b.last('peer')?.['ip'], '203.0.113.9');
  const dup = join('203.0.113.10', 'tok-a');
  hub.handle(dup, msg({ type: 'register', port: 5000 }));
  await settle();
  await settle();
  assert.equal(again.ended, null);
  assert.equal(dup.last('error')?.['code'], 'SESSION_FULL');
});

test('health_report: at most one per second per session, the later reports coalesced into the next one', async () => {
  const clock = new ManualClock();
  const broker = new SessionBroker({ store: new MemoryStore(), clock, maxSessions: 0, tombstoneMs: 60_000 });
  const created = await broker.create({ name: 'h', latency: 200, ttl: 3600 });
  assert.ok(created.ok);
  const hub = new SignallingHub({ broker, clock });
  const exp = created.session.expiresAt / 1000;
  const admin = new FakeLink('192.0.2.1', 'adm', { session: 'h', role: 'admin', stream: null, exp });
  const peer = new FakeLink('192.0.2.2', 'p', { session: 'h', role: 'peer', stream: 'default', exp });
  hub.attach(admin, 'h');
  hub.attach(peer, 'h');
  hub.handle(peer, msg({ type: 'register', port: 5000, role: 'receiver' }));
  await settle();
  const reports = () => admin.sent.filter((m) => m['type'] === 'health_report');
  for (const rtt of [10, 150, 250])
    hub.handle(peer, msg({ type: 'health', rtt, retransmit: 0, bitrate: 1e6 }));
  assert.equal(reports().length, 1);
  assert.equal(
    (reports()[0]?.['streams'] as Record<string, { status: string }>)['default']?.status,
    'healthy',
  );
  clock.advance(999);
  assert.equal(reports().length, 1);
  clock.advance(1);
  assert.equal(reports().length, 2);
  const last = (reports()[1]?.['streams'] as Record<string, { rtt: number; status: string }>)['default'];
  assert.deepEqual([last?.rtt, last?.status], [250, 'critical']);
  assert.ok(!peer.sent.some((m) => m['type'] === 'health_report'));
  const { at, ...health } = broker.get('h')?.streams[0]?.health ?? { at: NaN };
  assert.deepEqual(health, { rtt: 250, retransmit: 0, bitrate: 1e6 });
  assert.ok(Number.isFinite(at) && at <= clock.now());
});

test('two peers that register at the same moment both get a slot (one save still pending is no refusal)', async () => {
  const { hub, join } = await setup();
  const a = join('203.0.113.1', 'tok-a');
  const b = join('198.51.100.2', 'tok-b');
  // No wait between the two: A's claim is still being saved when B's register arrives.
  hub.handle(a, msg({ type: 'register', port: 5000 }));
  hub.handle(b, msg({ type: 'register', port: 5000 }));
  await settle();
  await settle();
  assert.deepEqual(
    b.sent.filter((m) => m['type'] === 'error'),
    [],
  );
  assert.equal(a.last('peer')?.['ip'], '198.51.100.2');
  assert.equal(b.last('peer')?.['ip'], '203.0.113.1');
  assert.equal(hub.holdsSlot(a) && hub.holdsSlot(b), true);
});

/** Two peers matched on stream `default`, A reporting SRT connected. */
async function linkedPair() {
  const env = await setup();
  const a = env.join('203.0.113.1', 'tok-a');
  const b = env.join('198.51.100.2', 'tok-b');
  env.hub.handle(a, msg({ type: 'register', port: 5000, meta: { clientId: 'dev-a' } }));
  await settle();
  env.hub.handle(b, msg({ type: 'register', port: 5000, meta: { clientId: 'dev-b' } }));
  await settle();
  env.hub.handle(a, msg({ type: 'status', srt: 'connected' }));
  await settle();
  const stream = env.broker.get('s')?.streams[0];
  assert.ok(stream);
  assert.equal(stream.state, 'connected');
  return { ...env, a, b, stream };
}

test('state from media: the partner of a present end with fresh health stays connected; stale health ends it', async () => {
  const { clock, hub, broker, a, b, stream } = await linkedPair();
  hub.handle(a, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 4e6 }));
  hub.detach(b);
  assert.equal(stream.state, 'connected', 'signalling lost, media reported by the other end');
  assert.equal(broker.mediaWithoutSignalling(stream, 'b'), true);
  // Fresh health keeps it, past the 30 s grace: the slot is neither released nor open to a takeover.
  for (let i = 0; i < 8; i++) {
    clock.advance(5_000);
    hub.handle(a, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 4e6 }));
    await settle();
  }
  assert.equal(stream.state, 'connected');
  assert.ok(stream.peerB, 'slot kept past the grace while media flows');
  const c = new FakeLink('192.0.2.3', 'tok-c', b.claims);
  hub.attach(c, 's');
  hub.handle(c, msg({ type: 'register', port: 6000 }));
  await settle();
  assert.equal(c.last('error')?.['code'], 'SESSION_FULL');
  // The present end stops reporting: within 10 s (+ the 5 s check) the stream waits.
  clock.advance(15_000);
  await settle();
  assert.equal(stream.state, 'waiting');
});

test('without fresh health from the present end, a departed partner makes the stream wait at once', async () => {
  const { hub, b, stream } = await linkedPair();
  hub.detach(b);
  assert.equal(stream.state, 'waiting');
});

test('a slot whose socket is gone is taken back at once by its token, whatever the clientId', async () => {
  const { hub, join, a, b, stream } = await linkedPair();
  hub.detach(b);
  const b2 = join('198.51.100.2', 'tok-b');
  hub.handle(b2, msg({ type: 'register', port: 5000, meta: { clientId: 'another-process' } }));
  await settle();
  assert.equal(b2.last('error'), undefined);
  assert.equal(b2.last('peer')?.['ip'], '203.0.113.1');
  assert.equal(stream.peerB?.clientId, 'another-process');
  // The start after the partner came back tells A (whose SRT runs) that B's does not run yet.
  hub.handle(a, msg({ type: 'ready' }));
  hub.handle(b2, msg({ type: 'ready' }));
  assert.deepEqual(a.last('start'), { type: 'start', stream: 'default', partnerSrt: null });
  assert.deepEqual(b2.last('start'), { type: 'start', stream: 'default' });
});

test('past its TTL a session with media admits no new peer, but its holders take their slots back', async () => {
  const { clock, hub, broker, join, a, b, stream } = await linkedPair();
  hub.handle(a, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 4e6 }));
  clock.advance(3_600_000);
  await settle();
  const session = broker.get('s');
  assert.ok(session);
  assert.equal(broker.isOvertime(session), true);
  hub.handle(a, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 4e6 }));
  hub.detach(b);
  const b2 = join('198.51.100.2', 'tok-b');
  hub.handle(b2, msg({ type: 'register', port: 5000 }));
  await settle();
  assert.equal(b2.last('error'), undefined, 'the holder is back');
  assert.equal(stream.state, 'connected');
  hub.detach(b2);
  clock.advance(31_000);
  await settle();
  hub.handle(a, msg({ type: 'health', rtt: 20, retransmit: 0, bitrate: 4e6 }));
  const c = join('192.0.2.3', 'tok-c');
  hub.handle(c, msg({ type: 'register', port: 6000 }));
  await settle();
  assert.equal(c.last('error')?.['code'], 'SESSION_EXPIRED');
});
