import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { RelayAllocations } from '../../src/domain/relay-allocations.ts';
import { buildRelayHttpApp } from '../../src/io/relay/relay-http.ts';

/**
 * `punch relay`'s `/health` and `/metrics` (docs/relay.md "Deploying a separate relay") through fastify's
 * inject: the relay's own counters under the broker's names, its registration in Redis current or expired,
 * and core's Host guard on both routes. The relay's allocations are the pure domain object: no socket.
 */
function relayApp() {
  const clock = new ManualClock(1_700_000_000_000);
  const allocations = new RelayAllocations(clock, { allow: ['127.0.0.0/8'] });
  const relay = { allocations, sendQueueDrops: 0 };
  const service = {
    id: 'rel1',
    registeredAt: undefined as number | undefined,
    reachable: true,
    ttlMs: 10_000,
  };
  const app = buildRelayHttpApp({
    logger: silentLogger(),
    registry: createMetricsRegistry(),
    relay,
    service,
    capacity: 100,
    allowedHosts: ['relay.example.net'],
    now: () => clock.now(),
    monotonicMs: () => clock.monotonicMs(),
  });
  const get = (url: string, host = 'relay.example.net') =>
    app.inject({ method: 'GET', url, headers: { host } });
  return { clock, allocations, relay, service, app, get };
}

test('relay /metrics: drops by reason, ends by reason, allocations held, under the broker relay names', async () => {
  const r = relayApp();
  const made = r.allocations.allocate({ sessionId: 's1', peers: ['127.0.0.1', '127.0.0.2'] });
  assert.ok(made.ok);
  r.allocations.admit(made.allocation.id, 0, { address: '127.0.0.9', port: 5000 }, 100);
  r.allocations.admit(made.allocation.id, 0, { address: '127.0.0.1', port: 5000 }, 100);
  r.relay.sendQueueDrops = 3;
  const second = r.allocations.allocate({ sessionId: 's2', peers: ['127.0.0.1', '127.0.0.2'] });
  assert.ok(second.ok);
  r.allocations.release(second.allocation.id);
  r.service.registeredAt = r.clock.now() - 2_500;
  const res = await r.get('/metrics');
  assert.equal(res.statusCode, 200);
  assert.match(res.headers['content-type'] as string, /^text\/plain/);
  const text = res.body;
  assert.match(text, /^punch_relay_allocations 1$/m);
  assert.match(text, /^punch_relay_dropped_datagrams_total\{reason="unpinned_source"} 1$/m);
  assert.match(text, /^punch_relay_dropped_datagrams_total\{reason="peer_not_latched"} 1$/m);
  assert.match(text, /^punch_relay_dropped_datagrams_total\{reason="send_queue"} 3$/m);
  assert.match(text, /^punch_relay_allocations_ended_total\{reason="released"} 1$/m);
  assert.match(text, /^punch_relay_redis_up 1$/m);
  assert.match(text, /^punch_relay_registered 1$/m);
  assert.match(text, /^punch_relay_registration_age_seconds 2\.5$/m);
  assert.match(text, /^punch_relay_capacity 100$/m);
});

test('relay /health: 503 before the first registration, 200 while it is current, 503 once it expired or Redis is cut', async () => {
  const r = relayApp();
  let res = await r.get('/health');
  assert.equal(res.statusCode, 503);
  assert.equal(res.json().status, 'degraded');
  assert.deepEqual(res.json().registration, {
    state: 'never',
    at: null,
    ageSeconds: null,
    expiresAfterMs: 10_000,
  });
  assert.match((await r.get('/metrics')).body, /^punch_relay_registration_age_seconds Nan$/m);

  r.service.registeredAt = r.clock.now();
  r.clock.advance(1_000);
  res = await r.get('/health');
  assert.equal(res.statusCode, 200);
  assert.equal(res.json().status, 'ok');
  assert.equal(res.json().relay, 'rel1');
  assert.equal(res.json().uptime, 1);
  assert.deepEqual(res.json().redis, { reachable: true });
  assert.equal(res.json().registration.state, 'current');
  assert.equal(res.json().registration.ageSeconds, 1);
  assert.equal(res.json().registration.at, new Date(r.service.registeredAt).toISOString());
  assert.deepEqual(res.json().allocations, { held: 0, capacity: 100 });
  assert.equal(
    (await r.app.inject({ method: 'HEAD', url: '/health', headers: { host: '127.0.0.1' } })).statusCode,
    200,
  );

  // Not renewed for its whole expiry: the brokers no longer see this relay.
  r.clock.advance(9_000);
  res = await r.get('/health');
  assert.equal(res.statusCode, 503);
  assert.equal(res.json().registration.state, 'expired');
  assert.match((await r.get('/metrics')).body, /^punch_relay_registered 0$/m);

  r.service.registeredAt = r.clock.now();
  r.service.reachable = false;
  res = await r.get('/health');
  assert.equal(res.statusCode, 503);
  assert.deepEqual(res.json().redis, { reachable: false });
});

test('relay HTTP: the Host guard answers 421 to a foreign name on both routes; nothing but GET and HEAD', async () => {
  const r = relayApp();
  for (const url of ['/health', '/metrics']) {
    const res = await r.get(url, 'attacker.example');
    assert.equal(res.statusCode, 421, url);
    assert.equal(res.json().error, 'HOST_NOT_ALLOWED');
  }
  assert.equal((await r.get('/metrics', '127.0.0.1:9796')).statusCode, 200);
  assert.equal((await r.get('/metrics', 'localhost')).statusCode, 200);
  const post = await r.app.inject({ method: 'POST', url: '/metrics', headers: { host: '127.0.0.1' } });
  assert.equal(post.statusCode, 404);
  assert.equal(post.json().error, 'NOT_FOUND');
});
