import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { srtAck, srtAckAck, srtData } from '../fixtures/srt-packets.ts';
import { LOOPBACK_RELAY, startTestServer, type TestServer } from '../helpers.ts';
import { burst, steadyFlow, stillForwardingAfter } from '../relay-flow.ts';
import { connect, type Msg, type WsClient } from '../ws-helpers.ts';

/**
 * The broker's fallback to its in-process relay over real sockets on loopback (docs/relay.md "Detection"):
 * two WebSocket peers from 127.0.0.1 and 127.0.0.2 that report `connecting` and never `connected`; after
 * the detection window each is sent the relay's address and its own relay port; the view, `/connect` and
 * `/metrics` say relayed; UDP datagrams cross the relay's real ports between the two pinned addresses, a
 * third address is dropped and counted; DELETE releases the allocation. The relay's policy refuses
 * loopback peers unless allowed: this test allows 127.0.0.0/8.
 */
const udp = async (address: string): Promise<Socket & { got: { data: string; port: number }[] }> => {
  const s = createSocket('udp4') as Socket & { got: { data: string; port: number }[] };
  s.got = [];
  s.on('message', (m, r) => s.got.push({ data: m.toString(), port: r.port }));
  await new Promise<void>((resolve) => s.bind(0, address, resolve));
  return s;
};

/** A broker whose relay binds loopback, allows loopback peers and falls back after 2 s. */
const relayServer = (relay: Record<string, unknown> = {}): Promise<TestServer> =>
  startTestServer({ config: { relay: { ...LOOPBACK_RELAY, ...relay } } });

/**
 * A (sender, declaring `meta`) and B register, get each other, `ready`, `start`, report `connecting`; after
 * the window each is sent its relay port: [A's, B's].
 */
async function relayedPorts(
  a: WsClient,
  b: WsClient,
  meta: Record<string, unknown> = {},
): Promise<[number, number]> {
  a.send({ type: 'register', port: 9000, role: 'sender', meta });
  await a.next('session');
  b.send({ type: 'register', port: 9000, role: 'receiver' });
  for (const c of [a, b]) await c.next('peer');
  for (const c of [a, b]) c.send({ type: 'ready' });
  for (const c of [a, b]) await c.next('start');
  for (const c of [a, b]) c.send({ type: 'status', srt: 'connecting' });
  return [(await a.next('peer', 20_000))['port'] as number, (await b.next('peer', 20_000))['port'] as number];
}

/** A session `name` and two peers connected from 127.0.0.1 (A) and 127.0.0.2 (B), not yet registered. */
async function twoPeers(t: TestServer, name: string, ttl = 600) {
  const created = await t.call('POST', '/api/session', { body: { name, ttl } });
  assert.equal(created.status, 201, created.text);
  const admin = created.json.token as string;
  const peerToken = async (label: string) =>
    (await t.call('POST', `/api/session/${name}/token`, { token: admin, body: { stream: null, label } })).json
      .token as string;
  const a = await connect(t.url, name, { token: await peerToken('A'), localAddress: '127.0.0.1' });
  const b = await connect(t.url, name, { token: await peerToken('B'), localAddress: '127.0.0.2' });
  return { admin, a, b };
}

test('a stream connected directly is counted once as punch_sessions_total{path="direct"}', async () => {
  const t = await startTestServer({ config: { relay: { fallbackAfterMs: 2_000 } } });
  try {
    const { a, b } = await twoPeers(t, 'dc');
    a.send({ type: 'register', port: 9000, role: 'sender' });
    b.send({ type: 'register', port: 9000, role: 'receiver' });
    for (const c of [a, b]) await c.next('peer');
    for (const c of [a, b]) c.send({ type: 'ready' });
    for (const c of [a, b]) await c.next('start');
    for (const c of [a, b]) c.send({ type: 'status', srt: 'connected' });
    await waitFor(
      async () => /punch_sessions_total\{path="direct"} 1\b/.test((await t.call('GET', '/metrics')).text),
      { timeoutMs: 10_000, what: 'the direct connection counted' },
    );
    await new Promise((r) => setTimeout(r, 500));
    const text = (await t.call('GET', '/metrics')).text;
    assert.match(text, /punch_sessions_total\{path="direct"} 1\b/);
    assert.match(text, /punch_sessions_total\{path="relayed"} 0\b/);
    for (const c of [a, b]) c.close();
  } finally {
    await t.close();
  }
});

test('over real sockets: RELAYING after the window, relay coordinates in peer and /connect, datagrams cross the pinned ports', async () => {
  const t = await relayServer();
  const sockets: Socket[] = [];
  try {
    const { admin, a, b } = await twoPeers(t, 'rb');
    a.send({ type: 'register', port: 9000, role: 'sender' });
    await a.next('session');
    b.send({ type: 'register', port: 9000, role: 'receiver' });
    const direct = [await a.next('peer'), await b.next('peer')];
    assert.deepEqual(
      direct.map((m) => String(m['ip'])),
      ['127.0.0.2', '127.0.0.1'],
    );
    for (const c of [a, b]) c.send({ type: 'ready' });
    for (const c of [a, b]) await c.next('start');
    for (const c of [a, b]) c.send({ type: 'status', srt: 'connecting' });

    // The window passes without `connected`: each peer is sent the relay, at its own port.
    const relayed: Msg[] = [await a.next('peer', 20_000), await b.next('peer', 20_000)];
    for (const m of relayed) assert.deepEqual([m['ip'], m['localPort']], ['127.0.0.1', 9000]);
    const [portA, portB] = relayed.map((m) => m['port'] as number) as [number, number];
    assert.notEqual(portA, portB);
    const view = await t.call('GET', '/api/session/rb', { token: admin });
    assert.equal(view.json.state, 'RELAYING');
    assert.equal(view.json.streams.default.state, 'relaying');
    assert.equal(view.json.streams.default.path, 'relayed');
    assert.deepEqual(view.json.streams.default.relay.ports, { peer_a: portA, peer_b: portB });
    const strings = await t.call('GET', '/api/session/rb/connect', { token: admin });
    assert.match(strings.json.for_peer_a['live-transmit'], new RegExp(`srt://127\\.0\\.0\\.1:${portA}\\?`));
    assert.match(strings.json.for_peer_b['live-transmit'], new RegExp(`srt://127\\.0\\.0\\.1:${portB}\\?`));
    assert.match(strings.json.for_peer_a['live-transmit'], /port=9000/);

    // Datagrams through the relay's real ports: A's first one latches A (its partner has not sent yet).
    const sa = await udp('127.0.0.1');
    const sb = await udp('127.0.0.2');
    const stranger = await udp('127.0.0.3');
    sockets.push(sa, sb, stranger);
    sa.send('a1', portA, '127.0.0.1');
    const metric = async (re: RegExp): Promise<number> => {
      const text = (await t.call('GET', '/metrics')).text;
      return Number(re.exec(text)?.[1] ?? 0);
    };
    await waitFor(async () => (await metric(/reason="peer_not_latched"} (\d+)/)) >= 1, {
      timeoutMs: 10_000,
      what: 'the first datagram to be dropped as peer_not_latched',
    });
    sb.send('b1', portB, '127.0.0.1');
    await waitFor(() => sa.got.length >= 1, { timeoutMs: 10_000, what: 'b1 at A' });
    assert.deepEqual(sa.got[0], { data: 'b1', port: portA });
    sa.send('a2', portA, '127.0.0.1');
    await waitFor(() => sb.got.length >= 1, { timeoutMs: 10_000, what: 'a2 at B' });
    assert.deepEqual(sb.got[0], { data: 'a2', port: portB });
    // A third address may not use A's port: dropped and counted, nothing reaches B.
    stranger.send('x', portA, '127.0.0.1');
    await waitFor(async () => (await metric(/reason="unpinned_source"} (\d+)/)) >= 1, {
      timeoutMs: 10_000,
      what: 'the stranger to be dropped as unpinned_source',
    });
    assert.deepEqual(
      sb.got.map((g) => g.data),
      ['a2'],
    );

    // docs/relay.md "What the relay measures": SRT headers through the ports. A sends data 100, 101, 104
    // (two lost before the relay) and 102 again flagged R; B acknowledges with ACK 1 (RTT 5 ms); A answers
    // ACKACK 1. The view and /metrics show what the relay read.
    for (const seq of [100, 101, 104]) sa.send(srtData(seq), portA, '127.0.0.1');
    sa.send(srtData(102, true), portA, '127.0.0.1');
    await waitFor(() => sb.got.length >= 5, { timeoutMs: 10_000, what: 'the data packets at B' });
    sb.send(srtAck(1, 5_000), portB, '127.0.0.1');
    await waitFor(() => sa.got.length >= 2, { timeoutMs: 10_000, what: 'the ACK at A' });
    sa.send(srtAckAck(1), portA, '127.0.0.1');
    await waitFor(() => sb.got.length >= 6, { timeoutMs: 10_000, what: 'the ACKACK at B' });
    const measured = (await t.call('GET', '/api/session/rb', { token: admin })).json.streams.default.relay
      .measured;
    assert.equal(measured.stale, false);
    assert.equal(measured.a_to_b.packets, 4);
    assert.equal(measured.a_to_b.lost_upstream, 2);
    assert.equal(measured.a_to_b.retransmitted, 1);
    assert.equal(measured.a_to_b.rtt_ms, 5);
    assert.ok(measured.a_to_b.sender_leg_ms >= 0, JSON.stringify(measured));
    assert.equal(measured.b_to_a.packets, 0);
    assert.equal(await metric(/punch_relay_upstream_lost_packets_total\{direction="a_to_b"} (\d+)/), 2);
    assert.equal(await metric(/punch_relay_srt_retransmitted_packets_total\{direction="a_to_b"} (\d+)/), 1);
    assert.equal(await metric(/punch_relay_packets_total\{direction="a_to_b"} (\d+)/), 6);
    assert.ok((await metric(/punch_relay_bytes_total\{direction="b_to_a"} (\d+)/)) > 44);
    sa.got.length = 0;
    sb.got.length = 0;

    // SRT up over the relay: CONNECTED, path relayed.
    b.send({ type: 'status', srt: 'connected' });
    await waitFor(
      async () => (await t.call('GET', '/api/session/rb', { token: admin })).json.state === 'CONNECTED',
      {
        timeoutMs: 10_000,
        what: 'CONNECTED over the relay',
      },
    );
    assert.equal(
      (await t.call('GET', '/api/session/rb', { token: admin })).json.streams.default.path,
      'relayed',
    );
    assert.equal(await metric(/punch_relay_fallbacks_total\{outcome="allocated",reason=""} (\d+)/), 1);
    // Counted once, by the path it got connected on (a second `connected` report counts nothing more).
    a.send({ type: 'status', srt: 'connected' });
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await metric(/punch_sessions_total\{path="relayed"} (\d+)/), 1);
    assert.equal(await metric(/punch_sessions_total\{path="direct"} (\d+)/), 0);

    // DELETE releases the allocation: its ports forward nothing more.
    assert.equal((await t.call('DELETE', '/api/session/rb', { token: admin })).status, 204);
    assert.equal(await metric(/punch_relay_allocations (\d+)/), 0);
    assert.equal(await metric(/punch_relay_allocations_ended_total\{reason="released"} (\d+)/), 1);
    sa.send('a3', portA, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(sb.got, []);
  } finally {
    for (const s of sockets) s.close();
    await t.close();
  }
});

test("the sender's declared bitrate caps its allocation: bitrate x 1.5, datagrams above it dropped as over_rate", async () => {
  const t = await relayServer();
  const sockets: Socket[] = [];
  try {
    const { a, b } = await twoPeers(t, 'cap');
    // 100 kbit/s declared: a cap of 18,750 bytes/s with a burst of 250 ms (4,687 bytes), against the
    // relay's default of 2.5 MB/s (a burst of 625 kB) that would pass everything sent below.
    const [portA, portB] = await relayedPorts(a, b, { bitrate: 100_000 });
    const sa = await udp('127.0.0.1');
    const sb = await udp('127.0.0.2');
    sockets.push(sa, sb);
    // Latch both sides, then 60 datagrams of 1,200 bytes (72 kB) from A at once.
    sb.send('b1', portB, '127.0.0.1');
    await waitFor(async () => /reason="peer_not_latched"} 1\b/.test((await t.call('GET', '/metrics')).text), {
      timeoutMs: 10_000,
      what: "B's first datagram",
    });
    sa.send('a1', portA, '127.0.0.1');
    await waitFor(() => sb.got.length >= 1, { timeoutMs: 10_000, what: 'a1 at B' });
    burst(sa, portA);
    const overRate = async () =>
      Number(/reason="over_rate"} (\d+)/.exec((await t.call('GET', '/metrics')).text)?.[1] ?? 0);
    await waitFor(async () => (await overRate()) + sb.got.length - 1 >= 60, {
      timeoutMs: 10_000,
      what: 'every datagram forwarded or dropped',
    });
    const forwarded = sb.got.length - 1;
    // The burst takes 3 of them at once (4,687 bytes); the refill at 18,750 bytes/s adds about 15 a second.
    assert.ok(forwarded >= 1, `some datagrams pass (${forwarded})`);
    assert.ok((await overRate()) >= 30, `most are dropped over the cap (${await overRate()} dropped)`);
  } finally {
    for (const s of sockets) s.close();
    await t.close();
  }
});

test('in process: the broker renews its relay allocation, which keeps forwarding past its first lifetime', async () => {
  // A 5 s lifetime and a session expiring in 6 s (overtime after, media flowing: README "Lifetime").
  const t = await relayServer({ lifetimeMs: 5_000 });
  const sockets: Socket[] = [];
  try {
    const { a, b } = await twoPeers(t, 'rn', 6);
    const [portA, portB] = await relayedPorts(a, b);
    for (const c of [a, b]) c.send({ type: 'status', srt: 'connected' });
    const allocatedAt = Date.now();
    const sa = await udp('127.0.0.1');
    const sb = await udp('127.0.0.2');
    sockets.push(sa, sb);
    const flow = steadyFlow(sa, sb, [portA, portB]);
    try {
      // Past two of its first lifetimes (at most 6 s each), then datagrams still arriving.
      await stillForwardingAfter(sb, allocatedAt, 13_000);
    } finally {
      flow.stop();
    }
    const text = (await t.call('GET', '/metrics')).text;
    assert.match(text, /^punch_relay_allocations 1$/m);
    assert.match(text, /^punch_relay_allocations_ended_total\{reason="expired"} 0$/m);
    for (const c of [a, b]) c.close();
  } finally {
    for (const s of sockets) s.close();
    await t.close();
  }
});
