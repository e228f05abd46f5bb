import assert from 'node:assert/strict';
import type { Socket } from 'node:dgram';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { waitFor } from '@broadcast-ops/core/testing';
import { redisKeys } from '../../src/io/redis-keys.ts';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';
import {
  request,
  settle,
  startInstance,
  startRelay,
  type Instance,
  type RelayProc,
} from '../redis-instances.ts';
import {
  burst,
  recordingSocket,
  steadyFlow,
  stillForwardingAfter,
  type RecordingSocket,
} from '../relay-flow.ts';
import { connect, type Msg, type WsClient } from '../ws-helpers.ts';

/**
 * Renewal of relay allocations and late answers (docs/relay.md "Renewal"), real processes on loopback: a
 * `redis-server` and a `punch serve` instance with its own relay off. First a fake relay registered by the
 * test answers the allocation after the broker's 2 s wait: the broker releases it at once on the relay's
 * channel. Then a `punch relay` with a 6 s lifetime carries a stream whose session expires in 8 s (in
 * overtime after, media flowing): the owner renews the allocation through Redis, and datagrams keep
 * crossing well past its first lifetime, with no allocation ended as expired; the sender's declared
 * bitrate caps the allocation on that relay (docs/relay.md "The cap per session").
 */
const prefix = `rn${process.pid}:`;
const keys = redisKeys(prefix);
let redis: RedisFixture | undefined;
let instance: Instance | undefined;
let relay: RelayProc | undefined;
const sockets: Socket[] = [];
const clients: WsClient[] = [];
const conns: Redis[] = [];

after(async () => {
  for (const c of clients) c.close();
  for (const s of sockets) s.close();
  for (const c of conns) c.disconnect();
  await instance?.stop('SIGKILL');
  await relay?.proc.stop('SIGKILL');
  await redis?.remove();
});

const udp = (address: string): Promise<RecordingSocket> => recordingSocket(address, sockets);

const metric = async (url: string, re: RegExp): Promise<number> =>
  Number(re.exec((await request(url, 'GET', '/metrics')).text)?.[1] ?? NaN);

/** A session `name` (ttl seconds), both peers registered, started, reporting `connecting`. */
async function startedPair(
  via: Instance,
  name: string,
  ttl: number,
  meta: Record<string, unknown> = {},
): Promise<[WsClient, WsClient]> {
  const created = await via.call('POST', '/api/session', { body: { name, ttl } });
  assert.equal(created.status, 201, created.text);
  const admin = created.json.token as string;
  const pair: WsClient[] = [];
  for (const [label, ip, role] of [
    ['A', '127.0.0.1', 'sender'],
    ['B', '127.0.0.2', 'receiver'],
  ] as const) {
    const token = (
      await via.call('POST', `/api/session/${name}/token`, { token: admin, body: { stream: null, label } })
    ).json.token as string;
    const c = await connect(via.url, name, { token, localAddress: ip });
    clients.push(c);
    c.send({ type: 'register', port: 9000, role, ...(role === 'sender' ? { meta } : {}) });
    pair.push(c);
  }
  const [a, b] = pair as [WsClient, WsClient];
  for (const c of [a, b]) await c.next('peer', 20_000);
  for (const c of [a, b]) c.send({ type: 'ready' });
  for (const c of [a, b]) await c.next('start', 20_000);
  for (const c of [a, b]) c.send({ type: 'status', srt: 'connecting' });
  return [a, b];
}

test('a relay that answers after the 2 s wait: its allocation is released at once', async () => {
  redis = await startRedis();
  // The lifetime the broker asks for and renews to: 6 s (the second test).
  instance = await startInstance(redis.url, prefix, {
    PUNCH_RELAY: 'off',
    PUNCH_RELAY_AFTER_MS: '2000',
    PUNCH_RELAY_LIFETIME_MS: '6000',
  });
  await settle([instance]);
  // A relay of the test's own: registered like one, answering 3 s late.
  const sub = new Redis(redis.url);
  const pub = new Redis(redis.url);
  conns.push(sub, pub);
  const seen: Record<string, unknown>[] = [];
  sub.on('message', (_c: string, text: string) => {
    const m = JSON.parse(text) as Record<string, unknown>;
    seen.push(m);
    if (m['t'] !== 'allocate') return;
    const answer = {
      t: 'relay_allocated',
      rq: m['rq'],
      id: 'slow.r1',
      address: '127.0.0.1',
      ports: [40000, 40001],
    };
    setTimeout(() => void pub.publish(keys.bus(String(m['from'])), JSON.stringify(answer)), 3_000);
  });
  await sub.subscribe(keys.relayRequests('slow'));
  const reg = {
    id: 'slow',
    address: '127.0.0.1',
    ports: '0-0',
    capacity: 10,
    free: 10,
    at: Date.now(),
    kind: 'process',
  };
  await pub
    .multi()
    .set(keys.relay('slow'), JSON.stringify(reg), 'PX', 120_000)
    .sadd(keys.relays, 'slow')
    .exec();
  await waitFor(async () => (await metric(instance!.url, /^punch_relays_up (\d+)/m)) === 1, {
    timeoutMs: 20_000,
    what: 'the broker to see the slow relay',
  });

  await startedPair(instance, 'late', 3600);
  await waitFor(() => seen.some((m) => m['t'] === 'allocate'), {
    timeoutMs: 30_000,
    what: 'the allocate request',
  });
  const release = await waitFor(() => seen.find((m) => m['t'] === 'release'), {
    timeoutMs: 20_000,
    what: 'the late allocation released',
  });
  assert.deepEqual(release, { t: 'release', id: 'slow.r1' });
  assert.equal(await metric(instance.url, /^punch_relay_late_answers_total (\d+)/m), 1);
  assert.match(instance.proc.output(), /"outcome":"relay_late_answer"/);
  await pub.multi().del(keys.relay('slow')).srem(keys.relays, 'slow').exec();
  await sub.unsubscribe();
});

test('an allocation renewed by its owner through Redis keeps forwarding past its first lifetime', async () => {
  assert.ok(redis && instance, 'the first test started Redis and the broker');
  relay = await startRelay(redis.url, prefix, {
    PUNCH_RELAY_LIFETIME_MS: '6000',
    PUNCH_RELAY_HTTP_PORT: '0',
  });
  const relayUrl = /"http":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(relay.proc.output())?.[1] ?? '';
  await waitFor(async () => (await metric(instance!.url, /^punch_relays_up (\d+)/m)) === 1, {
    timeoutMs: 20_000,
    what: 'the broker to see the punch relay alone',
  });
  // The session expires in 8 s: its allocation lives at most that long unless renewed; in overtime after.
  // The sender declares 100 kbit/s: the cap (18,750 bytes/s) crosses Redis with the request.
  const [a, b] = await startedPair(instance, 'long', 8, { bitrate: 100_000 });
  const relayed: Msg[] = [await a.next('peer', 30_000), await b.next('peer', 30_000)];
  const [portA, portB] = relayed.map((m) => m['port'] as number) as [number, number];
  for (const c of [a, b]) c.send({ type: 'status', srt: 'connected' });
  const allocatedAt = Date.now();

  const sa = await udp('127.0.0.1');
  const sb = await udp('127.0.0.2');
  const flow = steadyFlow(sa, sb, [portA, portB]);
  try {
    await waitFor(() => sb.got.length >= 5, { timeoutMs: 10_000, what: 'datagrams through the relay' });
    // Past two of its first lifetimes (at most 8 s each), then datagrams still arriving both ways.
    await stillForwardingAfter(sb, allocatedAt, 17_000);
    assert.ok(sa.got.length >= 10);
    // Far above the declared rate: most are dropped at the relay.
    burst(sa, portA);
    await waitFor(
      async () =>
        (await metric(relayUrl, /^punch_relay_dropped_datagrams_total\{reason="over_rate"} (\d+)/m)) >= 30,
      { timeoutMs: 10_000, what: 'the datagrams above the declared cap dropped as over_rate' },
    );
  } finally {
    flow.stop();
  }
  assert.equal(await metric(relayUrl, /^punch_relay_allocations_ended_total\{reason="expired"} (\d+)/m), 0);
  assert.equal(await metric(relayUrl, /^punch_relay_allocations (\d+)/m), 1);
  assert.ok(
    (relay.proc.output().match(/relay allocation renewed/g) ?? []).length >= 2,
    'renewed at least twice',
  );
  assert.match(instance.proc.output(), /"outcome":"relay_renewed"/);
});
