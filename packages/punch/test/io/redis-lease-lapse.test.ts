import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { loadFactor, waitFor } from '@broadcast-ops/core/testing';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';
import { settle, startInstance, type Instance } from '../redis-instances.ts';
import { connect, type WsClient } from '../ws-helpers.ts';

/**
 * A Redis outage longer than the owner lease (docs/multi-instance.md "Failures"), with the order of events
 * that made test/redis-faults.test.ts fail now and then fixed: when Redis answers again the lease key has
 * expired, and the relay instance reads "no owner" before the owner renews its lease. The owner is held
 * (SIGSTOP) until the relay has logged that, then released; it renews before the relay may run an election
 * (half a lease after Redis returned). The relay's peer must still be connected and matched: its `ready`
 * reaches the owner and both peers get `start`.
 */
const LEASE_MS = 10_000;
const L = (ms: number): number => ms * loadFactor();
let redis: RedisFixture | undefined;
const instances: Instance[] = [];
const clients: WsClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const i of instances) i.proc.child.kill('SIGCONT');
  await Promise.all(instances.splice(0).map((i) => i.stop('SIGKILL')));
  await redis?.remove();
});

test('the lease lapsed during a Redis outage and a relay saw no owner: its peers stay connected and get start', async () => {
  redis = await startRedis();
  const prefix = `lapse${process.pid}:`;
  const env = { PUNCH_REDIS_LEASE_MS: String(LEASE_MS) };
  instances.push(await startInstance(redis.url, prefix, env), await startInstance(redis.url, prefix, env));
  const { owner, relays } = await settle(instances);
  const relay = relays[0] as Instance;

  const created = await relay.call('POST', '/api/session', { body: { name: 'lapse', ttl: 3600 } });
  assert.equal(created.status, 201, created.text);
  const admin = created.json.token as string;
  const token = async (label: string): Promise<string> => {
    const t = await relay.call('POST', '/api/session/lapse/token', { token: admin, body: { label } });
    assert.equal(t.status, 201, t.text);
    return t.json.token as string;
  };
  const a = await connect(owner.url, 'lapse', { token: await token('A') });
  const b = await connect(relay.url, 'lapse', { token: await token('B') });
  clients.push(a, b);
  let bClosed: { code: number; reason: string } | undefined;
  void b.closed.then((c) => (bClosed = c));
  a.send({ type: 'register', port: 9000, meta: { clientId: 'A' } });
  b.send({ type: 'register', port: 9000, meta: { clientId: 'B' } });
  await Promise.all([a.next('peer', L(30_000)), b.next('peer', L(30_000))]);

  // The owner cannot renew; Redis goes away for longer than the lease, so the lease key is gone on return.
  owner.proc.child.kill('SIGSTOP');
  const stoppedAt = Date.now();
  await redis.stop('SIGTERM');
  await new Promise((r) => setTimeout(r, Math.max(0, LEASE_MS + 1_000 - (Date.now() - stoppedAt))));
  await redis.start();
  await relay.proc.waitForOutput(/"owner":null,"msg":"owner of the sessions changed"/, 30_000);
  owner.proc.child.kill('SIGCONT');

  for (const i of [owner, relay]) {
    await waitFor(async () => (await i.health()).status === 200, {
      timeoutMs: L(20_000),
      what: 'health 200',
    });
  }
  assert.equal((await owner.health()).json.store.role, 'owner', 'the owner took its lease back');
  assert.equal(bClosed, undefined, `the relay closed its peer's socket: ${JSON.stringify(bClosed)}`);
  a.send({ type: 'ready' });
  b.send({ type: 'ready' });
  assert.deepEqual(await a.next('start', L(15_000)), { type: 'start', stream: 'default' });
  assert.deepEqual(await b.next('start', L(15_000)), { type: 'start', stream: 'default' });
});
