import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ManualClock, tempDir } from '@broadcast-ops/core/testing';
import { SessionBroker, type BrokerEvent } from '../../src/domain/broker.ts';
import { MemoryStore, type SessionStore } from '../../src/domain/store.ts';
import { SqliteSessionStore } from '../../src/io/sqlite-store.ts';
import { openSqlite } from '../../src/io/sqlite-driver.ts';
import type { CreateOutcome } from '../../src/domain/broker.ts';
import type { SessionRecord } from '../../src/domain/session.ts';

const claim = (ip: string, port: number, label = '') => ({
  ip,
  port,
  label,
  role: null,
  meta: { codec: 'h264' },
  clientId: null,
});

/** Saves are awaited before events: let the store's commit (MemoryStore: a microtask; SQLite: setImmediate) run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function ok(outcome: CreateOutcome): SessionRecord {
  assert.ok(outcome.ok, outcome.ok ? '' : `${outcome.code}: ${outcome.message}`);
  return outcome.session;
}

function makeBroker(store: SessionStore, clock: ManualClock, maxSessions = 0) {
  const broker = new SessionBroker({ store, clock, maxSessions, tombstoneMs: 600_000 });
  const events: string[] = [];
  broker.subscribe((e: BrokerEvent) => {
    events.push(
      e.type === 'session_closed' ? `${e.type}:${e.session.name}:${e.reason}` : `${e.type}:${e.session.name}`,
    );
  });
  return { broker, events };
}

describe('session broker (domain, manual clock)', () => {
  test('TTL expiry closes the session on time, by a timer, and emits session_closed', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore();
    const { broker, events } = makeBroker(store, clock);
    await broker.start();
    const s = ok(await broker.create({ name: 'ttl-1', latency: 200, ttl: 30 }));
    assert.equal(s.expiresAt, clock.now() + 30_000);
    clock.advance(29_999);
    assert.equal(broker.get('ttl-1')?.state, 'WAITING');
    clock.advance(1);
    await settle();
    // Closed by the timer alone, without anyone reading it.
    assert.deepEqual(events, ['session_created:ttl-1', 'session_closed:ttl-1:ttl_expired']);
    assert.equal(broker.get('ttl-1')?.state, 'CLOSED');
    assert.equal(broker.liveSessions, 0);
    await Promise.resolve();
    assert.equal(store.loadAll()[0]?.state, 'CLOSED');
    assert.equal(store.loadAll()[0]?.closeReason, 'ttl_expired');
    // The tombstone is purged after 10 minutes, from memory and store.
    clock.advance(600_000);
    await settle();
    assert.equal(broker.get('ttl-1'), undefined);
    assert.equal(store.loadAll().length, 0);
    broker.stop();
  });

  test('expiry is a whole second so token exp (seconds) equals it', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1) + 400);
    const { broker } = makeBroker(new MemoryStore(), clock);
    const s = ok(await broker.create({ name: 'sec', latency: 200, ttl: 10 }));
    assert.equal(s.expiresAt % 1000, 0);
    assert.equal(s.expiresAt, Date.UTC(2026, 0, 1) + 11_000);
    broker.stop();
  });

  test('names: a live name is taken; a closed name can be created again', async () => {
    const clock = new ManualClock();
    const { broker, events } = makeBroker(new MemoryStore(), clock);
    const first = ok(await broker.create({ name: 'n', latency: 200, ttl: 60 }));
    const again = await broker.create({ name: 'n', latency: 200, ttl: 60 });
    assert.equal(again.ok ? 'ok' : again.code, 'SESSION_EXISTS');
    // Unique ignoring case: N is refused while n is live.
    const upper = await broker.create({ name: 'N', latency: 200, ttl: 60 });
    assert.deepEqual(upper, {
      ok: false,
      code: 'SESSION_EXISTS',
      message: 'name: differs only in case from the live session "n"',
    });
    assert.equal((await broker.close('n', 'admin_closed')).ok, true);
    const twice = await broker.close('n', 'admin_closed');
    assert.equal(twice.ok ? 'ok' : twice.code, 'SESSION_EXPIRED');
    const second = ok(await broker.create({ name: 'n', latency: 300, ttl: 60 }));
    assert.notEqual(second.id, first.id);
    assert.notEqual(second.passphrase, first.passphrase);
    // The old tombstone's purge timer must not remove the new session.
    clock.advance(60_000 - 1);
    assert.equal(broker.get('n'), second);
    clock.advance(1);
    await settle();
    assert.deepEqual(events, [
      'session_created:n',
      'session_closed:n:admin_closed',
      'session_created:n',
      'session_closed:n:ttl_expired',
    ]);
    broker.stop();
  });

  test('maxSessions bounds live sessions', async () => {
    const { broker } = makeBroker(new MemoryStore(), new ManualClock(), 2);
    await broker.create({ name: 'a', latency: 200, ttl: 60 });
    await broker.create({ name: 'b', latency: 200, ttl: 60 });
    const over = await broker.create({ name: 'c', latency: 200, ttl: 60 });
    assert.equal(over.ok ? 'ok' : over.code, 'SESSION_LIMIT');
    await broker.close('a', 'admin_closed');
    ok(await broker.create({ name: 'c', latency: 200, ttl: 60 }));
    broker.stop();
  });

  test('claims: A then B matches the stream (READY); a third is STREAM_TAKEN; status moves CONNECTED', async () => {
    const { broker, events } = makeBroker(new MemoryStore(), new ManualClock());
    await broker.create({ name: 'c1', streams: ['x', 'y'], latency: 200, ttl: 60 });
    const noStream = await broker.claim('c1', undefined, claim('203.0.113.1', 5000));
    assert.deepEqual(noStream, {
      ok: false,
      code: 'INVALID_MESSAGE',
      message: 'stream: required in a multi-stream session',
    });
    const a = await broker.claim('c1', 'x', claim('203.0.113.1', 5000, 'A'));
    assert.ok(a.ok && a.slot === 'a' && !a.matched);
    assert.equal(broker.get('c1')?.state, 'WAITING');
    const b = await broker.claim('c1', 'x', claim('203.0.113.2', 5000, 'B'));
    assert.ok(b.ok && b.slot === 'b' && b.matched);
    assert.equal(broker.get('c1')?.state, 'READY');
    assert.equal(broker.get('c1')?.streams[0]?.state, 'ready');
    assert.equal(broker.get('c1')?.streams[1]?.state, 'waiting');
    const third = await broker.claim('c1', 'x', claim('203.0.113.3', 5000));
    assert.equal(third.ok ? 'ok' : third.code, 'STREAM_TAKEN');
    await broker.reportStatus('c1', 'x', 'connected');
    assert.equal(broker.get('c1')?.state, 'CONNECTED');
    await broker.reportStatus('c1', 'x', 'disconnected');
    assert.equal(broker.get('c1')?.state, 'READY');
    await broker.release('c1', 'x', 'b');
    assert.equal(broker.get('c1')?.state, 'WAITING');
    assert.equal(broker.get('c1')?.streams[0]?.peerB, null);
    // peer_matched precedes the session broadcast (README "Message ordering").
    assert.deepEqual(events.slice(0, 4), [
      'session_created:c1',
      'session_changed:c1',
      'peer_matched:c1',
      'session_changed:c1',
    ]);
    await broker.close('c1', 'admin_closed');
    const late = await broker.claim('c1', 'y', claim('203.0.113.1', 5000));
    assert.equal(late.ok ? 'ok' : late.code, 'SESSION_EXPIRED');
    broker.stop();
  });
});

describe('durable store: restart on the same SQLite file', () => {
  test('sessions, streams, claims, passphrases survive; TTL passed while down → closed at start; timers re-armed', async () => {
    const dir = tempDir('punch-store-');
    try {
      const file = join(dir.path, 'punch.db');
      const clock = new ManualClock();
      const store1 = new SqliteSessionStore(file);
      const one = makeBroker(store1, clock);
      await one.broker.start();
      const long = ok(
        await one.broker.create({
          name: 'long',
          streams: ['cam-1', 'cam-2'],
          latency: 350,
          ttl: 3600,
        }),
      );
      await one.broker.create({ name: 'short', latency: 200, ttl: 60 });
      await one.broker.create({ name: 'gone', latency: 200, ttl: 600 });
      await one.broker.claim('long', 'cam-2', claim('203.0.113.9', 6000, 'left'));
      await one.broker.claim('long', 'cam-2', claim('198.51.100.4', 6001, 'right'));
      await one.broker.close('gone', 'admin_closed');
      one.broker.stop();
      store1.close();

      // Down for two minutes: "short" (ttl 60 s) expires meanwhile.
      clock.stepWall(120_000);
      const store2 = new SqliteSessionStore(file);
      const two = makeBroker(store2, clock);
      await two.broker.start();
      assert.deepEqual(two.events, ['session_closed:short:ttl_expired']);
      const back = two.broker.get('long');
      assert.ok(back);
      // Nobody is connected after a restart: the claims are kept, but no stream is matched (README "Presence").
      assert.deepEqual({ ...back, streams: undefined }, { ...long, state: 'WAITING', streams: undefined });
      assert.equal(back.passphrase, long.passphrase);
      assert.equal(back.state, 'WAITING');
      assert.deepEqual(
        back.streams.map((s) => [
          s.name,
          s.state,
          s.peerA?.ip ?? null,
          s.peerB?.port ?? null,
          s.peerB?.meta ?? null,
        ]),
        [
          ['cam-1', 'waiting', null, null, null],
          ['cam-2', 'waiting', '203.0.113.9', 6001, { codec: 'h264' }],
        ],
      );
      assert.equal(two.broker.get('short')?.state, 'CLOSED');
      assert.equal(two.broker.get('gone')?.closeReason, 'admin_closed');
      assert.equal(two.broker.liveSessions, 1);
      // The TTL timer of "long" was re-armed from the stored expiry.
      clock.advance(long.expiresAt - clock.now() - 1);
      assert.equal(two.broker.get('long')?.state, 'WAITING');
      clock.advance(1);
      await settle();
      assert.equal(two.broker.get('long')?.state, 'CLOSED');
      two.broker.stop();
      store2.close();
    } finally {
      dir.remove();
    }
  });

  test('a batch that fails to commit rejects every writer of it, also when close() commits it', async () => {
    const dir = tempDir('punch-store-');
    try {
      const clock = new ManualClock();
      const good = makeBroker(new MemoryStore(), clock);
      const session = ok(await good.broker.create({ name: 'ok', latency: 200, ttl: 60 }));
      // STRICT table: a text latency cannot be stored, so the whole batch rolls back.
      const bad = { ...session, name: 'bad', latency: 'x' as unknown as number };
      for (const viaClose of [false, true]) {
        const store = new SqliteSessionStore(join(dir.path, `fail-${viaClose}.db`));
        const writes = [store.putSession(session), store.putSession(bad)];
        if (viaClose) assert.throws(() => store.close(), /latency/);
        for (const w of writes) await assert.rejects(w, /latency/);
        if (!viaClose) store.close();
      }
      good.broker.stop();
    } finally {
      dir.remove();
    }
  });

  test('the SQLite store uses WAL journal mode', () => {
    const dir = tempDir('punch-store-');
    try {
      const file = join(dir.path, 'p.db');
      new SqliteSessionStore(file).close();
      const db = openSqlite(file);
      assert.deepEqual({ ...(db.prepare('PRAGMA journal_mode').get() as object) }, { journal_mode: 'wal' });
      db.close();
    } finally {
      dir.remove();
    }
  });
});
