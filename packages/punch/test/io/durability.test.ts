import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ManualClock, requireTool, tempDir } from '@broadcast-ops/core/testing';
import { SessionBroker } from '../../src/domain/broker.ts';
import type { PeerClaim, SessionRecord, StreamRecord } from '../../src/domain/session.ts';
import type { SessionStore } from '../../src/domain/store.ts';
import { SqliteSessionStore } from '../../src/io/sqlite-store.ts';

/**
 * "Never report success for what a restart undoes": every state change (create, close, claim, release,
 * status) either is saved and acknowledged, or fails, is rolled back in memory, and is refused. After a
 * restart on the same file, the broker's memory before the restart equals what it loads.
 */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const peer = (ip: string, port: number): Omit<PeerClaim, 'claimedAt'> => ({
  ip,
  port,
  label: ip,
  role: null,
  meta: {},
  clientId: null,
});

/** A SQLite store whose writes fail while `failing` is set (the write reaches SQLite and is rolled back). */
class FailOnDemandStore implements SessionStore {
  failing = false;
  readonly inner: SqliteSessionStore;
  constructor(file: string) {
    this.inner = new SqliteSessionStore(file);
  }
  #gate(): void {
    if (this.failing) throw new Error('injected write failure');
  }
  loadAll() {
    return this.inner.loadAll();
  }
  async putSession(s: SessionRecord) {
    this.#gate();
    await this.inner.putSession(s);
  }
  async updateSessionState(name: string, change: Parameters<SessionStore['updateSessionState']>[1]) {
    this.#gate();
    await this.inner.updateSessionState(name, change);
  }
  async putExpiry(name: string, expiresAt: number) {
    this.#gate();
    await this.inner.putExpiry(name, expiresAt);
  }
  async putInvites(name: string, invites: Parameters<SessionStore['putInvites']>[1]) {
    this.#gate();
    await this.inner.putInvites(name, invites);
  }
  async putStreams(session: string, streams: readonly StreamRecord[]) {
    this.#gate();
    await this.inner.putStreams(session, streams);
  }
  async deleteSession(name: string) {
    this.#gate();
    await this.inner.deleteSession(name);
  }
  async probe() {
    this.#gate();
    await this.inner.probe();
  }
  close() {
    this.inner.close();
  }
}

/**
 * Comparable view of the broker's memory: what is persisted. Health is never persisted, and presence is
 * memory only: after a restart no peer is connected, so a live session's streams show `waiting` with
 * their claims kept (README "Presence"); the comparison puts both sides in that state.
 */
function snapshot(broker: SessionBroker, names: string[]) {
  return names.map((n) => {
    const s = broker.get(n);
    if (!s) return null;
    const live = s.state !== 'CLOSED';
    return {
      ...structuredClone(s),
      state: live ? 'WAITING' : s.state,
      streams: s.streams.map((st) => ({ ...st, health: null, state: live ? 'waiting' : st.state })),
    };
  });
}

const NAMES = ['s-claim', 's-release', 's-status', 's-close', 's-new'];

/** Sessions prepared so that each of the five state changes has something to change. */
async function prepare(broker: SessionBroker): Promise<void> {
  for (const name of ['s-claim', 's-release', 's-status', 's-close']) {
    const r = await broker.create({ name, latency: 200, ttl: 3600 });
    assert.ok(r.ok, name);
  }
  assert.ok((await broker.claim('s-claim', undefined, peer('192.0.2.1', 5000))).ok);
  for (const name of ['s-release', 's-status']) {
    assert.ok((await broker.claim(name, undefined, peer('192.0.2.1', 5000))).ok);
    assert.ok((await broker.claim(name, undefined, peer('192.0.2.2', 5000))).ok);
  }
}

/** Try each state change; every one must be refused with STORE_FAILED and leave memory as it was. */
async function everyChangeFails(broker: SessionBroker): Promise<void> {
  const before = snapshot(broker, NAMES);
  const live = broker.liveSessions;
  const outcomes = [
    await broker.create({ name: 's-new', latency: 200, ttl: 60 }),
    await broker.close('s-close', 'admin_closed'),
    await broker.claim('s-claim', undefined, peer('192.0.2.9', 6000)),
    await broker.release('s-release', 'default', 'a'),
    await broker.reportStatus('s-status', 'default', 'connected'),
  ];
  assert.deepEqual(
    outcomes.map((o) => (o.ok ? 'ok' : o.code)),
    ['STORE_FAILED', 'STORE_FAILED', 'STORE_FAILED', 'STORE_FAILED', 'STORE_FAILED'],
  );
  assert.deepEqual(snapshot(broker, NAMES), before, 'memory rolled back');
  // Two changes of one slot in one event-loop turn (a peer leaves, another registers): one batch, both
  // refused; the older change's undo must not run before the newer one's, or the slot ends up empty.
  const both = await Promise.all([
    broker.release('s-release', 'default', 'a'),
    broker.claim('s-release', undefined, peer('192.0.2.9', 6000)),
  ]);
  assert.deepEqual(
    both.map((o) => (o.ok ? 'ok' : o.code)),
    ['STORE_FAILED', 'STORE_FAILED'],
  );
  assert.deepEqual(snapshot(broker, NAMES), before, 'memory rolled back after two changes of one slot');
  assert.equal(broker.liveSessions, live);
  assert.equal(broker.storeState.state, 'failing');
}

async function restartAgrees(file: string, memory: ReturnType<typeof snapshot>, clock: ManualClock) {
  const store = new SqliteSessionStore(file);
  const again = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
  await again.start();
  assert.deepEqual(snapshot(again, NAMES), memory, 'memory before the restart equals the store after it');
  again.stop();
  store.close();
}

describe('durable state changes: saved before acknowledged, or rolled back', () => {
  test('a store that fails on demand: each change is refused and rolled back; a restart agrees', async () => {
    const dir = tempDir('punch-durable-');
    try {
      const file = join(dir.path, 'punch.db');
      const clock = new ManualClock(Date.UTC(2026, 0, 1));
      const store = new FailOnDemandStore(file);
      const broker = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
      await broker.start();
      await prepare(broker);
      store.failing = true;
      await everyChangeFails(broker);
      // Events are emitted only for saved changes: a subscriber saw none of the failed ones.
      const seen: string[] = [];
      broker.subscribe((e) => seen.push(e.type));
      await broker.claim('s-claim', undefined, peer('192.0.2.9', 6000));
      assert.deepEqual(seen, []);
      const memory = snapshot(broker, NAMES);
      broker.stop();
      store.close();
      await restartAgrees(file, memory, clock);

      // The same changes succeed once the store saves again, and the next restart agrees as well.
      const store2 = new FailOnDemandStore(file);
      const b2 = new SessionBroker({ store: store2, clock, maxSessions: 0, tombstoneMs: 600_000 });
      await b2.start();
      assert.ok((await b2.close('s-close', 'admin_closed')).ok);
      assert.ok((await b2.release('s-release', 'default', 'a')).ok);
      assert.equal(b2.storeState.state, 'ok');
      const memory2 = snapshot(b2, NAMES);
      b2.stop();
      store2.close();
      await restartAgrees(file, memory2, clock);
    } finally {
      dir.remove();
    }
  });

  test('a create of the same name while its close is being saved does not replace the session', async () => {
    const dir = tempDir('punch-durable-');
    try {
      const file = join(dir.path, 'punch.db');
      const clock = new ManualClock(Date.UTC(2026, 0, 1));
      const store = new FailOnDemandStore(file);
      const broker = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
      await broker.start();
      assert.ok((await broker.create({ name: 'same', latency: 200, ttl: 3600 })).ok);
      const before = snapshot(broker, ['same']);
      store.failing = true;
      // DELETE and a POST of the same name (or a case variant) in one turn, while saves fail.
      const outcomes = await Promise.all([
        broker.close('same', 'admin_closed'),
        broker.create({ name: 'same', latency: 200, ttl: 60 }),
        broker.create({ name: 'SAME', latency: 200, ttl: 60 }),
      ]);
      assert.deepEqual(
        outcomes.map((o) => (o.ok ? 'ok' : o.code)),
        ['STORE_FAILED', 'SESSION_EXISTS', 'SESSION_EXISTS'],
      );
      assert.deepEqual(snapshot(broker, ['same']), before, 'the live session is unchanged');
      assert.equal(broker.liveSessions, 1);
      assert.equal(broker.tombstones, 0, 'a live session is never a tombstone');
      // Long after the tombstone time the session is still live, in memory and on disk.
      store.failing = false;
      clock.advance(600_001);
      await settle();
      assert.equal(broker.get('same')?.state, 'WAITING');
      assert.equal(broker.get('SAME'), undefined);
      broker.stop();
      store.close();
      await restartAgrees(file, snapshot(broker, NAMES), clock);
      const again = new SqliteSessionStore(file);
      assert.deepEqual(
        again.loadAll().map((s) => [s.name, s.state]),
        [['same', 'WAITING']],
      );
      again.close();
    } finally {
      dir.remove();
    }
  });

  test('a TTL close that cannot be saved keeps the session live and is retried until saved', async () => {
    const dir = tempDir('punch-durable-');
    try {
      const file = join(dir.path, 'punch.db');
      const clock = new ManualClock(Date.UTC(2026, 0, 1));
      const store = new FailOnDemandStore(file);
      const broker = new SessionBroker({
        store,
        clock,
        maxSessions: 0,
        tombstoneMs: 600_000,
        retryMs: 5_000,
      });
      await broker.start();
      assert.ok((await broker.create({ name: 'ttl', latency: 200, ttl: 10 })).ok);
      store.failing = true;
      clock.advance(10_000);
      await settle();
      assert.equal(broker.get('ttl')?.state, 'WAITING');
      assert.deepEqual(
        (await broker.storeHealth()).state,
        'failing',
        'health stays failing while the probe write fails',
      );
      store.failing = false;
      clock.advance(5_000);
      await settle();
      assert.equal(broker.get('ttl')?.state, 'CLOSED');
      assert.equal(broker.get('ttl')?.closeReason, 'ttl_expired');
      assert.equal(broker.storeState.state, 'ok');
      broker.stop();
      store.close();
      const again = new SqliteSessionStore(file);
      assert.equal(again.loadAll()[0]?.state, 'CLOSED');
      again.close();
    } finally {
      dir.remove();
    }
  });

  test('no reader sees CLOSED before the close is saved (DELETE and TTL): claims wait for it', async () => {
    const dir = tempDir('punch-durable-');
    try {
      const file = join(dir.path, 'punch.db');
      const clock = new ManualClock(Date.UTC(2026, 0, 1));
      const store = new FailOnDemandStore(file);
      const broker = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
      const events: string[] = [];
      broker.subscribe((e) => events.push(`${e.type}:${e.session.name}`));
      await broker.start();
      assert.ok((await broker.create({ name: 'x', latency: 200, ttl: 3600 })).ok);
      assert.ok((await broker.create({ name: 't', latency: 200, ttl: 10 })).ok);
      events.length = 0;

      // A close that fails to save, with a claim and a reader in the same turn.
      store.failing = true;
      const closing = broker.close('x', 'admin_closed');
      assert.equal(broker.get('x')?.state, 'WAITING', 'a reader during the save sees the session live');
      assert.equal(broker.liveSessions, 2);
      const [closed, claimed] = await Promise.all([
        closing,
        broker.claim('x', undefined, peer('192.0.2.1', 5000)),
      ]);
      assert.equal(closed.ok ? 'ok' : closed.code, 'STORE_FAILED');
      assert.equal(
        claimed.ok ? 'ok' : claimed.code,
        'STORE_FAILED',
        'the claim is not told SESSION_EXPIRED for a close that did not happen',
      );
      assert.equal(broker.get('x')?.state, 'WAITING');
      assert.deepEqual(events, [], 'no session_closed for an unsaved close');

      // The same race with a working store: the claim waits for the close and learns the truth.
      store.failing = false;
      const [closedOk, late] = await Promise.all([
        broker.close('x', 'admin_closed'),
        broker.claim('x', undefined, peer('192.0.2.1', 5000)),
        broker.close('x', 'admin_closed').then((r) => assert.equal(r.ok ? 'ok' : r.code, 'SESSION_EXPIRED')),
      ]);
      assert.ok(closedOk.ok);
      assert.equal(late.ok ? 'ok' : late.code, 'SESSION_EXPIRED');
      assert.deepEqual(events, ['session_closed:x']);

      // TTL: the timer's close is in flight; the session reads live until the save fails, then stays live.
      store.failing = true;
      clock.advance(10_000);
      assert.equal(broker.get('t')?.state, 'WAITING', 'live while the TTL close is being saved');
      const ttlClaim = await broker.claim('t', undefined, peer('192.0.2.1', 5000));
      assert.equal(ttlClaim.ok ? 'ok' : ttlClaim.code, 'STORE_FAILED');
      await settle();
      assert.equal(broker.get('t')?.state, 'WAITING');
      assert.deepEqual(events, ['session_closed:x']);
      broker.stop();
      store.close();
      const again = new SqliteSessionStore(file);
      assert.deepEqual(
        again.loadAll().map((s) => [s.name, s.state]),
        [
          ['x', 'CLOSED'],
          ['t', 'WAITING'],
        ],
      );
      again.close();
    } finally {
      dir.remove();
    }
  });

  test('tombstones are bounded: the oldest closed session is forgotten first', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const dir = tempDir('punch-durable-');
    try {
      const store = new SqliteSessionStore(join(dir.path, 'p.db'));
      const broker = new SessionBroker({
        store,
        clock,
        maxSessions: 0,
        tombstoneMs: 600_000,
        maxTombstones: 3,
      });
      for (let i = 0; i < 5; i++) {
        assert.ok((await broker.create({ name: `t${i}`, latency: 200, ttl: 60 })).ok);
        clock.advance(1);
        assert.ok((await broker.close(`t${i}`, 'admin_closed')).ok);
      }
      await settle();
      assert.equal(broker.tombstones, 3);
      assert.deepEqual(
        ['t0', 't1', 't2', 't3', 't4'].map((n) => broker.get(n)?.state ?? null),
        [null, null, 'CLOSED', 'CLOSED', 'CLOSED'],
      );
      assert.deepEqual(
        store
          .loadAll()
          .map((s) => s.name)
          .sort(),
        ['t2', 't3', 't4'],
      );
      broker.stop();
      store.close();
    } finally {
      dir.remove();
    }
  });

  test('a real full filesystem (tmpfs mounted by the test): refused, rolled back, a restart agrees', async () => {
    requireTool('mount');
    requireTool('umount');
    const dir = tempDir('punch-full-');
    const mnt = join(dir.path, 'mnt');
    mkdirSync(mnt);
    // 384 KiB: room for the database and its WAL, then filled up by the test.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=384k,mode=0700', 'tmpfs', mnt]);
    try {
      const file = join(mnt, 'punch.db');
      const clock = new ManualClock(Date.UTC(2026, 0, 1));
      const store = new SqliteSessionStore(file);
      const broker = new SessionBroker({ store, clock, maxSessions: 0, tombstoneMs: 600_000 });
      await broker.start();
      await prepare(broker);
      // Fill the filesystem: big writes, then ever smaller ones, until not one more byte fits (bounded).
      const filler = join(mnt, 'filler');
      const fd = openSync(filler, 'w');
      let written = 0;
      for (const chunk of [65_536, 4_096, 512, 1]) {
        const buf = Buffer.alloc(chunk, 0x55);
        for (let i = 0; i < 10_000; i++) {
          try {
            written += writeSync(fd, buf);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
            break;
          }
        }
      }
      closeSync(fd);
      assert.ok(written > 0 && written < 400 * 1024, `filled ${written} bytes`);
      await everyChangeFails(broker);
      assert.match(
        (broker.storeState.state === 'failing' && broker.storeState.error) || '',
        /full|disk|I\/O/i,
      );
      const memory = snapshot(broker, NAMES);
      // The operator frees space and restarts the broker.
      rmSync(filler);
      broker.stop();
      store.close();
      await restartAgrees(file, memory, clock);
    } finally {
      execFileSync('umount', [mnt]);
      dir.remove();
    }
  });
});
