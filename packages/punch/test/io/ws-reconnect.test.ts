import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  repoRoot,
  startProcess,
  tempDir,
  type RunningProcess,
  timingBound,
} from '@broadcast-ops/core/testing';
import { MemoryStore } from '../../src/domain/store.ts';
import type { StreamRecord } from '../../src/domain/session.ts';
import { startTestServer } from '../helpers.ts';
import { assertQuiet, connect, sleep, type Msg, type WsClient } from '../ws-helpers.ts';

/** Cut a client's TCP connection without a WebSocket close frame (a cable pulled, a process killed). */
function killSocket(c: WsClient): void {
  (c.ws as unknown as { _socket: Socket })._socket.destroy();
}

async function peerTokens(
  call: (m: string, p: string, o?: object) => Promise<{ json: Msg }>,
  name: string,
  admin: string,
) {
  const make = async (label: string) =>
    (await call('POST', `/api/session/${name}/token`, { token: admin, body: { label } })).json[
      'token'
    ] as string;
  return { a: await make('A'), b: await make('B') };
}

async function matched(a: WsClient, b: WsClient, port = 9000): Promise<void> {
  a.send({ type: 'register', port, meta: { label: 'A' } });
  await a.next('session');
  await b.next('session');
  b.send({ type: 'register', port, meta: { label: 'B' } });
  await b.next('peer');
  await a.next('peer');
  await a.next('session');
  await b.next('session');
}

test('reconnect: a killed socket or a peer that stopped answering gets its slot back with a fresh peer', async () => {
  const t = await startTestServer({ signalling: { probeMs: 300 } });
  try {
    const admin = (await t.call('POST', '/api/session', { body: { name: 'rc' } })).json.token as string;
    const tok = await peerTokens(t.call, 'rc', admin);
    const a = await connect(t.url, 'rc', { token: tok.a });
    const b = await connect(t.url, 'rc', { token: tok.b, autoPong: false });
    await a.next('session');
    await b.next('session');
    await matched(a, b);

    // 1. A's TCP connection dies without a close frame; A comes back with the same token.
    killSocket(a);
    const a2 = await connect(t.url, 'rc', { token: tok.a });
    await a2.next('session');
    a2.send({ type: 'register', port: 9100, meta: { label: 'A again' } });
    const fresh = await a2.next('peer');
    assert.deepEqual(
      { ip: fresh['ip'], port: fresh['port'], localPort: fresh['localPort'], meta: fresh['meta'] },
      { ip: '127.0.0.1', port: 9000, localPort: 9000, meta: { label: 'B' } },
    );
    // B is told that A left and came back, but gets no `peer`: A's address and port did not change, so
    // B's SRT link has nothing to act on (README "When `peer` is sent").
    assert.deepEqual(
      [(await b.next('presence'))['present'], (await b.next('presence'))['present']],
      [false, true],
    );
    await sleep(100);
    assert.ok(!b.pending().some((m) => m['type'] === 'peer'), JSON.stringify(b.pending()));
    assert.ok(!a2.messages.some((m) => m['type'] === 'error'), JSON.stringify(a2.messages));

    // 2. B stops answering pings (half-open: its socket looks alive); B reconnects with the same token.
    //    The old socket is pinged, does not answer within the probe time, and is replaced.
    const b2 = await connect(t.url, 'rc', { token: tok.b });
    await b2.next('session');
    b2.send({ type: 'register', port: 9000 });
    const toB2 = await b2.next('peer', 3000);
    assert.deepEqual(toB2['meta'], { label: 'A again' });
    await sleep(100);
    assert.ok(!a2.pending().some((m) => m['type'] === 'peer'), JSON.stringify(a2.pending()));
    assert.equal((await b.closed).code, 4409);
    assert.ok(!b2.messages.some((m) => m['type'] === 'error'));

    // 3. A second live connection with A's token (A answers pings): no takeover, SESSION_FULL, A undisturbed.
    await sleep(100);
    for (const c of [a2, b2]) while (c.pending().length > 0) await c.next();
    const dup = await connect(t.url, 'rc', { token: tok.a });
    await dup.next('session');
    dup.send({ type: 'register', port: 9000 });
    assert.equal((await dup.next('error', 3000))['code'], 'SESSION_FULL'); // no stream named: the server picked
    await assertQuiet(a2, 50);
    await assertQuiet(b2, 0);
    const view = await t.call('GET', '/api/session/rc', { token: admin });
    assert.equal(view.json.streams.default.peer_a.label, 'A again');
    assert.equal(view.json.state, 'READY');
  } finally {
    await t.close();
  }
});

test('ping/pong liveness: a connection that stops answering pings is terminated and its slot detached', async () => {
  const t = await startTestServer({ signalling: { pingIntervalMs: 150 } });
  try {
    const admin = (await t.call('POST', '/api/session', { body: { name: 'live' } })).json.token as string;
    const tok = await peerTokens(t.call, 'live', admin);
    const alive = await connect(t.url, 'live', { token: tok.a });
    const frozen = await connect(t.url, 'live', { token: tok.b, autoPong: false });
    frozen.send({ type: 'register', port: 9000 });
    await frozen.next('session');
    await frozen.next('session');
    const started = Date.now();
    const { code } = await frozen.closed;
    assert.equal(code, 1006); // terminated: no close handshake with a peer that does not answer
    const took = Date.now() - started;
    assert.ok(took < (await timingBound(2000)), `terminated after ${took} ms`);
    await sleep(50);
    assert.equal(t.server.signalling.connections, 1);
    // The live connection answered every ping and is still there; the frozen peer's claim is kept (detached).
    assert.equal(alive.ws.readyState, alive.ws.OPEN);
    assert.equal(t.server.broker.get('live')?.streams[0]?.peerA?.port, 9000);
    alive.close();
  } finally {
    await t.close();
  }
});

test('the ping interval sleeps with no connection open, runs while one is, and sleeps again after the last leaves', async () => {
  const t = await startTestServer({ signalling: { pingIntervalMs: 100 } });
  try {
    assert.equal(t.server.signalling.heartbeating, false, 'no connection: no timer');
    const admin = (await t.call('POST', '/api/session', { body: { name: 'beat' } })).json.token as string;
    const tok = await peerTokens(t.call, 'beat', admin);
    const a = await connect(t.url, 'beat', { token: tok.a });
    a.send({ type: 'register', port: 9000 });
    await a.next('session');
    assert.equal(t.server.signalling.heartbeating, true, 'a connection open: pinged');
    a.close();
    await a.closed;
    // The first tick after the last connection left stops the interval (bounded wait).
    for (let i = 0; i < 100 && t.server.signalling.heartbeating; i++) await sleep(20);
    assert.equal(t.server.signalling.connections, 0);
    assert.equal(t.server.signalling.heartbeating, false, 'the last connection gone: asleep');
    const b = await connect(t.url, 'beat', { token: tok.b });
    b.send({ type: 'register', port: 9000 });
    await b.next('session');
    assert.equal(t.server.signalling.heartbeating, true, 'the next connection wakes it');
    b.close();
  } finally {
    await t.close();
  }
});

/** A memory store whose stream writes fail while `failing` is set. */
class FailingStore extends MemoryStore {
  failing = false;
  override putStreams(session: string, streams: readonly StreamRecord[]): void {
    if (this.failing) throw new Error('injected write failure');
    super.putStreams(session, streams);
  }
}

test('a registration that cannot be saved: SERVER_ERROR, no peer messages, slot free; it succeeds once saving works', async () => {
  const store = new FailingStore();
  const t = await startTestServer({ store });
  try {
    const admin = (await t.call('POST', '/api/session', { body: { name: 'dur' } })).json.token as string;
    const tok = await peerTokens(t.call, 'dur', admin);
    const a = await connect(t.url, 'dur', { token: tok.a });
    const b = await connect(t.url, 'dur', { token: tok.b });
    await a.next('session');
    await b.next('session');
    a.send({ type: 'register', port: 9000 });
    await a.next('session');
    await b.next('session');
    store.failing = true;
    b.send({ type: 'register', port: 9000 });
    const e = await b.next('error');
    assert.equal(e['code'], 'SERVER_ERROR');
    assert.doesNotMatch(e['message'] as string, /injected/);
    await assertQuiet(a, 100);
    await assertQuiet(b, 0);
    assert.equal(t.server.broker.get('dur')?.streams[0]?.peerB, null);
    assert.equal(store.loadAll()[0]?.streams[0]?.peerB, null);
    store.failing = false;
    b.send({ type: 'register', port: 9000 });
    await b.next('peer');
    await a.next('peer');
    assert.equal(store.loadAll()[0]?.streams[0]?.peerB?.label, 'B');
  } finally {
    await t.close();
  }
});

const SECRET = 'ws-restart-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEF';

async function startBroker(db: string): Promise<{ proc: RunningProcess; url: string }> {
  const proc = startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve'], {
    env: { PUNCH_SECRET: SECRET, PUNCH_HOST: '127.0.0.1', PUNCH_PORT: '0', PUNCH_DB: db, LOG_LEVEL: 'info' },
  });
  const m = await proc.waitForOutput(
    /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*punch broker listening/,
    20_000,
  );
  return { proc, url: m[1] ?? '' };
}

test('restart (SIGTERM, then SIGKILL): slots survive, the peers reconnect and get peer again', async () => {
  const dir = tempDir('punch-ws-restart-');
  const db = join(dir.path, 'punch.db');
  const procs: RunningProcess[] = [];
  try {
    let broker = await startBroker(db);
    procs.push(broker.proc);
    const call = async (method: string, path: string, o: { token?: string; body?: unknown } = {}) => {
      const res = await fetch(broker.url + path, {
        method,
        headers: {
          'content-type': 'application/json',
          ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
        },
        ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : undefined };
    };
    const admin = (await call('POST', '/api/session', { body: { name: 'rs', ttl: 600 } })).json
      .token as string;
    const tok = await peerTokens(call, 'rs', admin);
    let a = await connect(broker.url, 'rs', { token: tok.a });
    let b = await connect(broker.url, 'rs', { token: tok.b });
    await a.next('session');
    await b.next('session');
    await matched(a, b, 9200);
    const passphrase = (a.messages.find((m) => m['type'] === 'peer') ?? {})['passphrase'];

    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      await broker.proc.stop(signal);
      const codes = await Promise.all([a.closed, b.closed]);
      if (signal === 'SIGTERM')
        assert.deepEqual(
          codes.map((c) => c.code),
          [1001, 1001],
        );
      broker = await startBroker(db);
      procs.push(broker.proc);
      // The slots survived: a third token finds the stream full.
      const other = (await call('POST', '/api/session/rs/token', { token: admin, body: { label: 'C' } })).json
        .token as string;
      const c = await connect(broker.url, 'rs', { token: other });
      await c.next('session');
      c.send({ type: 'register', port: 9300 });
      assert.equal((await c.next('error'))['code'], 'SESSION_FULL', signal);
      c.close();
      // A comes back first: B's stored claim is its peer.
      a = await connect(broker.url, 'rs', { token: tok.a });
      const s = await a.next('session');
      // Nobody was connected to the restarted broker: the claims are kept but nothing is matched yet.
      assert.equal(s['state'], 'WAITING', signal);
      a.send({ type: 'register', port: 9200 });
      const pa = await a.next('peer');
      assert.deepEqual(
        [pa['ip'], pa['port'], pa['localPort'], pa['passphrase']],
        ['127.0.0.1', 9200, 9200, passphrase],
        signal,
      );
      b = await connect(broker.url, 'rs', { token: tok.b });
      await b.next('session');
      b.send({ type: 'register', port: 9200 });
      assert.equal((await b.next('peer'))['passphrase'], passphrase);
      // B came back with the address and port A already has: A gets no `peer` (its SRT keeps running).
      while ((await a.next('session'))['state'] !== 'READY');
      assert.ok(!a.pending().some((m) => m['type'] === 'peer'), signal);
      assert.ok(![...a.messages, ...b.messages].some((m) => m['type'] === 'error'), signal);
    }
    a.close();
    b.close();
  } finally {
    for (const p of procs) await p.stop('SIGKILL');
    dir.remove();
  }
});
