import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer } from '../helpers.ts';
import { assertQuiet, connect, sleep, type Msg, type WsClient } from '../ws-helpers.ts';

/**
 * The whole life of a two-stream session over real WebSocket connections (the `ws` client library):
 * two peers and an admin observer; register → `peer`/`peer_match`/`session` in the documented order,
 * ready → start, status → CONNECTED, health → health_report in every band, tally, DELETE and TTL.
 */
describe('WebSocket signalling: a session from creation to close', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ signalling: { healthReportMs: 0 } });
  });
  after(async () => t.close());

  async function session(name: string, body: Record<string, unknown> = {}) {
    const r = await t.call('POST', '/api/session', { body: { name, ttl: 3600, ...body } });
    assert.equal(r.status, 201, r.text);
    return r.json as { token: string; expiresAt: number };
  }
  async function peerToken(name: string, admin: string, stream: string | null, label: string) {
    const r = await t.call('POST', `/api/session/${name}/token`, { token: admin, body: { stream, label } });
    assert.equal(r.status, 201, r.text);
    return r.json.token as string;
  }

  test('register, peer, peer_match, start, CONNECTED, health, tally, DELETE', async () => {
    const { token: admin } = await session('life', { streams: ['cam-a', 'cam-b'], latency: 250 });
    const tokA = await peerToken('life', admin, 'cam-a', 'Camera A');
    const tokB = await peerToken('life', admin, 'cam-a', 'Truck B');
    const obs = await connect(t.url, 'life', { token: admin });
    const a = await connect(t.url, 'life', { token: tokA, query: true });
    const b = await connect(t.url, 'life', { token: tokB });
    const all: WsClient[] = [obs, a, b];
    // Each connection first gets the current state.
    for (const c of all) {
      const s = await c.next('session');
      assert.equal(s['state'], 'WAITING');
      assert.deepEqual(s['streams'], {
        'cam-a': { state: 'waiting', peers: 0 },
        'cam-b': { state: 'waiting', peers: 0 },
      });
      assert.equal(s['total'], 2);
    }

    // First registration: a `session` broadcast confirms it; `v` and unknown fields are accepted.
    a.send({
      type: 'register',
      stream: 'cam-a',
      port: 9000,
      role: 'sender',
      meta: { label: 'A', codec: 'h264' },
      v: 1,
      future: 'x',
    });
    for (const c of all) {
      const s = await c.next('session');
      assert.deepEqual(s['streams']['cam-a'], { state: 'waiting', peers: 1 });
      assert.equal(s['state'], 'WAITING');
    }

    // Second registration with another port: matched; the stream's port is the first one's.
    b.send({ type: 'register', stream: 'cam-a', port: 9002, role: 'receiver', meta: { label: 'B' } });
    const toB = await b.next('peer');
    const toA = await a.next('peer');
    const match = await obs.next('peer_match');
    for (const c of all) {
      const s = await c.next('session');
      assert.equal(s['state'], 'READY');
      assert.deepEqual(s['streams']['cam-a'], { state: 'ready', peers: 2 });
      assert.equal(s['connected'], 0);
    }
    // Fixed order: peer (registering), peer (waiting), peer_match, session.
    const types = (c: WsClient): string[] => c.messages.map((m) => m['type'] as string);
    assert.deepEqual(types(b), ['session', 'session', 'peer', 'session']);
    assert.deepEqual(types(a), ['session', 'session', 'peer', 'session']);
    assert.deepEqual(types(obs), ['session', 'session', 'peer_match', 'session']);
    assert.deepEqual(toB, {
      type: 'peer',
      stream: 'cam-a',
      ip: '127.0.0.1',
      port: 9000,
      localPort: 9000,
      passphrase: toA['passphrase'],
      latency: 250,
      meta: { label: 'A', codec: 'h264' },
    });
    assert.deepEqual(toA, { ...toB, meta: { label: 'B' } });
    assert.match(toA['passphrase'] as string, /^[A-Za-z0-9]{32}$/);
    assert.deepEqual(match, {
      type: 'peer_match',
      stream: 'cam-a',
      peer_a: { ip: '127.0.0.1', port: 9000 },
      peer_b: { ip: '127.0.0.1', port: 9000 },
      localPort: 9000,
      passphrase: toA['passphrase'],
      latency: 250,
    });
    // /connect now comes from these registrations.
    const conn = await t.call('GET', '/api/session/life/connect?stream=cam-a', { token: admin });
    assert.equal(conn.status, 200, conn.text);
    assert.match(
      conn.json.for_peer_a['live-transmit'],
      /srt:\/\/127\.0\.0\.1:9000\?mode=rendezvous&port=9000&/,
    );
    assert.ok((conn.json.for_peer_a['live-transmit'] as string).includes(`passphrase=${toA['passphrase']}`));

    // ready → start once both sent it; a repeated ready does nothing.
    a.send({ type: 'ready', stream: 'cam-a' });
    await assertQuiet(b, 100);
    b.send({ type: 'ready' }); // a scoped token's stream is implied
    assert.deepEqual(await a.next('start'), { type: 'start', stream: 'cam-a' });
    assert.deepEqual(await b.next('start'), { type: 'start', stream: 'cam-a' });
    a.send({ type: 'ready', stream: 'cam-a' });
    await assertQuiet(a, 100);
    await assertQuiet(b, 0);
    await assertQuiet(obs, 0);

    // status connected → CONNECTED broadcast.
    a.send({ type: 'status', stream: 'cam-a', srt: 'connected' });
    for (const c of all) {
      const s = await c.next('session');
      assert.equal(s['state'], 'CONNECTED');
      assert.deepEqual(s['streams']['cam-a'], { state: 'connected', peers: 2 });
      assert.equal(s['connected'], 1);
      assert.equal(s['total'], 2);
    }
    const view = await t.call('GET', '/api/session/life', { token: admin });
    assert.equal(view.json.state, 'CONNECTED');
    assert.deepEqual(view.json.streams['cam-a'].peer_a, {
      ip: '127.0.0.1',
      port: 9000,
      label: 'A',
      role: 'sender',
      present: true,
    });
    assert.deepEqual(view.json.streams['cam-a'].peer_b, {
      ip: '127.0.0.1',
      port: 9000,
      label: 'B',
      role: 'receiver',
      present: true,
    });
    assert.equal(view.json.streams['cam-a'].state, 'connected');

    // Health: each band, and the worse band when RTT and retransmit disagree (boundaries are warning).
    const cases: [number, number, string][] = [
      [40, 0.2, 'healthy'],
      [99.9, 0.99, 'healthy'],
      [100, 0.5, 'warning'],
      [200, 0.5, 'warning'],
      [200.5, 0.5, 'critical'],
      [50, 1, 'warning'],
      [50, 5, 'warning'],
      [50, 5.1, 'critical'],
      [150, 0.1, 'warning'],
      [20, 12, 'critical'],
      [250, 0, 'critical'],
      [150, 3, 'warning'],
    ];
    for (const [rtt, retransmit, status] of cases) {
      b.send({
        type: 'health',
        stream: 'cam-a',
        rtt,
        retransmit,
        bitrate: 5_000_000,
        dropped: 0,
        buffer: 40,
      });
      const report = await obs.next('health_report');
      // `ends` (an added field) carries each end's latest report; B is slot b.
      const ends = report['streams']['cam-a']['ends'];
      delete report['streams']['cam-a']['ends'];
      assert.deepEqual(
        { ...ends.b, age: 0 },
        { rtt, retransmit, bitrate: 5_000_000, dropped: 0, buffer: 40, age: 0, role: 'receiver' },
      );
      assert.deepEqual(
        report['streams'],
        {
          'cam-a': {
            rtt,
            retransmit,
            bitrate: 5_000_000,
            status,
            suggestedLatency: Math.max(20, Math.ceil(4 * rtt)),
          },
        },
        `rtt ${rtt} retransmit ${retransmit}`,
      );
    }
    // Peers never receive health_report; the REST view shows the latest report.
    assert.ok(!a.messages.some((m) => m['type'] === 'health_report'));
    assert.ok(!b.messages.some((m) => m['type'] === 'health_report'));
    const withHealth = await t.call('GET', '/api/session/life', { token: tokA });
    const { at, age, ...health } = withHealth.json.streams['cam-a'].health;
    assert.deepEqual(health, { rtt: 150, retransmit: 3, bitrate: 5_000_000 });
    assert.ok(Math.abs(Date.parse(at) - Date.now()) < 60_000 && age >= 0 && age < 60, `${at} ${age}`);
    assert.deepEqual(Object.keys(withHealth.json.streams), ['cam-a']);

    // Tally: from the admin to both peers of the stream (and admins); refused from a peer.
    obs.send({ type: 'tally', stream: 'cam-a', state: 'program' });
    for (const c of all)
      assert.deepEqual(await c.next('tally'), { type: 'tally', stream: 'cam-a', state: 'program' });
    a.send({ type: 'tally', stream: 'cam-a', state: 'off' });
    const refused = await a.next('error');
    assert.equal(refused['code'], 'AUTH_FAILED');
    await assertQuiet(b, 100);
    await assertQuiet(obs, 0);

    // A tally set before anyone holds the stream reaches a peer that registers later, after its confirmation.
    obs.send({ type: 'tally', stream: 'cam-b', state: 'preview' });
    assert.deepEqual(await obs.next('tally'), { type: 'tally', stream: 'cam-b', state: 'preview' });
    const late = await connect(t.url, 'life', { token: admin });
    await late.next('session');
    late.send({ type: 'register', stream: 'cam-b', port: 9100 });
    assert.deepEqual(await late.next('tally'), { type: 'tally', stream: 'cam-b', state: 'preview' });
    for (const c of all)
      assert.deepEqual((await c.next('session'))['streams']['cam-b'], { state: 'waiting', peers: 1 });
    await assertQuiet(a, 50);
    await assertQuiet(b, 0);
    all.push(late);

    // DELETE → session_closed admin_closed to everyone, then close 1000.
    const del = await t.call('DELETE', '/api/session/life', { token: admin });
    assert.equal(del.status, 204);
    for (const c of all) {
      assert.deepEqual(await c.next('session_closed'), { type: 'session_closed', reason: 'admin_closed' });
      assert.equal((await c.closed).code, 1000);
    }
  });

  test('TTL expiry → session_closed ttl_expired to every connection', async () => {
    const { token: admin } = await session('brief', { ttl: 1 });
    const obs = await connect(t.url, 'brief', { token: admin });
    const p = await connect(t.url, 'brief', { token: admin });
    p.send({ type: 'register', port: 5000 });
    await p.next('session');
    const closed = (c: WsClient): Promise<Msg> => c.next('session_closed', 4000);
    assert.deepEqual(await closed(obs), { type: 'session_closed', reason: 'ttl_expired' });
    assert.deepEqual(await closed(p), { type: 'session_closed', reason: 'ttl_expired' });
    assert.equal((await p.closed).code, 1000);
    // Connecting afterwards: SESSION_EXPIRED and close 4410.
    const late = await connect(t.url, 'brief', { token: admin }).catch(() => undefined);
    if (late) {
      assert.equal((await late.next('error'))['code'], 'SESSION_EXPIRED');
      assert.equal((await late.closed).code, 4410);
    }
    await sleep(0);
  });
});

test('behind one trusted proxy hop: peers learn the address the proxy saw, never a forged left-most entry', async () => {
  const t = await startTestServer({ config: { trustProxy: 1 }, limits: { wsConnectPerMinute: 2 } });
  try {
    const admin = (await t.call('POST', '/api/session', { body: { name: 'proxied' } })).json.token as string;
    // What an appending proxy forwards: the client's own (forged) header, then the address it saw.
    const a = await connect(t.url, 'proxied', {
      token: admin,
      headers: { 'x-forwarded-for': '192.0.2.66, 203.0.113.10' },
    });
    const b = await connect(t.url, 'proxied', {
      token: admin,
      headers: { 'x-forwarded-for': '198.51.100.20' },
    });
    a.send({ type: 'register', port: 7000, meta: { label: 'A' } });
    await a.next('session');
    await a.next('session');
    b.send({ type: 'register', port: 7000 });
    assert.equal((await b.next('peer'))['ip'], '203.0.113.10');
    assert.equal((await a.next('peer'))['ip'], '198.51.100.20');
    // The connect limit (2 here) counts the proxy-seen address: C is the second connection from 203.0.113.10,
    // and a third one is refused whatever left-most entry it forges.
    const c = await connect(t.url, 'proxied', {
      token: admin,
      headers: { 'x-forwarded-for': '192.0.2.99, 203.0.113.10' },
    });
    await c.next('session');
    await assert.rejects(
      connect(t.url, 'proxied', { token: admin, headers: { 'x-forwarded-for': '192.0.2.1, 203.0.113.10' } }),
      /429/,
    );
    for (const x of [a, b, c]) x.close();
  } finally {
    await t.close();
  }
});
