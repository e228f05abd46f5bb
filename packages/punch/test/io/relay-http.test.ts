import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { get } from 'node:http';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { waitFor } from '@broadcast-ops/core/testing';
import { redisKeys } from '../../src/io/redis-keys.ts';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';
import { request, startRelay, type RelayProc } from '../redis-instances.ts';

/**
 * `punch relay`'s own `/health` and `/metrics` (docs/relay.md "Deploying a separate relay") over real
 * sockets: a `redis-server`, a `punch relay` process with `PUNCH_RELAY_HTTP_PORT=0`. An allocation asked for
 * on its Redis channel, a datagram from an address not pinned to it: the drop is counted on the relay's
 * own `/metrics`; the release is counted as an end. Redis SIGKILLed: `/health` turns 503 once the
 * registration could not be renewed for its expiry. A foreign Host gets 421.
 */
const prefix = `rh${process.pid}:`;
let redis: RedisFixture | undefined;
let relay: RelayProc | undefined;
const clients: Redis[] = [];

after(async () => {
  for (const c of clients) c.disconnect();
  await relay?.proc.stop('SIGKILL');
  await redis?.remove();
});

test('punch relay serves /health and /metrics: its drops, ends and registration; 503 once Redis is gone', async () => {
  redis = await startRedis();
  relay = await startRelay(redis.url, prefix, { PUNCH_RELAY_HTTP_PORT: '0' });
  const url = /"http":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(relay.proc.output())?.[1];
  assert.ok(url, 'the start line names the HTTP URL');
  const metrics = async () => (await request(url, 'GET', '/metrics')).text;

  let health = await request(url, 'GET', '/health');
  assert.equal(health.status, 200, health.text);
  assert.equal(health.json.relay, relay.id);
  assert.equal(health.json.registration.state, 'current');
  assert.equal(health.json.redis.reachable, true);
  assert.match(await metrics(), /^punch_relay_registered 1$/m);

  // An allocation, as a broker asks for one (docs/relay.md "Relays on Redis").
  const keys = redisKeys(prefix);
  const sub = new Redis(redis.url);
  const pub = new Redis(redis.url);
  clients.push(sub, pub);
  const answers: Record<string, unknown>[] = [];
  sub.on('message', (_c: string, text: string) => answers.push(JSON.parse(text) as Record<string, unknown>));
  await sub.subscribe(keys.bus('testbroker'));
  const ask = {
    t: 'allocate',
    rq: 'q1',
    from: 'testbroker',
    sessionId: 'sess1',
    peers: ['127.0.0.1', '127.0.0.2'],
  };
  await pub.publish(keys.relayRequests(relay.id), JSON.stringify(ask));
  const allocated = await waitFor(() => answers.find((a) => a['t'] === 'relay_allocated'), {
    timeoutMs: 10_000,
    what: 'the allocation answer',
  });
  const ports = allocated['ports'] as [number, number];
  await waitFor(async () => /^punch_relay_allocations 1$/m.test(await metrics()), {
    timeoutMs: 5_000,
    what: 'the allocation on /metrics',
  });

  // A third address on side 0's port: dropped and counted.
  const stranger = createSocket('udp4');
  await new Promise<void>((resolve) => stranger.bind(0, '127.0.0.3', resolve));
  try {
    for (let k = 0; k < 3; k++) stranger.send(Buffer.from('x'), ports[0], '127.0.0.1');
    await waitFor(
      async () => /^punch_relay_dropped_datagrams_total\{reason="unpinned_source"} 3$/m.test(await metrics()),
      { timeoutMs: 5_000, what: 'the unpinned drops counted' },
    );
  } finally {
    stranger.close();
  }

  await pub.publish(keys.relayRequests(relay.id), JSON.stringify({ t: 'release', id: allocated['id'] }));
  await waitFor(
    async () => /^punch_relay_allocations_ended_total\{reason="released"} 1$/m.test(await metrics()),
    { timeoutMs: 5_000, what: 'the release counted' },
  );

  // Core's Host guard: a foreign name is refused before any route.
  // (fetch does not let a caller set Host; node:http does.)
  const foreign = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = get(`${url}/metrics`, { headers: { host: 'attacker.example' } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
  assert.equal(foreign.status, 421);
  assert.equal((JSON.parse(foreign.body) as { error: string }).error, 'HOST_NOT_ALLOWED');

  // Redis gone: the registration cannot be renewed; after its expiry (3 s here) the relay says so.
  await redis.stop('SIGKILL');
  health = await waitFor(
    async () => {
      const h = await request(url, 'GET', '/health');
      return h.status === 503 && h.json.registration.state === 'expired' ? h : undefined;
    },
    { timeoutMs: 20_000, what: '/health degraded after the registration expired' },
  );
  assert.equal(health.json.status, 'degraded');
  assert.equal(health.json.redis.reachable, false);
  const text = await metrics();
  assert.match(text, /^punch_relay_registered 0$/m);
  assert.match(text, /^punch_relay_redis_up 0$/m);
  assert.ok(Number(/^punch_relay_registration_age_seconds (\S+)$/m.exec(text)?.[1]) >= 3);
});
