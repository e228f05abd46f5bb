import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { systemClock } from '@broadcast-ops/core';
import { SessionBroker } from '../../src/domain/broker.ts';
import { RedisSessionStore } from '../../src/io/redis-store.ts';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';

/**
 * The Redis session store under the broker, on a real `redis-server`: what is saved loads back
 * identically, and the owner-lease fence keeps an instance that no longer owns the sessions from writing
 * (so two instances can never give one slot to two peers, even if both briefly believe they own).
 */
let redis: RedisFixture;
let client: Redis;
const prefix = `st${process.pid}:`;

before(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
after(async () => {
  client.disconnect();
  await redis.remove();
});

function store(token: () => string | null): RedisSessionStore {
  return new RedisSessionStore({ redis: client, prefix, fence: token, tombstoneMs: 600_000 });
}
const claim = (ip: string, port: number, label: string) => ({
  ip,
  port,
  label,
  role: null,
  meta: { label, list: [1, 2], nested: {} },
  clientId: null,
  holder: label,
});

test('sessions, streams and claims saved to Redis load back identically into a new broker', async () => {
  await client.set(`${prefix}leader`, 'me:1');
  const s = store(() => 'me:1');
  const b1 = new SessionBroker({ store: s, clock: systemClock, maxSessions: 0, tombstoneMs: 600_000 });
  await b1.start();
  const c = await b1.create({ name: 'cam1', streams: ['a', 'b'], latency: 300, ttl: 600 });
  assert.ok(c.ok);
  assert.ok((await b1.claim('cam1', 'a', claim('192.0.2.1', 9000, 'one'))).ok);
  assert.ok((await b1.claim('cam1', 'a', claim('192.0.2.2', 9000, 'two'))).ok);
  assert.ok((await b1.create({ name: 'gone', latency: 200, ttl: 600 })).ok);
  assert.ok((await b1.close('gone', 'admin_closed')).ok);
  b1.stop();
  const b2 = new SessionBroker({ store: s, clock: systemClock, maxSessions: 0, tombstoneMs: 600_000 });
  await b2.start();
  const loaded = b2.get('cam1');
  assert.ok(loaded);
  assert.equal(loaded.passphrase, c.session.passphrase);
  assert.equal(loaded.expiresAt, c.session.expiresAt);
  assert.deepEqual(loaded.streams[0]?.peerA?.meta, { label: 'one', list: [1, 2], nested: {} });
  assert.equal(loaded.streams[0]?.peerB?.ip, '192.0.2.2');
  assert.equal(loaded.streams[1]?.peerA, null);
  assert.equal(b2.get('gone')?.state, 'CLOSED');
  assert.equal(b2.get('gone')?.closeReason, 'admin_closed');
  // The key expires on its own after the TTL and the tombstone time (a safety net behind the owner).
  const ttl = await client.pttl(`${prefix}s:cam1`);
  assert.ok(ttl > 600_000, String(ttl));
  b2.stop();
});

test('the fence: an instance whose lease passed to another cannot write, so it cannot give a slot away', async () => {
  await client.set(`${prefix}leader`, 'old:1');
  const old = store(() => 'old:1');
  const bOld = new SessionBroker({ store: old, clock: systemClock, maxSessions: 0, tombstoneMs: 600_000 });
  await bOld.start();
  assert.ok((await bOld.create({ name: 'race', latency: 200, ttl: 600 })).ok);
  // Another instance is elected; the old owner does not know yet.
  await client.set(`${prefix}leader`, 'new:2');
  const bNew = new SessionBroker({
    store: store(() => 'new:2'),
    clock: systemClock,
    maxSessions: 0,
    tombstoneMs: 600_000,
  });
  await bNew.start();
  // Both get a claim for the same slot: only the lease holder's is saved and acknowledged.
  const [fromOld, fromNew] = await Promise.all([
    bOld.claim('race', undefined, claim('198.51.100.1', 9000, 'stale')),
    bNew.claim('race', undefined, claim('198.51.100.2', 9000, 'current')),
  ]);
  assert.equal(fromOld.ok, false);
  assert.equal(!fromOld.ok && fromOld.code, 'STORE_FAILED');
  assert.ok(fromNew.ok);
  // Memory of the old owner is rolled back; Redis holds the new owner's claim only.
  assert.equal(bOld.get('race')?.streams[0]?.peerA, null);
  const stored = JSON.parse((await client.hget(`${prefix}s:race`, 'streams')) ?? '[]') as {
    peerA: { label: string } | null;
    peerB: unknown;
  }[];
  assert.equal(stored[0]?.peerA?.label, 'current');
  assert.equal(stored[0]?.peerB, null);
  // Without any lease nothing is written at all.
  await assert.rejects(Promise.resolve(store(() => null).probe()), /owner lease/);
  await assert.rejects(old.probe(), /NOT_OWNER/);
  bOld.stop();
  bNew.stop();
});

test('an extension is saved to Redis (expiry loads back); past the TTL the key is kept from when media last flowed', async () => {
  await client.set(`${prefix}leader`, 'me:1');
  const s = store(() => 'me:1');
  const b1 = new SessionBroker({ store: s, clock: systemClock, maxSessions: 0, tombstoneMs: 600_000 });
  await b1.start();
  const c = await b1.create({ name: 'ext1', latency: 200, ttl: 60 });
  assert.ok(c.ok);
  const until = c.session.expiresAt + 7_200_000;
  assert.ok((await b1.extend('ext1', until)).ok);
  b1.stop();
  const b2 = new SessionBroker({ store: s, clock: systemClock, maxSessions: 0, tombstoneMs: 600_000 });
  await b2.start();
  assert.equal(b2.get('ext1')?.expiresAt, until);
  const key = `${prefix}s:ext1`;
  // Kept until the new expiry + tombstone + grace (1 h by default).
  assert.ok((await client.pexpiretime(key)) >= until + 600_000 + 3_600_000 - 1000);
  // A session past its TTL with media: the key is kept from `keepFrom`, not from the old expiry.
  const keepFrom = until + 86_400_000;
  await s.putExpiry('ext1', until, keepFrom);
  assert.ok((await client.pexpiretime(key)) >= keepFrom + 600_000 + 3_600_000 - 1000);
  b2.stop();
});

test('invites and their revocation are saved to Redis and load back (a revoked token stays refused on a new owner)', async () => {
  await client.set(`${prefix}leader`, 'me:1');
  const s = store(() => 'me:1');
  const b1 = new SessionBroker({ store: s, clock: systemClock, maxSessions: 0, tombstoneMs: 600_000 });
  await b1.start();
  assert.ok((await b1.create({ name: 'inv1', streams: ['a', 'b'], latency: 200, ttl: 600 })).ok);
  const one = await b1.issueInvite('inv1', 'a', 'Camera 1');
  const two = await b1.issueInvite('inv1', 'b', null);
  assert.ok(one.ok && two.ok);
  assert.ok((await b1.revokeInvite('inv1', two.invite.id)).ok);
  b1.stop();
  // Another instance takes the lease and loads the sessions.
  await client.set(`${prefix}leader`, 'next:2');
  const b2 = new SessionBroker({
    store: store(() => 'next:2'),
    clock: systemClock,
    maxSessions: 0,
    tombstoneMs: 600_000,
  });
  await b2.start();
  const loaded = b2.get('inv1')?.invites ?? [];
  assert.deepEqual(
    loaded.map((i) => [i.id, i.stream, i.label, i.revokedAt !== null]),
    [
      [one.invite.id, 'a', 'Camera 1', false],
      [two.invite.id, 'b', null, true],
    ],
  );
  b2.stop();
});
