import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { srtAck, srtAckAck, srtData } from '../fixtures/srt-packets.ts';
import { LOOPBACK_RELAY, startTestServer, type TestServer } from '../helpers.ts';
import { connect, type Msg } from '../ws-helpers.ts';

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

/** A session `name` and two peers connected from 127.0.0.1 (A) and 127.0.0.2 (B), not yet registered. */
async function twoPeers(t: TestServer, name: string) {
  const created = await t.call('POST', '/api/session', { body: { name, ttl: 600 } });
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
  const t = await startTestServer({
    config: { relay: LOOPBACK_RELAY },
  });
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
