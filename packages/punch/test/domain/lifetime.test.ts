import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core/testing';
import { SessionBroker } from '../../src/domain/broker.ts';
import { MemoryStore } from '../../src/domain/store.ts';

/**
 * README "Lifetime" on the domain, with a manual clock and no sockets: the TTL ends admission, never a link
 * that a present peer reports `connected`; such a session closes 5 s after both peers left, or 30 s after
 * the last present peer stopped reporting media; an extension re-arms the expiry and admits again; a broker
 * restarted past the TTL gives claimed sessions 30 s to come back.
 */
const claim = (ip: string) => ({ ip, port: 9000, label: '', role: null, meta: {}, clientId: null });
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

async function linked(ttl = 10) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const store = new MemoryStore();
  const broker = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
  await broker.start();
  const closed: string[] = [];
  broker.subscribe((e) => {
    if (e.type === 'session_closed') closed.push(e.reason);
  });
  assert.ok((await broker.create({ name: 'show', latency: 200, ttl })).ok);
  assert.ok((await broker.claim('show', undefined, claim('198.51.100.1'))).ok);
  assert.ok((await broker.claim('show', undefined, claim('198.51.100.2'))).ok);
  assert.ok((await broker.reportStatus('show', 'default', 'connected', 'b')).ok);
  const session = broker.get('show');
  assert.ok(session);
  return { clock, store, broker, closed, session };
}

/** An overtime session whose present peer stops its media (the 30 s idle close armed); both leave `leaveAfterMs` later. */
async function mediaStoppedThenLeft(leaveAfterMs: number) {
  const l = await linked();
  l.clock.advance(10_000);
  await settle();
  assert.ok((await l.broker.reportStatus('show', 'default', 'disconnected', 'b')).ok);
  l.clock.advance(leaveAfterMs);
  await settle();
  l.broker.markAbsent('show', 'default', 'a');
  l.broker.markAbsent('show', 'default', 'b');
  return l;
}

describe('session lifetime (README "Lifetime")', () => {
  test('past the TTL a connected session stays open, admits nobody new, and closes 5 s after both left', async () => {
    const { clock, broker, closed, session } = await linked();
    assert.equal(broker.admits(session), true);
    clock.advance(10_000);
    await settle();
    assert.deepEqual(closed, [], 'not closed at the TTL while media flows');
    assert.equal(session.state, 'CONNECTED');
    assert.equal(broker.isOvertime(session), true);
    assert.equal(broker.admits(session), false);
    clock.advance(3_600_000);
    await settle();
    assert.deepEqual(closed, [], 'an hour later, media still flowing: still open');
    broker.markAbsent('show', 'default', 'a');
    broker.markAbsent('show', 'default', 'b');
    clock.advance(4_900);
    await settle();
    assert.deepEqual(closed, []);
    clock.advance(200);
    await settle();
    assert.deepEqual(closed, ['ttl_expired']);
    assert.equal(session.state, 'CLOSED');
  });

  test('a present peer that stops reporting media closes the overtime session 30 s later; media back cancels it', async () => {
    const { clock, broker, closed, session } = await linked();
    clock.advance(10_000);
    await settle();
    assert.ok((await broker.reportStatus('show', 'default', 'disconnected', 'b')).ok);
    clock.advance(20_000);
    await settle();
    assert.ok((await broker.reportStatus('show', 'default', 'connected', 'b')).ok, 'SRT back');
    clock.advance(60_000);
    await settle();
    assert.deepEqual(closed, []);
    assert.ok((await broker.reportStatus('show', 'default', 'error', 'b')).ok);
    clock.advance(29_900);
    await settle();
    assert.deepEqual(closed, []);
    clock.advance(200);
    await settle();
    assert.deepEqual(closed, ['ttl_expired']);
    assert.equal(session.closeReason, 'ttl_expired');
  });

  test('peers that stop their media and then leave close the session 5 s after they left, not 30 s after the media', async () => {
    const { clock, closed } = await mediaStoppedThenLeft(12_000);
    clock.advance(4_900);
    await settle();
    assert.deepEqual(closed, []);
    clock.advance(200);
    await settle();
    assert.deepEqual(closed, ['ttl_expired'], 'closed 5 s after both left');
  });

  test('both leaving when the idle close is due sooner than the settle time keeps the sooner close', async () => {
    const { clock, closed } = await mediaStoppedThenLeft(28_000);
    clock.advance(2_100);
    await settle();
    assert.deepEqual(closed, ['ttl_expired'], 'the idle close at 30 s, not 5 s after they left');
  });

  test('without media the TTL closes as the spec says', async () => {
    const { clock, broker, closed } = await linked();
    assert.ok((await broker.reportStatus('show', 'default', 'disconnected', 'b')).ok);
    clock.advance(10_000);
    await settle();
    assert.deepEqual(closed, ['ttl_expired']);
  });

  test('an extension re-arms the expiry, is saved, and an overtime session admits again', async () => {
    const { clock, store, broker, closed, session } = await linked();
    clock.advance(10_000);
    await settle();
    assert.equal(broker.isOvertime(session), true);
    const until = clock.now() + 60_000;
    const r = await broker.extend('show', until);
    assert.ok(r.ok);
    assert.equal(session.expiresAt, until);
    assert.equal(store.loadAll()[0]?.expiresAt, until, 'saved');
    assert.equal(broker.isOvertime(session), false);
    assert.equal(broker.admits(session), true);
    assert.ok((await broker.reportStatus('show', 'default', 'disconnected', 'b')).ok);
    clock.advance(59_000);
    await settle();
    assert.deepEqual(closed, []);
    clock.advance(1_000);
    await settle();
    assert.deepEqual(closed, ['ttl_expired']);
    assert.equal((await broker.extend('show', until + 60_000)).ok, false, 'a closed session is not extended');
  });

  test('a broker restarted past the TTL gives claimed sessions 30 s to report media; unclaimed close at once', async () => {
    const { clock, store, broker } = await linked();
    assert.ok((await broker.create({ name: 'empty', latency: 200, ttl: 10 })).ok);
    broker.stop();
    clock.advance(20_000);
    const again = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
    const closed: string[] = [];
    again.subscribe((e) => {
      if (e.type === 'session_closed') closed.push(e.session.name);
    });
    await again.start();
    assert.deepEqual(closed, ['empty']);
    const show = again.get('show');
    assert.ok(show);
    assert.equal(again.isOvertime(show), true);
    // One peer comes back and reports media within the 30 s: the session stays.
    assert.equal((await again.claim('show', undefined, claim('198.51.100.9'))).ok, false, 'slots are held');
    const b = show.streams[0]?.peerB;
    assert.ok(b);
    assert.ok((await again.replaceClaim('show', 'default', 'b', b)).ok);
    assert.ok((await again.reportStatus('show', 'default', 'connected', 'b')).ok);
    clock.advance(120_000);
    await settle();
    assert.deepEqual(closed, ['empty']);
    again.stop();
  });
});
