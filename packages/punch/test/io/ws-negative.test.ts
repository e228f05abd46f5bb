import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TokenSigner } from '../../src/protocol/token.ts';
import { SECRET, startTestServer, type TestServer } from '../helpers.ts';
import { assertQuiet, connect, sleep, wsUrl, type WsClient } from '../ws-helpers.ts';
import { WebSocket } from 'ws';

/**
 * Every refusal of the signalling: each gets its documented `error` code (and close code where the
 * connection ends), and the matched peers and the observer of the session receive nothing at all.
 */
describe('WebSocket signalling: refusals cost nothing', () => {
  let t: TestServer;
  let admin: string;
  let a: WsClient;
  let b: WsClient;
  let obs: WsClient;
  let viewBefore: unknown;

  async function token(name: string, adminToken: string, stream: string | null): Promise<string> {
    const r = await t.call('POST', `/api/session/${name}/token`, { token: adminToken, body: { stream } });
    assert.equal(r.status, 201, r.text);
    return r.json.token as string;
  }

  before(async () => {
    t = await startTestServer({ limits: { wsConnectPerMinute: 1000 } });
    const r = await t.call('POST', '/api/session', { body: { name: 'neg', streams: ['cam-a', 'cam-b'] } });
    admin = r.json.token as string;
    obs = await connect(t.url, 'neg', { token: admin });
    a = await connect(t.url, 'neg', { token: await token('neg', admin, 'cam-a') });
    b = await connect(t.url, 'neg', { token: await token('neg', admin, 'cam-a') });
    a.send({ type: 'register', stream: 'cam-a', port: 7000 });
    await a.next('session');
    await a.next('session');
    b.send({ type: 'register', stream: 'cam-a', port: 7000 });
    await b.next('peer');
    await a.next('peer');
    await obs.next('peer_match');
    for (const c of [a, b, obs]) while (c.pending().length > 0) await c.next();
    viewBefore = (await t.call('GET', '/api/session/neg', { token: admin })).json;
  });

  after(async () => {
    // The matched pair and the observer noticed nothing, and the session is unchanged.
    await assertQuiet(a, 100);
    await assertQuiet(b, 0);
    await assertQuiet(obs, 0);
    assert.deepEqual((await t.call('GET', '/api/session/neg', { token: admin })).json, viewBefore);
    await t.close();
  });

  async function refusedAt(
    session: string,
    tok: string | undefined,
    code: string,
    closeCode: number,
    query = false,
  ) {
    const c = await connect(t.url, session, { token: tok, query });
    const e = await c.next('error');
    assert.equal(e['code'], code, JSON.stringify(e));
    assert.equal(typeof e['message'], 'string');
    assert.equal((await c.closed).code, closeCode);
  }

  test('third peer on a full stream: STREAM_TAKEN; SESSION_FULL when the server picks the stream', async () => {
    const c = await connect(t.url, 'neg', { token: await token('neg', admin, 'cam-a') });
    await c.next('session');
    c.send({ type: 'register', stream: 'cam-a', port: 7002 });
    assert.equal((await c.next('error'))['code'], 'STREAM_TAKEN');
    c.send({ type: 'register', port: 7002 }); // scoped token: its stream is implied
    assert.equal((await c.next('error'))['code'], 'STREAM_TAKEN');
    c.close();
    // A single-stream session: register without a stream when both slots are taken.
    const s = await t.call('POST', '/api/session', { body: { name: 'single' } });
    const tok = s.json.token as string;
    const peers = [
      await connect(t.url, 'single', { token: tok }),
      await connect(t.url, 'single', { token: tok }),
    ];
    for (const p of peers) {
      p.send({ type: 'register', port: 6000 });
      await p.next('session');
    }
    await peers[1]?.next('peer');
    const third = await connect(t.url, 'single', { token: tok });
    third.send({ type: 'register', port: 6000 });
    assert.equal((await third.next('error'))['code'], 'SESSION_FULL');
    for (const p of [...peers, third]) p.close();
  });

  test('a peer token on another stream: AUTH_FAILED; tally from a peer: AUTH_FAILED', async () => {
    const c = await connect(t.url, 'neg', { token: await token('neg', admin, 'cam-a') });
    await c.next('session');
    c.send({ type: 'register', stream: 'cam-b', port: 7004 });
    assert.equal((await c.next('error'))['code'], 'AUTH_FAILED');
    c.send({ type: 'tally', stream: 'cam-a', state: 'program' });
    assert.equal((await c.next('error'))['code'], 'AUTH_FAILED');
    c.send({ type: 'status', stream: 'cam-a', srt: 'connected' });
    assert.equal((await c.next('error'))['code'], 'INVALID_MESSAGE'); // not registered
    c.close();
  });

  test('tokens: missing, forged, another session, expired, via header and query', async () => {
    await refusedAt('neg', undefined, 'AUTH_FAILED', 4401);
    await refusedAt('neg', 'p_bm9wZQ.AAAA', 'AUTH_FAILED', 4401, true);
    await refusedAt('neg', admin.slice(0, -2) + (admin.endsWith('AA') ? 'BB' : 'AA'), 'AUTH_FAILED', 4401);
    const other = await t.call('POST', '/api/session', { body: { name: 'other' } });
    await refusedAt('neg', other.json.token as string, 'AUTH_FAILED', 4403);
    await refusedAt('neg', other.json.token as string, 'AUTH_FAILED', 4403, true);
    // A token without the session's incarnation id is bound to its `exp` (README "Lifetime"); one of an
    // earlier incarnation is refused whatever its `exp`.
    const expired = new TokenSigner(SECRET).sign({
      session: 'neg',
      role: 'peer',
      stream: 'cam-a',
      exp: Math.floor(Date.now() / 1000) - 10,
    });
    await refusedAt('neg', expired, 'SESSION_EXPIRED', 4410);
    const earlier = new TokenSigner(SECRET).sign({
      session: 'neg',
      role: 'peer',
      stream: 'cam-a',
      exp: Math.floor(Date.now() / 1000) + 600,
      sid: 'an-earlier-incarnation',
    });
    await refusedAt('neg', earlier, 'SESSION_EXPIRED', 4410);
    await refusedAt('nope', admin, 'AUTH_FAILED', 4403);
  });

  test('malformed JSON, wrong types, unknown type, port out of range, binary: INVALID_MESSAGE', async () => {
    const c = await connect(t.url, 'neg', { token: admin });
    await c.next('session');
    const bad: (string | Buffer)[] = [
      '{"type":"register",',
      'null',
      '[1,2]',
      '"register"',
      '{"port":7000}',
      JSON.stringify({ type: 7 }),
      JSON.stringify({ type: 'hello' }),
      JSON.stringify({ type: 'register', port: '7000' }),
      JSON.stringify({ type: 'register', port: 7000.5 }),
      JSON.stringify({ type: 'register', port: 1023 }),
      JSON.stringify({ type: 'register', port: 65536 }),
      JSON.stringify({ type: 'register', port: 80, stream: 'cam-b' }),
      JSON.stringify({ type: 'register', port: 7000, stream: 5 }),
      JSON.stringify({ type: 'register', port: 7000, stream: 'cam-b', role: 'boss' }),
      JSON.stringify({ type: 'register', port: 7000, stream: 'cam-b', meta: [1] }),
      JSON.stringify({ type: 'register', port: 7000, stream: 'cam-b', meta: { pad: 'x'.repeat(3000) } }),
      JSON.stringify({ type: 'register', port: 7000, stream: 'cam-b', v: '1' }),
      JSON.stringify({ type: 'health', stream: 'cam-a', rtt: 'fast', retransmit: 0, bitrate: 1 }),
      JSON.stringify({ type: 'health', stream: 'cam-a', rtt: -1, retransmit: 0, bitrate: 1 }),
      JSON.stringify({ type: 'status', stream: 'cam-a', srt: 'up' }),
      JSON.stringify({ type: 'tally', stream: 'cam-a', state: 'red' }),
      JSON.stringify({ type: 'register', port: 7000, stream: 'no-such' }),
    ];
    for (const m of bad) {
      c.sendRaw(m);
      const e = await c.next('error');
      assert.equal(e['code'], 'INVALID_MESSAGE', `${String(m)} → ${JSON.stringify(e)}`);
    }
    c.sendRaw(Buffer.from([1, 2, 3]), true);
    assert.equal((await c.next('error'))['code'], 'INVALID_MESSAGE');
    await assertQuiet(c, 50);
    c.close();
  });

  test('150 messages in one second: 100 handled, one INVALID_MESSAGE, connection kept; 250: closed 4429', async () => {
    const c = await connect(t.url, 'neg', { token: admin });
    await c.next('session');
    // Messages that are refused one by one show exactly which were handled: the first 100 get their own
    // INVALID_MESSAGE, the other 50 are dropped with a single rate-limit error.
    for (let i = 0; i < 150; i++) c.send({ type: 'ready', stream: 'cam-b' });
    await sleep(300);
    const errors = c.pending();
    assert.equal(errors.length, 101, JSON.stringify(errors.slice(-3)));
    assert.equal(errors.filter((e) => /register on it first/.test(e['message'] as string)).length, 100);
    assert.equal(errors.filter((e) => /rate limit/.test(e['message'] as string)).length, 1);
    assert.ok(errors.every((e) => e['code'] === 'INVALID_MESSAGE'));
    assert.equal(c.ws.readyState, WebSocket.OPEN);
    c.close();
    const flood = await connect(t.url, 'neg', { token: admin });
    for (let i = 0; i < 250; i++) flood.sendRaw('{}');
    assert.equal((await flood.closed).code, 4429);
  });

  test('a 1 MiB frame closes that connection with 1009 before it is buffered', async () => {
    const c = await connect(t.url, 'neg', { token: admin });
    await c.next('session');
    c.sendRaw(JSON.stringify({ type: 'register', port: 7000, meta: { pad: 'x'.repeat(1 << 20) } }));
    assert.equal((await c.closed).code, 1009);
  });

  test('the OpenAPI document lists the signalling upgrade', async () => {
    const doc = await t.call('GET', '/api/openapi.json');
    const op = doc.json.paths['/api/ws/{name}'].get;
    assert.equal(op.operationId, 'signalling');
    assert.deepEqual(Object.keys(op.responses), ['101', '404', '429']);
  });

  test('no upgrade outside /api/ws/:name', async () => {
    const ws = new WebSocket(`${wsUrl(t.url, 'neg')}/extra`);
    const status = await new Promise<number>((resolve) => {
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => resolve(-1));
    });
    assert.equal(status, 404);
  });
});

test('the per-client WebSocket connect limit counts refused tokens and answers 429 before any session work', async () => {
  const t = await startTestServer({ limits: { wsConnectPerMinute: 3 } });
  try {
    const r = await t.call('POST', '/api/session', { body: { name: 'lim' } });
    const good = r.json.token as string;
    for (const tok of [undefined, 'p_bad.sig']) {
      const c = await connect(t.url, 'lim', { token: tok });
      assert.equal((await c.closed).code, 4401);
    }
    const ok = await connect(t.url, 'lim', { token: good });
    await ok.next('session');
    await assert.rejects(connect(t.url, 'lim', { token: good }), /upgrade refused: 429/);
    // The session saw one connection; the refused upgrade left no trace.
    assert.equal(t.server.signalling.connections, 1);
    const metrics = await t.call('GET', '/metrics');
    assert.match(metrics.text, /punch_ws_connections 1\n/);
    assert.match(metrics.text, /punch_ws_rejected_total\{reason="rate_limited"\} 1\n/);
    assert.match(metrics.text, /punch_ws_rejected_total\{reason="auth_failed"\} 2\n/);
    ok.close();
  } finally {
    await t.close();
  }
});
