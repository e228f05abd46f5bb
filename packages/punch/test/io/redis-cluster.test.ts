import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { loadFactor } from '@broadcast-ops/core/testing';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';
import { settle, startInstance, type Instance } from '../redis-instances.ts';
import { assertQuiet, connect, sleep, type WsClient } from '../ws-helpers.ts';

/**
 * Two `punch serve` processes on one real `redis-server` (docs/multi-instance.md): one owns the sessions,
 * the other relays requests and bridges its sockets over the Redis bus. Peers on different instances must
 * see what they would see on one broker, in the same order.
 */
describe('two broker instances on Redis', () => {
  let redis: RedisFixture;
  let one: Instance;
  let two: Instance;
  let owner: Instance;
  let relay: Instance;
  const prefix = `t${process.pid}:`;
  const clients: WsClient[] = [];

  before(async () => {
    redis = await startRedis();
    one = await startInstance(redis.url, prefix);
    two = await startInstance(redis.url, prefix);
    ({
      owner,
      relays: [relay = two],
    } = await settle([one, two]));
  });
  after(async () => {
    for (const c of clients) c.close();
    await Promise.all([one?.stop('SIGKILL'), two?.stop('SIGKILL')]);
    await redis?.remove();
  });

  async function session(via: Instance, name: string, body: Record<string, unknown> = {}) {
    const r = await via.call('POST', '/api/session', { body: { name, ttl: 3600, ...body } });
    assert.equal(r.status, 201, r.text);
    return r.json as { token: string; expiresAt: number };
  }
  async function peerToken(via: Instance, name: string, admin: string, label: string) {
    const r = await via.call('POST', `/api/session/${name}/token`, { token: admin, body: { label } });
    assert.equal(r.status, 201, r.text);
    return r.json.token as string;
  }
  async function ws(via: Instance, name: string, token: string): Promise<WsClient> {
    const c = await connect(via.url, name, { token });
    clients.push(c);
    return c;
  }

  test('an invite revoked through the relay: its bridged socket is closed and both instances refuse the token', async () => {
    const { token: admin } = await session(relay, 'revoke1');
    const keep = await peerToken(owner, 'revoke1', admin, 'keep');
    const gone = await peerToken(relay, 'revoke1', admin, 'gone');
    const list = await relay.call('GET', '/api/session/revoke1/invites', { token: admin });
    assert.equal(list.status, 200, list.text);
    const invites = list.json.invites as { id: string; label: string; token: string }[];
    assert.deepEqual(
      invites.map((i) => [i.label, i.token]),
      [
        ['keep', keep],
        ['gone', gone],
      ],
    );
    // The peer of the invite to revoke is on the relay (a bridged socket), the other on the owner.
    const peer = await ws(relay, 'revoke1', gone);
    await peer.next('session');
    peer.send({ type: 'register', port: 9000 });
    await peer.next('session');
    const id = invites[1]?.id ?? '';
    const r = await relay.call('DELETE', `/api/session/revoke1/invites/${id}`, { token: admin });
    assert.equal(r.status, 204, r.text);
    assert.equal((await peer.next('error'))['code'], 'AUTH_FAILED');
    assert.equal((await peer.closed).code, 4401);
    for (const i of [owner, relay]) {
      assert.equal((await i.call('GET', '/api/session/revoke1', { token: gone })).status, 401);
      assert.equal((await i.call('GET', '/api/session/revoke1', { token: keep })).status, 200);
    }
    const again = await ws(owner, 'revoke1', gone);
    assert.equal((await again.next('error'))['code'], 'AUTH_FAILED');
  });

  test('health names the store and the owner on both instances', async () => {
    for (const i of [owner, relay]) {
      const h = await i.health();
      assert.equal(h.status, 200, h.text);
      assert.equal(h.json.store.kind, 'redis');
      assert.equal(h.json.store.reachable, true);
    }
    assert.equal((await owner.health()).json.store.role, 'owner');
    assert.equal((await relay.health()).json.store.role, 'relay');
  });

  test('a peer on each instance: peer, peer_match and session in the single-broker order', async () => {
    const { token: admin } = await session(relay, 'x-match', { latency: 250 });
    const tokA = await peerToken(owner, 'x-match', admin, 'A');
    const tokB = await peerToken(relay, 'x-match', admin, 'B');
    const obs = await ws(relay, 'x-match', admin);
    const a = await ws(owner, 'x-match', tokA);
    const b = await ws(relay, 'x-match', tokB);
    for (const c of [obs, a, b]) assert.equal((await c.next('session'))['state'], 'WAITING');
    a.send({ type: 'register', port: 9000, role: 'sender', meta: { label: 'A' } });
    for (const c of [obs, a, b])
      assert.deepEqual((await c.next('session'))['streams']['default'], { state: 'waiting', peers: 1 });
    b.send({ type: 'register', port: 9002, role: 'receiver', meta: { label: 'B' } });
    const toB = await b.next('peer');
    const toA = await a.next('peer');
    const match = await obs.next('peer_match');
    for (const c of [obs, a, b]) assert.equal((await c.next('session'))['state'], 'READY');
    const types = (c: WsClient): string[] => c.messages.map((m) => m['type'] as string);
    assert.deepEqual(types(b), ['session', 'session', 'peer', 'session']);
    assert.deepEqual(types(a), ['session', 'session', 'peer', 'session']);
    assert.deepEqual(types(obs), ['session', 'session', 'peer_match', 'session']);
    assert.equal(toB['ip'], '127.0.0.1');
    assert.equal(toB['port'], 9000);
    assert.equal(toA['localPort'], 9000);
    assert.equal(toA['passphrase'], toB['passphrase']);
    assert.equal(match['latency'], 250);
    // ready from each side (one bridged) → start on both; tally from the relay's admin reaches both.
    a.send({ type: 'ready' });
    await assertQuiet(b, 100);
    b.send({ type: 'ready' });
    assert.deepEqual(await a.next('start'), { type: 'start', stream: 'default' });
    assert.deepEqual(await b.next('start'), { type: 'start', stream: 'default' });
    obs.send({ type: 'tally', state: 'program' });
    assert.equal((await a.next('tally'))['state'], 'program');
    assert.equal((await b.next('tally'))['state'], 'program');
    // A join page on the relay watches the stream (README "Tally"): the last tally at once, then a stale one.
    const page = await ws(relay, 'x-match', tokB);
    await page.next('session');
    page.send({ type: 'watch' });
    assert.deepEqual(await page.next('tally'), { type: 'tally', stream: 'default', state: 'program' });
    obs.send({ type: 'tally', state: 'off', stale: true });
    const stale = await page.next('tally');
    assert.equal(stale['stale'], true);
    assert.equal(typeof stale['age'], 'number');
    assert.equal((await a.next('tally'))['stale'], true);
    page.close();
    // The view through either instance is the same.
    const v1 = await owner.call('GET', '/api/session/x-match', { token: admin });
    const v2 = await relay.call('GET', '/api/session/x-match', { token: admin });
    assert.equal(v1.status, 200);
    assert.deepEqual(v2.json, v1.json);
    assert.equal(v1.json.streams.default.peer_b.present, true);
  });

  test('DELETE on one instance closes the peers on the other', async () => {
    const { token: admin } = await session(owner, 'x-delete');
    const a = await ws(owner, 'x-delete', await peerToken(owner, 'x-delete', admin, 'A'));
    const b = await ws(relay, 'x-delete', await peerToken(owner, 'x-delete', admin, 'B'));
    a.send({ type: 'register', port: 9000 });
    b.send({ type: 'register', port: 9000 });
    await a.next('peer');
    await b.next('peer');
    const del = await relay.call('DELETE', '/api/session/x-delete', { token: admin });
    assert.equal(del.status, 204, del.text);
    for (const c of [a, b]) {
      assert.deepEqual(await c.next('session_closed'), { type: 'session_closed', reason: 'admin_closed' });
      assert.equal((await c.closed).code, 1000);
    }
    assert.equal((await owner.call('GET', '/api/session/x-delete', { token: admin })).status, 410);
    assert.equal((await relay.call('GET', '/api/session/x-delete', { token: admin })).status, 410);
  });

  test('a TTL expiry is delivered once, to peers on both instances', async () => {
    const { token: admin } = await session(relay, 'x-ttl', { ttl: 3 });
    const a = await ws(owner, 'x-ttl', await peerToken(relay, 'x-ttl', admin, 'A'));
    const b = await ws(relay, 'x-ttl', await peerToken(relay, 'x-ttl', admin, 'B'));
    a.send({ type: 'register', port: 9000 });
    b.send({ type: 'register', port: 9000 });
    await a.next('peer');
    await b.next('peer');
    for (const c of [a, b]) {
      assert.deepEqual(await c.next('session_closed', 15_000 * loadFactor()), {
        type: 'session_closed',
        reason: 'ttl_expired',
      });
      await c.closed;
    }
    await sleep(500);
    for (const c of [a, b]) {
      assert.equal(c.messages.filter((m) => m['type'] === 'session_closed').length, 1);
    }
    // One close in the deployment: one log line across both processes, and the stored state says so.
    const lines = (one.proc.output() + two.proc.output())
      .split('\n')
      .filter((l) => l.includes('"session":"x-ttl"') && l.includes('"msg":"session closed"'));
    assert.equal(lines.length, 1, lines.join('\n'));
    const r = new Redis(redis.url);
    try {
      assert.equal(await r.hget(`${prefix}s:x-ttl`, 'closeReason'), 'ttl_expired');
    } finally {
      r.disconnect();
    }
  });

  test('200 registrations racing for 100 slots across both instances: each slot to exactly one peer', async () => {
    const sessions = 50;
    const names = Array.from({ length: sessions }, (_, i) => `race-${i}`);
    const admins = await Promise.all(
      names.map(async (n, i) => (await session(i % 2 ? owner : relay, n)).token),
    );
    // Four peers per session (two on each instance), each with its own token and port.
    const peers: { name: string; port: number; c: WsClient }[] = [];
    await Promise.all(
      names.map(async (name, i) => {
        for (let k = 0; k < 4; k++) {
          const tok = await peerToken(owner, name, admins[i] ?? '', `p${k}`);
          const c = await ws(k % 2 ? owner : relay, name, tok);
          peers.push({ name, port: 10_000 + i * 4 + k, c });
        }
      }),
    );
    for (const p of peers) await p.c.next('session');
    // Every register is sent before any answer is read.
    for (const p of peers) p.c.send({ type: 'register', port: p.port });
    // A winner gets `peer` (its stream matched), a loser an error; nobody gets both.
    const outcome = await Promise.all(
      peers.map(async (p) => {
        for (;;) {
          const m = await p.c.next(undefined, 30_000 * loadFactor());
          if (m['type'] === 'error') return { ...p, won: false, code: m['code'] as string };
          if (m['type'] === 'peer') return { ...p, won: true, code: '' };
        }
      }),
    );
    await sleep(300);
    const winners = outcome.filter((o) => o.won);
    assert.equal(winners.length, 100, `winners: ${winners.length}`);
    for (const o of outcome.filter((x) => !x.won)) assert.equal(o.code, 'SESSION_FULL');
    for (const o of outcome) {
      const types = o.c.messages.map((m) => m['type'] as string);
      assert.equal(types.includes('peer') && types.includes('error'), false, types.join(','));
    }
    // The stored claims are exactly the winners: two per session, each a winner's port.
    for (let i = 0; i < sessions; i++) {
      const name = names[i] ?? '';
      const view = await relay.call('GET', `/api/session/${name}`, { token: admins[i] ?? '' });
      const held = [view.json.streams.default.peer_a, view.json.streams.default.peer_b];
      assert.ok(
        held.every((h) => h !== null),
        name,
      );
      const mine = winners.filter((w) => w.name === name);
      assert.equal(mine.length, 2, name);
      // Both peers of a stream bind the first registration's port (README); the first winner's port.
      assert.ok(mine.some((w) => w.port === held[0].port));
    }
    for (const p of peers) p.c.close();
  });
});

describe('rate limits shared by the instances (per-client counters in Redis)', () => {
  let redis: RedisFixture;
  const both: Instance[] = [];
  before(async () => {
    redis = await startRedis();
    const env = { PUNCH_RATE_LIMIT: '4', PUNCH_RATE_LIMIT_WS_CONNECT: '3' };
    const prefix = `rl${process.pid}:`;
    both.push(await startInstance(redis.url, prefix, env), await startInstance(redis.url, prefix, env));
    await settle(both);
  });
  after(async () => {
    await Promise.all(both.map((i) => i.stop('SIGKILL')));
    await redis?.remove();
  });

  test('creates and WebSocket connects are counted once across both instances', async () => {
    const [x, y] = both as [Instance, Instance];
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await (i % 2 ? x : y).call('POST', '/api/session', { body: { name: `rl-${i}` } });
      statuses.push(r.status);
    }
    // 4 per minute for this client in the whole deployment, whichever instance it reached.
    assert.deepEqual(statuses, [201, 201, 201, 201, 429, 429]);
    const upgrades: string[] = [];
    for (let i = 0; i < 5; i++) {
      try {
        const c = await connect((i % 2 ? x : y).url, 'rl-0', { token: 'x' });
        upgrades.push('open');
        c.close();
      } catch (err) {
        upgrades.push((err as Error).message);
      }
    }
    assert.deepEqual(upgrades, ['open', 'open', 'open', 'upgrade refused: 429', 'upgrade refused: 429']);
  });
});
