import assert from 'node:assert/strict';
import { afterEach, beforeEach, test } from 'node:test';
import { loadFactor, waitFor } from '@broadcast-ops/core/testing';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';
import { servingOwner, settle, startInstance, type Instance } from '../redis-instances.ts';
import { connect, type Msg, type WsClient } from '../ws-helpers.ts';

/**
 * Failures of a two-instance deployment on a real `redis-server` (docs/multi-instance.md "Failures"):
 * Redis stopped for a few seconds, one instance SIGKILLed (the relay, then the owner), Redis killed and
 * restarted from its append-only file.
 */
let redis: RedisFixture;
const instances: Instance[] = [];
const clients: WsClient[] = [];
let n = 0;
/** Bounds grow with the machine's load (other suites share its cores). */
const L = (ms: number): number => ms * loadFactor();

beforeEach(async () => {
  redis = await startRedis();
  n++;
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(instances.splice(0).map((i) => i.stop('SIGKILL')));
  await redis.remove();
});

async function two(): Promise<{ owner: Instance; relay: Instance }> {
  const prefix = `f${process.pid}-${n}:`;
  instances.push(await startInstance(redis.url, prefix), await startInstance(redis.url, prefix));
  const { owner, relays } = await settle(instances);
  return { owner, relay: relays[0] as Instance };
}

async function session(via: Instance, name: string) {
  const r = await via.call('POST', '/api/session', { body: { name, ttl: 3600 } });
  assert.equal(r.status, 201, r.text);
  const admin = r.json.token as string;
  const tok = async (label: string) => {
    const t = await via.call('POST', `/api/session/${name}/token`, { token: admin, body: { label } });
    assert.equal(t.status, 201, t.text);
    return t.json.token as string;
  };
  return { admin, a: await tok('A'), b: await tok('B') };
}

async function ws(via: Instance, name: string, token: string): Promise<WsClient> {
  const c = await connect(via.url, name, { token });
  clients.push(c);
  return c;
}

/** A peer on `via` registers with its client id and port; resolves once its stream is matched (`peer`). */
async function register(c: WsClient, id: string): Promise<Msg> {
  c.send({ type: 'register', port: 9000, meta: { clientId: id } });
  return c.next('peer', L(30_000));
}

/**
 * The next `presence` message about the peer labelled `label` with `present`. Which slot a peer gets
 * depends on which `register` reaches the owner first (a bridged one takes a hop more), so tests name
 * peers by label, not by slot.
 */
async function presence(c: WsClient, label: string, present: boolean, timeoutMs = L(30_000)): Promise<Msg> {
  for (;;) {
    const m = await c.next('presence', timeoutMs);
    if (m['label'] === label && m['present'] === present) return m;
  }
}

test('Redis stopped for a few seconds: requests fail with 503, then sessions and their peers carry on', async () => {
  const { owner, relay } = await two();
  const s = await session(relay, 'outage');
  const a = await ws(owner, 'outage', s.a);
  const b = await ws(relay, 'outage', s.b);
  await Promise.all([register(a, 'A'), register(b, 'B')]);

  await redis.stop('SIGTERM');
  for (const i of [owner, relay]) {
    await waitFor(async () => (await i.health()).status === 503, {
      timeoutMs: L(10_000),
      what: 'health 503',
    });
    const h = await i.health();
    assert.equal(h.json.store.kind, 'redis');
    assert.equal(h.json.store.reachable, false);
    const post = await i.call('POST', '/api/session', { body: { name: 'during-outage' } });
    assert.equal(post.status, 503, post.text);
    assert.equal(post.json.code, 'SERVER_ERROR');
    const get = await i.call('GET', '/api/session/outage', { token: s.admin });
    assert.equal(get.status, 503, get.text);
    await assert.rejects(connect(i.url, 'outage', { token: s.admin }), /upgrade refused: 503/);
  }
  await new Promise((r) => setTimeout(r, 3_000));
  await redis.start();

  for (const i of [owner, relay]) {
    await waitFor(async () => (await i.health()).status === 200, {
      timeoutMs: L(20_000),
      what: 'health 200',
    });
  }
  // The same owner (it renewed its lease as soon as Redis answered): nobody was disconnected.
  assert.equal((await owner.health()).json.store.role, 'owner');
  const view = await relay.call('GET', '/api/session/outage', { token: s.admin });
  assert.equal(view.status, 200, view.text);
  assert.equal(view.json.streams.default.peer_a.present, true);
  assert.equal(view.json.streams.default.peer_b.present, true);
  a.send({ type: 'ready' });
  b.send({ type: 'ready' });
  assert.deepEqual(await a.next('start', L(15_000)), { type: 'start', stream: 'default' });
  assert.deepEqual(await b.next('start', L(15_000)), { type: 'start', stream: 'default' });
  assert.equal((await relay.call('POST', '/api/session', { body: { name: 'after-outage' } })).status, 201);
  for (const c of [a, b]) assert.ok(!c.messages.some((m) => m['type'] === 'session_closed'));
});

test('the relay instance SIGKILLed: its peer reconnects through the owner and gets its slot back', async () => {
  const { owner, relay } = await two();
  const s = await session(owner, 'kill-relay');
  const a = await ws(owner, 'kill-relay', s.a);
  const b = await ws(relay, 'kill-relay', s.b);
  await Promise.all([register(a, 'A'), register(b, 'B')]);

  await relay.stop('SIGKILL');
  // The partner is told of the departure once the dead instance's heartbeat expired.
  const gone = await presence(a, 'B', false);
  const slotOfB = `peer_${String(gone['slot'])}`;
  const view = await owner.call('GET', '/api/session/kill-relay', { token: s.admin });
  assert.equal(view.json.streams.default[slotOfB].present, false);
  assert.equal(view.json.streams.default[slotOfB].label, 'B');

  const b2 = await ws(owner, 'kill-relay', s.b);
  const again = await register(b2, 'B');
  assert.equal(again['port'], 9000);
  // The same slot back.
  assert.equal((await presence(a, 'B', true))['slot'], gone['slot']);
  const after = await owner.call('GET', '/api/session/kill-relay', { token: s.admin });
  assert.equal(after.json.streams.default[slotOfB].present, true);
  assert.equal(after.json.state, 'READY');
});

test('the owner SIGKILLed: the other instance takes over; peers reconnect and get their slots back', async () => {
  const { owner, relay } = await two();
  const s = await session(relay, 'kill-owner');
  const a = await ws(owner, 'kill-owner', s.a);
  const b = await ws(relay, 'kill-owner', s.b);
  const before = await Promise.all([register(a, 'A'), register(b, 'B')]);

  await owner.stop('SIGKILL');
  // The bridged peer's socket is closed with 1012 (service restart) once the relay owns the sessions.
  assert.equal((await b.closed).code, 1012);
  await waitFor(() => servingOwner(relay), { timeoutMs: L(30_000) });
  const view = await relay.call('GET', '/api/session/kill-owner', { token: s.admin });
  assert.equal(view.status, 200, view.text);
  assert.equal(view.json.streams.default.peer_a.present, false);
  assert.equal(view.json.streams.default.peer_b.present, false);

  const a2 = await ws(relay, 'kill-owner', s.a);
  const b2 = await ws(relay, 'kill-owner', s.b);
  a2.send({ type: 'register', port: 9000, meta: { clientId: 'A' } });
  const toB = await register(b2, 'B');
  // Same session, same passphrase: the takeover loaded what the old owner had saved.
  assert.equal(toB['passphrase'], before[0]['passphrase']);
  const after = await relay.call('GET', '/api/session/kill-owner', { token: s.admin });
  assert.equal(after.json.streams.default.peer_a.present, true);
  assert.equal(after.json.streams.default.peer_b.present, true);
  assert.equal(after.json.state, 'READY');
});

test('Redis killed and restarted from its append-only file: no acknowledged session or claim is lost', async () => {
  const { owner, relay } = await two();
  const names = Array.from({ length: 40 }, (_, i) => `durable-${i}`);
  const created = await Promise.all(
    names.map(async (name, i) => {
      const r = await (i % 2 ? owner : relay).call('POST', '/api/session', { body: { name, ttl: 3600 } });
      return {
        name,
        status: r.status,
        expiresAt: r.json?.expiresAt as number,
        admin: r.json?.token as string,
      };
    }),
  );
  assert.deepEqual(
    created.filter((c) => c.status !== 201).map((c) => `${c.name}: ${c.status}`),
    [],
    'every session created before the crash',
  );
  const s = await session(relay, 'durable-claims');
  const a = await ws(owner, 'durable-claims', s.a);
  const b = await ws(relay, 'durable-claims', s.b);
  await Promise.all([register(a, 'A'), register(b, 'B')]);

  // A crash, not a clean shutdown: only what was fsynced to the append-only file comes back.
  await redis.stop('SIGKILL');
  await redis.start();
  // Both brokers go too; a new one loads the sessions from Redis alone.
  await Promise.all(instances.splice(0).map((i) => i.stop('SIGKILL')));
  const fresh = await startInstance(redis.url, `f${process.pid}-${n}:`);
  instances.push(fresh);
  await waitFor(() => servingOwner(fresh), {
    timeoutMs: L(30_000),
    what: 'the fresh instance to own and serve the sessions',
  });
  for (const c of created) {
    const v = await fresh.call('GET', `/api/session/${c.name}`, { token: c.admin });
    assert.equal(v.status, 200, `${c.name}: ${v.text}`);
    assert.equal(v.json.expiresAt, c.expiresAt);
  }
  const v = await fresh.call('GET', '/api/session/durable-claims', { token: s.admin });
  assert.equal(v.json.streams.default.peer_a.port, 9000);
  assert.notEqual(v.json.streams.default.peer_b, null);
});
