import assert from 'node:assert/strict';
import type { Socket } from 'node:dgram';
import { after, test } from 'node:test';
import { loadFactor, waitFor } from '@broadcast-ops/core/testing';
import { srtData } from '../fixtures/srt-packets.ts';
import { startRedis, type RedisFixture } from '../redis-fixture.ts';
import { settle, startInstance, startRelay, type Instance, type RelayProc } from '../redis-instances.ts';
import { recordingSocket, type RecordingSocket } from '../relay-flow.ts';
import { connect, type Msg, type WsClient } from '../ws-helpers.ts';

/**
 * Relays on Redis (docs/relay.md "Relays on Redis"), all real processes on loopback: a `redis-server`, two
 * `punch serve` instances with their own relay off, and `punch relay` processes. Peer A signals through one
 * instance (127.0.0.1), peer B through the other (127.0.0.2); both report `connecting` until the detection
 * window moves the stream to an external relay. Datagrams then cross the relay between the pinned addresses
 * while the instance that allocated is SIGKILLed: the flow never stops, the surviving instance takes the
 * sessions over with the allocation (the peers get the same coordinates back). Then the relay is SIGKILLed:
 * its registration expires, the loss is logged and counted, and both peers are sent a new allocation on the
 * other relay, across which the datagrams flow again.
 */
const prefix = `rr${process.pid}:`;
let redis: RedisFixture | undefined;
const instances: Instance[] = [];
const relays: RelayProc[] = [];
const sockets: Socket[] = [];
const clients: WsClient[] = [];

after(async () => {
  for (const c of clients) c.close();
  for (const s of sockets) s.close();
  await Promise.all([
    ...instances.map((i) => i.stop('SIGKILL')),
    ...relays.map((r) => r.proc.stop('SIGKILL')),
  ]);
  await redis?.remove();
});

const udp = (address: string): Promise<RecordingSocket> => recordingSocket(address, sockets);

const metric = async (i: Instance, re: RegExp): Promise<number> =>
  Number(re.exec((await i.call('GET', '/metrics')).text)?.[1] ?? NaN);

/** Registers a peer and takes messages up to its first `peer`. */
async function join(via: Instance, token: string, localAddress: string, role: string): Promise<WsClient> {
  const c = await connect(via.url, 'rr', { token, localAddress });
  clients.push(c);
  c.send({ type: 'register', port: 9000, role });
  return c;
}

/** Both peers: `ready`, `start`, then `connecting` (the direct rendezvous never connects). */
async function startBoth(a: WsClient, b: WsClient): Promise<void> {
  for (const c of [a, b]) c.send({ type: 'ready' });
  for (const c of [a, b]) await c.next('start', 20_000 * loadFactor());
  for (const c of [a, b]) c.send({ type: 'status', srt: 'connecting' });
}

test('relays on Redis: an external relay carries the link while the allocating instance is SIGKILLed; a killed relay is noticed and the stream re-allocated', async () => {
  redis = await startRedis();
  const env = { PUNCH_RELAY: 'off', PUNCH_RELAY_AFTER_MS: '2000' };
  instances.push(await startInstance(redis.url, prefix, env));
  instances.push(await startInstance(redis.url, prefix, env));
  const first = await startRelay(redis.url, prefix);
  relays.push(first);
  const { owner, relays: others } = await settle(instances);
  const other = others[0] as Instance;
  await waitFor(async () => (await metric(owner, /^punch_relays_up (\d+)/m)) === 1, {
    timeoutMs: 20_000 * loadFactor(),
    what: 'the owner to see the relay up',
  });

  const created = await owner.call('POST', '/api/session', { body: { name: 'rr', ttl: 3600 } });
  assert.equal(created.status, 201, created.text);
  const admin = created.json.token as string;
  const peerToken = async (label: string): Promise<string> =>
    (await owner.call('POST', '/api/session/rr/token', { token: admin, body: { stream: null, label } })).json
      .token as string;
  const tokenA = await peerToken('A');
  const tokenB = await peerToken('B');
  let a = await join(owner, tokenA, '127.0.0.1', 'sender');
  let b = await join(other, tokenB, '127.0.0.2', 'receiver');
  await a.next('peer', 20_000);
  await b.next('peer', 20_000);
  await startBoth(a, b);

  // The window passes: each peer is sent the external relay at its own port.
  const relayed: Msg[] = [await a.next('peer', 30_000), await b.next('peer', 30_000)];
  for (const m of relayed) assert.equal(m['ip'], '127.0.0.1');
  const [portA, portB] = relayed.map((m) => m['port'] as number) as [number, number];
  const view = (await owner.call('GET', '/api/session/rr', { token: admin })).json;
  assert.equal(view.streams.default.path, 'relayed');
  assert.deepEqual(view.streams.default.relay.ports, { peer_a: portA, peer_b: portB });

  // Datagrams across the relay's ports, latched from both sides, in a steady flow (every 20 ms).
  const sa = await udp('127.0.0.1');
  const sb = await udp('127.0.0.2');
  let n = 0;
  let target: [number, number] = [portA, portB];
  const flow = setInterval(() => {
    n++;
    // A's datagrams carry an SRT data header (sequence n): the relay meters them and reports to the owner.
    sa.send(srtData(n), target[0], '127.0.0.1');
    sb.send(`b${n}`, target[1], '127.0.0.1');
  }, 20);
  try {
    await waitFor(() => sb.got.length >= 5 && sa.got.length >= 5, {
      timeoutMs: 10_000 * loadFactor(),
      what: 'datagrams both ways through the relay',
    });
    // docs/relay.md "What the relay measures": the external relay's figures reach the owner on the bus.
    const measuredOn = async (instance: Instance) => {
      let m: { stale: boolean; a_to_b: { packets: number; lost_upstream: number } } | null = null;
      await waitFor(
        async () => {
          m = (await instance.call('GET', '/api/session/rr', { token: admin })).json.streams.default.relay
            .measured;
          return (m?.a_to_b.packets ?? 0) > 0;
        },
        { timeoutMs: 15_000 * loadFactor(), what: "the relay's report in the view" },
      );
      return m as unknown as { stale: boolean; a_to_b: { packets: number; lost_upstream: number } };
    };
    const measured = await measuredOn(owner);
    assert.equal(measured.stale, false);
    assert.equal(measured.a_to_b.lost_upstream, 0);

    // SIGKILL the instance that allocated (the owner): the flow goes on, untouched.
    await owner.stop('SIGKILL');
    const killedAt = sb.got.length;
    await waitFor(() => sb.got.length >= killedAt + 50, {
      timeoutMs: 10_000 * loadFactor(),
      what: 'datagrams to keep crossing the relay after the owner died',
    });
    // The other instance takes over with the allocation: the peers, back, get the same coordinates.
    await settle([other], 30_000);
    a.close();
    b.close();
    a = await join(other, tokenA, '127.0.0.1', 'sender');
    b = await join(other, tokenB, '127.0.0.2', 'receiver');
    const back = [await a.next('peer', 20_000), await b.next('peer', 20_000)];
    assert.deepEqual(
      back.map((m) => m['port'] as number),
      [portA, portB],
    );
    const adopted = (await other.call('GET', '/api/session/rr', { token: admin })).json;
    assert.equal(adopted.streams.default.path, 'relayed');
    // The relay reports to the new owner.
    assert.ok((await measuredOn(other)).a_to_b.packets > measured.a_to_b.packets);
    const flowing = sb.got.length;
    await waitFor(() => sb.got.length >= flowing + 50, {
      timeoutMs: 10_000 * loadFactor(),
      what: 'datagrams still crossing the relay under the new owner',
    });

    // A second relay comes up; the first is SIGKILLed: its loss is noticed and the stream moves.
    const second = await startRelay(redis.url, prefix);
    relays.push(second);
    await waitFor(async () => (await metric(other, /^punch_relays_up (\d+)/m)) === 2, {
      timeoutMs: 20_000 * loadFactor(),
      what: 'two relays up',
    });
    await first.proc.stop('SIGKILL');
    const moved = [await a.next('peer', 30_000 * loadFactor()), await b.next('peer', 30_000 * loadFactor())];
    const ports2 = moved.map((m) => m['port'] as number) as [number, number];
    assert.notDeepEqual(ports2, [portA, portB]);
    assert.equal(await metric(other, /^punch_relay_losses_total (\d+)/m), 1);
    assert.equal(await metric(other, /^punch_relays_up (\d+)/m), 1);
    assert.equal(
      await metric(other, /^punch_relay_fallbacks_total\{outcome="allocated",reason="relay_lost"} (\d+)/m),
      1,
    );
    const moved2 = (await other.call('GET', '/api/session/rr', { token: admin })).json;
    assert.equal(moved2.streams.default.path, 'relayed');
    assert.deepEqual(moved2.streams.default.relay.ports, { peer_a: ports2[0], peer_b: ports2[1] });
    target = ports2;
    const before = sb.got.length;
    await waitFor(() => sb.got.length >= before + 20 && sa.got.length >= 20, {
      timeoutMs: 10_000 * loadFactor(),
      what: 'datagrams across the new relay',
    });
    assert.match(other.proc.output(), /"outcome":"relay_lost"[^\n]*stopped renewing its registration/);
  } finally {
    clearInterval(flow);
  }
});
