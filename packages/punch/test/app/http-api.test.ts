/**
 * The HTTP API of the broker as app.ts builds it, through fastify's `inject` on a `ManualClock` and the memory
 * store (quick tier, test/inject-harness.ts): sessions, tokens, /connect, pages, errors, rate limits and the
 * create-body fuzz. What needs a real socket (the client address a connection comes from) stays in
 * test/io/http-api.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { MemoryStore } from '../../src/domain/store.ts';
import { TokenSigner } from '../../src/protocol/token.ts';
import {
  NAME_PATTERN,
  createSessionResponse,
  sessionView,
  connectResponse,
  tokenResponse,
} from '../../src/protocol/schemas.ts';
import { SECRET, assertError, injectBroker, type InjectedBroker } from '../inject-harness.ts';

const peer = (ip: string, port: number, label: string) => ({
  ip,
  port,
  label,
  role: null,
  meta: {},
  clientId: null,
});

describe('HTTP API (inject, ManualClock)', () => {
  let t: InjectedBroker;
  before(async () => {
    t = await injectBroker();
  });
  after(async () => {
    await t.close();
  });

  async function create(name: string, extra: Record<string, unknown> = {}) {
    const r = await t.call('POST', '/api/session', { body: { name, ...extra } });
    assert.equal(r.status, 201, r.text);
    return r.json as { token: string; session: string; expiresAt: number };
  }

  test('POST /api/session creates a WAITING session with an admin token, url and qr', async () => {
    const r = await t.call('POST', '/api/session', {
      body: { name: 'cam1', streams: ['cam-a', 'cam-b'], latency: 300, ttl: 600 },
    });
    assert.equal(r.status, 201);
    createSessionResponse.parse(r.json);
    assert.equal(r.json.session, 'cam1');
    assert.equal(r.json.state, 'WAITING');
    assert.deepEqual(r.json.streams, ['cam-a', 'cam-b']);
    assert.equal(r.json.latency, 300);
    assert.equal(r.json.ttl, 600);
    assert.equal(r.json.url, `${t.url}/s/cam1`);
    assert.equal(r.json.qr, `${t.url}/s/cam1/qr`);
    assert.match(r.json.created, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(r.json.token.startsWith('p_'));
    const v = new TokenSigner(SECRET).verify(r.json.token, t.clock.now());
    assert.ok(v.ok);
    assert.deepEqual(v.claims, {
      session: 'cam1',
      role: 'admin',
      stream: null,
      exp: r.json.expiresAt / 1000,
      sid: t.server.broker.get('cam1')?.id,
    });
    assert.ok(Math.abs(r.json.expiresAt - (Date.parse(r.json.created) + 600_000)) < 1000);
    // The passphrase is generated, stored and never part of the response.
    const s = t.server.broker.get('cam1');
    assert.match(s?.passphrase ?? '', /^[A-Za-z0-9]{32}$/);
    assert.ok(!r.text.includes(s?.passphrase ?? '-'));
  });

  test('defaults: one stream named "default", latency 200, ttl 1800', async () => {
    const r = await t.call('POST', '/api/session', { body: { name: 'defaults-1' } });
    assert.equal(r.status, 201);
    assert.deepEqual(r.json.streams, ['default']);
    assert.equal(r.json.latency, 200);
    assert.equal(r.json.ttl, 1800);
  });

  test('unknown body fields are ignored (spec "Servers ignore unknown fields")', async () => {
    const r = await t.call('POST', '/api/session', { body: { name: 'future-1', v: 2, colour: 'blue' } });
    assert.equal(r.status, 201);
  });

  test('SESSION_EXISTS 409 for a live name, and the first session is unchanged', async () => {
    const first = await create('dup-1', { latency: 500 });
    const r = await t.call('POST', '/api/session', { body: { name: 'dup-1', latency: 900 } });
    assertError(r, 409, 'SESSION_EXISTS', /name/);
    const view = await t.call('GET', '/api/session/dup-1', { token: first.token });
    assert.equal(view.json.latency, 500);
  });

  describe('validation: 400 INVALID_MESSAGE naming the field, and nothing changes', () => {
    const cases: [string, unknown, RegExp, string | undefined][] = [
      ['bad name characters', { name: 'bad name!' }, /^name: /, 'bad name!'],
      ['leading dot', { name: '.hidden' }, /^name: /, '.hidden'],
      ['name over 64 characters', { name: 'a'.repeat(65) }, /^name: .*64/, 'a'.repeat(65)],
      ['missing name', { streams: ['x'] }, /^name: required/, undefined],
      ['latency below 20', { name: 'lat-low', latency: 19 }, /^latency: /, 'lat-low'],
      ['latency above 8000', { name: 'lat-high', latency: 8001 }, /^latency: /, 'lat-high'],
      ['latency not an integer', { name: 'lat-frac', latency: 200.5 }, /^latency: /, 'lat-frac'],
      [
        'duplicate stream name',
        { name: 'dup-streams', streams: ['a', 'a'] },
        /^streams: .*unique/,
        'dup-streams',
      ],
      [
        'more than 16 streams',
        { name: 'many', streams: Array.from({ length: 17 }, (_, i) => `s${i}`) },
        /^streams: .*16/,
        'many',
      ],
      ['bad stream name', { name: 'bad-stream', streams: ['ok', 'no/slash'] }, /^streams\.1: /, 'bad-stream'],
      ['ttl zero', { name: 'ttl-zero', ttl: 0 }, /^ttl: /, 'ttl-zero'],
      ['body is an array', ['x'], /^body: /, undefined],
    ];
    for (const [what, body, message, name] of cases) {
      test(what, async () => {
        const before = t.server.broker.liveSessions;
        const r = await t.call('POST', '/api/session', { body });
        assertError(r, 400, 'INVALID_MESSAGE', message);
        assert.equal(t.server.broker.liveSessions, before);
        if (name !== undefined) assert.equal(t.server.broker.get(name), undefined);
      });
    }
    test('non-JSON body', async () => {
      const before = t.server.broker.liveSessions;
      const r = await t.call('POST', '/api/session', {
        rawBody: '{"name": "x",',
        headers: { 'content-type': 'application/json' },
      });
      assertError(r, 400, 'INVALID_MESSAGE', /^body: not valid JSON/);
      assert.equal(t.server.broker.liveSessions, before);
    });
    test('wrong content type', async () => {
      const r = await t.call('POST', '/api/session', {
        rawBody: 'name=x',
        headers: { 'content-type': 'text/plain' },
      });
      assertError(r, 415, 'INVALID_MESSAGE', /^body: Content-Type/);
    });
    test('no body at all', async () => {
      const r = await t.call('POST', '/api/session');
      assertError(r, 400, 'INVALID_MESSAGE', /^body: required/);
    });
    test('body over the size bound', async () => {
      const before = t.server.broker.liveSessions;
      const r = await t.call('POST', '/api/session', { body: { name: 'huge', pad: 'x'.repeat(20_000) } });
      assertError(r, 413, 'INVALID_MESSAGE', /^body: larger than the limit of 16384 bytes/);
      assert.equal(t.server.broker.liveSessions, before);
      assert.equal(t.server.broker.get('huge'), undefined);
    });
    test('the same server keeps answering after bad input', async () => {
      await create('after-bad-input');
    });
  });

  test('GET /api/session/:name returns the session view (admin and peer tokens)', async () => {
    const s = await create('view-1', { streams: ['a', 'b'], latency: 250 });
    const r = await t.call('GET', '/api/session/view-1', { token: s.token });
    assert.equal(r.status, 200);
    sessionView.parse(r.json);
    assert.deepEqual(r.json, {
      session: 'view-1',
      state: 'WAITING',
      streams: {
        a: { state: 'waiting', peer_a: null, peer_b: null, path: 'direct', health: null },
        b: { state: 'waiting', peer_a: null, peer_b: null, path: 'direct', health: null },
      },
      latency: 250,
      created: r.json.created,
      expiresAt: s.expiresAt,
    });
    await t.server.broker.claim('view-1', 'b', peer('198.51.100.7', 5000, 'cam B'));
    const pt = await t.call('POST', '/api/session/view-1/token', { token: s.token, body: { stream: 'b' } });
    const pv = await t.call('GET', '/api/session/view-1', { token: pt.json.token });
    assert.equal(pv.status, 200);
    // A stream-scoped token sees only its own stream.
    assert.deepEqual(Object.keys(pv.json.streams), ['b']);
    assert.deepEqual(pv.json.streams.b.peer_a, {
      ip: '198.51.100.7',
      port: 5000,
      label: 'cam B',
      role: null,
      present: true,
    });
    assert.ok(!pv.text.includes(t.server.broker.get('view-1')?.passphrase ?? '-'));
  });

  test('session state follows claims: WAITING → READY on match', async () => {
    const s = await create('states-1');
    await t.server.broker.claim('states-1', undefined, peer('203.0.113.1', 9000, 'A'));
    assert.equal((await t.call('GET', '/api/session/states-1', { token: s.token })).json.state, 'WAITING');
    await t.server.broker.claim('states-1', undefined, peer('203.0.113.2', 9000, 'B'));
    const r = await t.call('GET', '/api/session/states-1', { token: s.token });
    assert.equal(r.json.state, 'READY');
    assert.equal(r.json.streams.default.state, 'ready');
  });

  test('DELETE closes (204, no body); afterwards GET, DELETE and a new token get 410', async () => {
    const s = await create('del-1');
    const events: string[] = [];
    const off = t.server.broker.subscribe((e) => {
      if (e.type === 'session_closed') events.push(`${e.session.name}:${e.reason}`);
    });
    const r = await t.call('DELETE', '/api/session/del-1', { token: s.token });
    off();
    assert.equal(r.status, 204);
    assert.equal(r.text, '');
    assert.deepEqual(events, ['del-1:admin_closed']);
    assertError(await t.call('GET', '/api/session/del-1', { token: s.token }), 410, 'SESSION_EXPIRED');
    assertError(await t.call('DELETE', '/api/session/del-1', { token: s.token }), 410, 'SESSION_EXPIRED');
    assertError(
      await t.call('POST', '/api/session/del-1/token', { token: s.token, body: {} }),
      410,
      'SESSION_EXPIRED',
    );
    // The name is free again, and the old admin token does not open the new session.
    const again = await create('del-1');
    assertError(
      await t.call('GET', '/api/session/del-1', { token: s.token }),
      410,
      'SESSION_EXPIRED',
      /earlier session/,
    );
    assert.equal((await t.call('GET', '/api/session/del-1', { token: again.token })).status, 200);
  });

  describe('/connect', () => {
    test('STREAM_NOT_READY 409 before both peers registered', async () => {
      const s = await create('conn-wait');
      assertError(
        await t.call('GET', '/api/session/conn-wait/connect', { token: s.token }),
        409,
        'STREAM_NOT_READY',
      );
      await t.server.broker.claim('conn-wait', undefined, peer('203.0.113.1', 9000, 'A'));
      assertError(
        await t.call('GET', '/api/session/conn-wait/connect', { token: s.token }),
        409,
        'STREAM_NOT_READY',
      );
    });

    test('both maps carry all five formats, built from the other peer', async () => {
      const s = await create('conn-1', { streams: ['main', 'backup'], latency: 120 });
      await t.server.broker.claim('conn-1', 'backup', peer('203.0.113.10', 7001, 'A'));
      await t.server.broker.claim('conn-1', 'backup', peer('198.51.100.20', 7001, 'B'));
      const pass = t.server.broker.get('conn-1')?.passphrase ?? '';
      const r = await t.call('GET', '/api/session/conn-1/connect?stream=backup&role=receiver', {
        token: s.token,
      });
      assert.equal(r.status, 200, r.text);
      connectResponse.parse(r.json);
      assert.equal(r.json.stream, 'backup');
      assert.equal(r.json.role, 'receiver');
      const formats = ['transcoder', 'studio-app', 'mixer', 'pipeline', 'live-transmit'];
      assert.deepEqual(Object.keys(r.json.for_peer_a), formats);
      assert.deepEqual(Object.keys(r.json.for_peer_b), formats);
      assert.match(r.json.for_peer_a['live-transmit'], /^srt-live-transmit "srt:\/\/198\.51\.100\.20:7001\?/);
      assert.match(
        r.json.for_peer_b['live-transmit'],
        /^srt-live-transmit udp:\/\/127\.0\.0\.1:<IN_PORT> "srt:\/\/203\.0\.113\.10:7001\?/,
      );
      for (const m of [r.json.for_peer_a, r.json.for_peer_b])
        for (const f of formats) assert.ok(m[f].includes(pass), f);
      assert.match(r.json.for_peer_a.mixer, /^Hostname: 198\.51\.100\.20$/m);
    });

    test('default stream is the first; default role sender; bad role and unknown stream are 400', async () => {
      const s = await create('conn-2', { streams: ['one', 'two'] });
      await t.server.broker.claim('conn-2', 'one', peer('203.0.113.1', 9000, 'A'));
      await t.server.broker.claim('conn-2', 'one', peer('203.0.113.2', 9000, 'B'));
      const r = await t.call('GET', '/api/session/conn-2/connect', { token: s.token });
      assert.equal(r.json.stream, 'one');
      assert.equal(r.json.role, 'sender');
      assertError(
        await t.call('GET', '/api/session/conn-2/connect?role=caller', { token: s.token }),
        400,
        'INVALID_MESSAGE',
        /^role: /,
      );
      assertError(
        await t.call('GET', '/api/session/conn-2/connect?stream=nope', { token: s.token }),
        400,
        'INVALID_MESSAGE',
        /^stream: /,
      );
    });

    test('a peer token gets 403: the strings carry the passphrase', async () => {
      const s = await create('conn-3');
      await t.server.broker.claim('conn-3', undefined, peer('203.0.113.1', 9000, 'A'));
      await t.server.broker.claim('conn-3', undefined, peer('203.0.113.2', 9000, 'B'));
      const pt = await t.call('POST', '/api/session/conn-3/token', { token: s.token, body: {} });
      assertError(
        await t.call('GET', '/api/session/conn-3/connect', { token: pt.json.token }),
        403,
        'AUTH_FAILED',
      );
    });
  });

  describe('POST /api/session/:name/token', () => {
    test('issues a peer token scoped to a stream, expiring with the session', async () => {
      const s = await create('tok-1', { streams: ['x', 'y'] });
      const r = await t.call('POST', '/api/session/tok-1/token', {
        token: s.token,
        body: { stream: 'y', label: 'cam 2' },
      });
      assert.equal(r.status, 201);
      tokenResponse.parse(r.json);
      assert.equal(r.json.stream, 'y');
      assert.equal(r.json.role, 'peer');
      assert.equal(r.json.exp, s.expiresAt / 1000);
      assert.equal(r.json.url, `${t.url}/s/tok-1?t=${encodeURIComponent(r.json.token)}`);
      const v = new TokenSigner(SECRET).verify(r.json.token, t.clock.now());
      assert.ok(v.ok);
      assert.deepEqual(v.claims, {
        session: 'tok-1',
        role: 'peer',
        stream: 'y',
        exp: s.expiresAt / 1000,
        sid: t.server.broker.get('tok-1')?.id,
        label: 'cam 2',
        inv: r.json.invite,
      });
    });
    test('stream omitted = first stream; null = all streams; no body accepted', async () => {
      const s = await create('tok-2', { streams: ['x', 'y'] });
      assert.equal(
        (await t.call('POST', '/api/session/tok-2/token', { token: s.token, body: {} })).json.stream,
        'x',
      );
      assert.equal(
        (await t.call('POST', '/api/session/tok-2/token', { token: s.token, body: { stream: null } })).json
          .stream,
        null,
      );
      assert.equal((await t.call('POST', '/api/session/tok-2/token', { token: s.token })).json.stream, 'x');
    });
    test('unknown stream 400; peer token 403; no token 401', async () => {
      const s = await create('tok-3');
      assertError(
        await t.call('POST', '/api/session/tok-3/token', { token: s.token, body: { stream: 'zz' } }),
        400,
        'INVALID_MESSAGE',
        /^stream: /,
      );
      const pt = await t.call('POST', '/api/session/tok-3/token', { token: s.token, body: {} });
      assertError(
        await t.call('POST', '/api/session/tok-3/token', { token: pt.json.token, body: {} }),
        403,
        'AUTH_FAILED',
      );
      assertError(await t.call('POST', '/api/session/tok-3/token', { body: {} }), 401, 'AUTH_FAILED');
    });
    test('a peer token cannot close the session', async () => {
      const s = await create('tok-4');
      const pt = await t.call('POST', '/api/session/tok-4/token', { token: s.token, body: {} });
      assertError(await t.call('DELETE', '/api/session/tok-4', { token: pt.json.token }), 403, 'AUTH_FAILED');
      assert.equal(t.server.broker.get('tok-4')?.state, 'WAITING');
    });
  });

  describe('token forgery and misuse', () => {
    let admin: { token: string; expiresAt: number };
    let peerToken: string;
    before(async () => {
      admin = await create('forge-1', { streams: ['s1', 's2'] });
      await create('forge-2');
      peerToken = (
        await t.call('POST', '/api/session/forge-1/token', { token: admin.token, body: { stream: 's1' } })
      ).json.token;
    });
    const segments = (tok: string) => {
      const dot = tok.lastIndexOf('.');
      return { payload: tok.slice(2, dot), sig: tok.slice(dot + 1) };
    };
    test('tampered payload (role upgraded from peer to admin, signature kept)', async () => {
      const { payload, sig } = segments(peerToken);
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
      claims.role = 'admin';
      claims.stream = null;
      const forged = `p_${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${sig}`;
      const r = await t.call('DELETE', '/api/session/forge-1', { token: forged });
      assertError(r, 401, 'AUTH_FAILED');
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="punch"');
      assert.equal(t.server.broker.get('forge-1')?.state, 'WAITING');
    });
    test('tampered signature', async () => {
      const { payload, sig } = segments(admin.token);
      const flipped = (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1);
      assertError(
        await t.call('GET', '/api/session/forge-1', { token: `p_${payload}.${flipped}` }),
        401,
        'AUTH_FAILED',
      );
      assertError(
        await t.call('GET', '/api/session/forge-1', { token: `p_${payload}.${sig.slice(0, -2)}` }),
        401,
        'AUTH_FAILED',
      );
    });
    test('token for another session: 403', async () => {
      assertError(
        await t.call('GET', '/api/session/forge-2', { token: admin.token }),
        403,
        'AUTH_FAILED',
        /another session/,
      );
    });
    test('peer token for another stream sees nothing of it', async () => {
      const r = await t.call('GET', '/api/session/forge-1', { token: peerToken });
      assert.deepEqual(Object.keys(r.json.streams), ['s1']);
      // and cannot mint tokens for it
      assertError(
        await t.call('POST', '/api/session/forge-1/token', { token: peerToken, body: { stream: 's2' } }),
        403,
        'AUTH_FAILED',
      );
    });
    test('expired token: 410', async () => {
      const expired = new TokenSigner(SECRET).sign({
        session: 'forge-1',
        role: 'admin',
        stream: null,
        exp: Math.floor(t.clock.now() / 1000) - 1,
      });
      assertError(await t.call('GET', '/api/session/forge-1', { token: expired }), 410, 'SESSION_EXPIRED');
    });
    test('token signed with another secret: 401', async () => {
      const other = new TokenSigner('another-secret-of-sufficient-length-0123456789abcdef');
      const token = other.sign({
        session: 'forge-1',
        role: 'admin',
        stream: null,
        exp: admin.expiresAt / 1000,
      });
      assertError(await t.call('GET', '/api/session/forge-1', { token }), 401, 'AUTH_FAILED');
    });
    test('garbage, empty, wrong scheme, JWT-looking: 401', async () => {
      for (const token of [
        'garbage',
        'p_',
        'p_.',
        'p_x.y',
        'eyJhbGciOiJIUzI1NiJ9.e30.x',
        `p_${'A'.repeat(5000)}.x`,
      ]) {
        assertError(await t.call('GET', '/api/session/forge-1', { token }), 401, 'AUTH_FAILED');
      }
      assertError(
        await t.call('GET', '/api/session/forge-1', { headers: { authorization: `Basic ${admin.token}` } }),
        401,
        'AUTH_FAILED',
      );
      assertError(await t.call('GET', '/api/session/forge-1'), 401, 'AUTH_FAILED');
    });
  });

  test('GET and HEAD /api/health are public', async () => {
    const r = await t.call('GET', '/api/health');
    assert.equal(r.status, 200);
    assert.equal(r.json.status, 'ok');
    assert.equal(r.json.version, '1.0');
    assert.equal(typeof r.json.uptime, 'number');
    const h = await t.call('HEAD', '/api/health');
    assert.equal(h.status, 200);
    assert.equal(h.text, '');
  });

  test('unknown route: 404 NOT_FOUND with the error body', async () => {
    assertError(await t.call('GET', '/api/nothing'), 404, 'NOT_FOUND');
    assertError(await t.call('PUT', '/api/session/x'), 404, 'NOT_FOUND');
  });

  test('OpenAPI 3.1 document is generated from the validating schemas', async () => {
    const r = await t.call('GET', '/api/openapi.json');
    assert.equal(r.status, 200);
    assert.equal(r.json.openapi, '3.1.0');
    const req = r.json.components.schemas.CreateSessionRequest;
    assert.equal(req.properties.name.pattern, NAME_PATTERN.source);
    assert.equal(req.properties.streams.maxItems, 16);
    assert.equal(req.properties.latency.minimum, 20);
    assert.equal(req.properties.latency.maximum, 8000);
    assert.deepEqual(req.required, ['name']);
    assert.deepEqual(r.json.paths['/api/session'].post.security, []);
    const paths = r.json.paths as Record<string, Record<string, { operationId: string }>>;
    const ops = Object.values(paths).flatMap((p) => Object.values(p).map((o) => o.operationId));
    for (const id of [
      'createSession',
      'getSession',
      'closeSession',
      'connectionStrings',
      'issuePeerToken',
      'health',
      'metrics',
      'sessionPage',
      'sessionQr',
    ]) {
      assert.ok(ops.includes(id), id);
    }
    assert.ok(r.json.paths['/api/session/{name}'].get.responses['500']);
    assert.ok(r.json.paths['/api/session/{name}'].delete.responses['503']);
    assert.ok(!r.text.includes('#/$defs/'));
  });

  test('GET /metrics exposes the broker counters', async () => {
    await create('metrics-1');
    const r = await t.call('GET', '/metrics');
    assert.equal(r.status, 200);
    const created = /^punch_sessions_created_total (\d+)$/m.exec(r.text);
    assert.ok(created && Number(created[1]) >= 1, r.text);
    assert.match(r.text, /^punch_sessions_live \d+$/m);
    assert.match(r.text, /^punch_sessions_closed_total\{reason="admin_closed"\} \d+$/m);
  });

  test("pages: a peer token's page and QR carry it; an admin token never goes into a QR", async () => {
    const s = await create('page-1');
    const peer = (await t.call('POST', '/api/session/page-1/token', { token: s.token, body: {} })).json;
    const peerPage = await t.call('GET', `/s/page-1?t=${encodeURIComponent(peer.token)}`);
    assert.equal(peerPage.status, 200);
    assert.match(peerPage.headers.get('content-type') ?? '', /text\/html/);
    // The join page is the console in its peer role: the script reads the token from the address.
    assert.match(peerPage.text, /data-role="peer"/);
    assert.ok(!peerPage.text.includes(peer.token), 'the token is not written into the HTML');
    assert.match(peerPage.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const qrUrl = async (query: string) => {
      const qr = await t.call('GET', `/s/page-1/qr${query}`);
      assert.equal(qr.status, 200);
      assert.match(qr.headers.get('content-type') ?? '', /image\/svg\+xml/);
      assert.match(qr.text, /^<svg /);
      return qr.text;
    };
    // The QR of an admin link is the bare page URL: identical to the QR without any token.
    const bare = await qrUrl('');
    assert.equal(await qrUrl(`?t=${encodeURIComponent(s.token)}`), bare);
    assert.notEqual(await qrUrl(`?t=${encodeURIComponent(peer.token)}`), bare);
    const adminPage = await t.call('GET', `/s/page-1?t=${encodeURIComponent(s.token)}`);
    assert.equal(adminPage.status, 200);
    assert.ok(!adminPage.text.includes('qr?t='), 'no token-bearing QR on the admin page');
    assert.match(adminPage.text, /data-role="admin"/);
  });

  test('pages: without a token a link hint (404 for an unknown name); a token the API refuses is refused here too', async () => {
    const s = await create('page-2');
    const joinLive = await t.call('GET', '/s/page-2');
    const joinUnknown = await t.call('GET', '/s/no-such-session');
    // Without a token: a page that says how to get a link; an unknown name is a clear 404.
    assert.equal(joinLive.status, 200);
    assert.match(joinLive.text, /operator/);
    assert.equal(joinUnknown.status, 404);
    assert.match(joinUnknown.text, /No session/);
    // A forged token is just "no token".
    const forged = await t.call('GET', `/s/page-2?t=${encodeURIComponent(s.token.slice(0, -2) + 'AA')}`);
    assert.equal(forged.text, joinLive.text);
    // After close the API answers 410 for this token, and so does the page.
    assert.equal((await t.call('DELETE', '/api/session/page-2', { token: s.token })).status, 204);
    assert.equal((await t.call('GET', '/api/session/page-2', { token: s.token })).status, 410);
    const closed = await t.call('GET', `/s/page-2?t=${encodeURIComponent(s.token)}`);
    assert.equal(closed.status, 410);
    assert.match(closed.text, /closed or expired/);
    // No inline style (the page's CSP allows styles from this origin only): the console's stylesheet.
    assert.doesNotMatch(closed.text, /<style|style=/);
    assert.match(closed.text, /<link rel="stylesheet" href="\/assets\/console.css">/);
    // The QR of a closed session is not served; an unknown name is 404.
    assert.equal((await t.call('GET', '/s/page-2/qr')).status, 410);
    assert.equal(
      (await t.call('GET', `/s/page-2/qr?t=${encodeURIComponent(s.token)}&format=png`)).status,
      410,
    );
    assert.equal((await t.call('GET', '/s/no-such-session/qr')).status, 404);
  });

  test('DELETE and /token accept an empty JSON body (Content-Type set, nothing sent)', async () => {
    const s = await create('empty-1');
    const json = { 'content-type': 'application/json' };
    const tok = await t.call('POST', '/api/session/empty-1/token', {
      token: s.token,
      rawBody: '',
      headers: json,
    });
    assert.equal(tok.status, 201, tok.text);
    const del = await t.call('DELETE', '/api/session/empty-1', {
      token: s.token,
      rawBody: '',
      headers: json,
    });
    assert.equal(del.status, 204, del.text);
  });
});

describe('SERVER_ERROR, SESSION_LIMIT and Turnstile', () => {
  test('a failing store: 503 STORE_UNAVAILABLE without internals, nothing half-exists, health degraded', async () => {
    let failing = true;
    class FailingStore extends MemoryStore {
      override putSession(session: Parameters<MemoryStore['putSession']>[0]): void {
        if (failing) throw new Error('disk full at /secret/path');
        super.putSession(session);
      }
    }
    const t = await injectBroker({ store: new FailingStore() });
    try {
      assert.equal((await t.call('GET', '/api/health')).json.status, 'ok');
      const r = await t.call('POST', '/api/session', { body: { name: 'boom' } });
      assertError(r, 503, 'STORE_UNAVAILABLE', /nothing was changed/);
      assert.equal(r.headers.get('retry-after'), '5');
      assert.ok(!r.text.includes('disk full') && !r.text.includes('/secret'));
      assert.equal(t.server.broker.get('boom'), undefined);
      assert.equal(t.server.broker.liveSessions, 0);
      // Monitors see it: 503 degraded, on GET and HEAD, while saves fail.
      const h = await t.call('GET', '/api/health');
      assert.equal(h.status, 503);
      assert.equal(h.json.status, 'degraded');
      assert.equal(h.json.store.state, 'failing');
      assert.match(h.json.store.since, /^\d{4}-\d\d-\d\dT/);
      assert.equal((await t.call('HEAD', '/api/health')).status, 503);
      // The next successful save clears it.
      failing = false;
      assert.equal((await t.call('POST', '/api/session', { body: { name: 'boom' } })).status, 201);
      const ok = await t.call('GET', '/api/health');
      assert.deepEqual(
        [ok.status, ok.json.status, ok.json.store],
        [200, 'ok', { kind: 'sqlite', state: 'ok' }],
      );
    } finally {
      await t.close();
    }
  });

  test('SESSION_LIMIT 503 when the server holds its maximum of live sessions', async () => {
    const t = await injectBroker({ limits: { maxSessions: 2 } });
    try {
      for (const name of ['a1', 'a2'])
        assert.equal((await t.call('POST', '/api/session', { body: { name } })).status, 201);
      const r = await t.call('POST', '/api/session', { body: { name: 'a3' } });
      assertError(r, 503, 'SESSION_LIMIT');
      assert.equal(r.headers.get('retry-after'), '60');
    } finally {
      await t.close();
    }
  });

  test('Turnstile: missing or rejected → 403 TURNSTILE_FAILED; accepted → 201', async () => {
    const seen: [string, string][] = [];
    const t = await injectBroker({
      turnstile: (token, ip) => {
        seen.push([token, ip]);
        if (token !== 'good' && token !== 'bad') throw new Error(`unplanned Turnstile token ${token}`);
        return Promise.resolve(token === 'good');
      },
    });
    try {
      assertError(await t.call('POST', '/api/session', { body: { name: 'ts-1' } }), 403, 'TURNSTILE_FAILED');
      assertError(
        await t.call('POST', '/api/session', { body: { name: 'ts-1', turnstileToken: 'bad' } }),
        403,
        'TURNSTILE_FAILED',
      );
      assert.equal(t.server.broker.get('ts-1'), undefined);
      assert.equal(
        (await t.call('POST', '/api/session', { body: { name: 'ts-1', turnstileToken: 'good' } })).status,
        201,
      );
      assert.equal(
        (
          await t.call('POST', '/api/session', {
            body: { name: 'ts-2' },
            headers: { 'cf-turnstile-response': 'good' },
          })
        ).status,
        201,
      );
      assert.deepEqual(seen, [
        ['bad', '127.0.0.1'],
        ['good', '127.0.0.1'],
        ['good', '127.0.0.1'],
      ]);
    } finally {
      await t.close();
    }
  });
});

describe('rate limits (per client IP, before any session state)', () => {
  test('the 11th create in a minute from one IP gets 429 with Retry-After, and creates nothing', async () => {
    const t = await injectBroker({ limits: { createPerMinute: 10 } });
    try {
      for (let i = 1; i <= 10; i++) {
        assert.equal(
          (await t.call('POST', '/api/session', { body: { name: `rl-${i}` } })).status,
          201,
          `create ${i}`,
        );
      }
      const r = await t.call('POST', '/api/session', { body: { name: 'rl-11' } });
      assertError(r, 429, 'RATE_LIMITED');
      const retry = Number(r.headers.get('retry-after'));
      assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${retry}`);
      assert.equal(t.server.broker.get('rl-11'), undefined);
      // Even an invalid or oversized body is refused by the limiter first (it is not read at all).
      assertError(
        await t.call('POST', '/api/session', {
          rawBody: 'not json',
          headers: { 'content-type': 'application/json' },
        }),
        429,
        'RATE_LIMITED',
      );
      // Other endpoints have their own bucket.
      assert.equal((await t.call('GET', '/api/health')).status, 200);
    } finally {
      await t.close();
    }
  });

  test('separate buckets: the 61st GET gets 429; pages, /token and DELETE have their own', async () => {
    const t = await injectBroker({ limits: { getPerMinute: 60, adminPerMinute: 2, pagePerMinute: 3 } });
    try {
      const s = (await t.call('POST', '/api/session', { body: { name: 'g-1' } })).json;
      for (let i = 1; i <= 60; i++)
        assert.equal((await t.call('GET', '/api/session/g-1', { token: s.token })).status, 200);
      assertError(
        await t.call('GET', '/api/session/g-1', { token: s.token }),
        429,
        'RATE_LIMITED',
        /session reads/,
      );
      for (let i = 0; i < 3; i++) assert.equal((await t.call('GET', '/s/g-1')).status, 200);
      assertError(await t.call('GET', '/s/g-1'), 429, 'RATE_LIMITED', /session pages/);
      assert.equal(
        (await t.call('POST', '/api/session/g-1/token', { token: s.token, body: {} })).status,
        201,
      );
      assert.equal((await t.call('DELETE', '/api/session/g-1', { token: s.token })).status, 204);
      assertError(
        await t.call('DELETE', '/api/session/g-1', { token: s.token }),
        429,
        'RATE_LIMITED',
        /administration/,
      );
    } finally {
      await t.close();
    }
  });

  test('IPv6: addresses of one /64 share a limit; another /64 has its own', async () => {
    const t = await injectBroker({ limits: { createPerMinute: 3 }, config: { trustProxy: '1' } });
    try {
      const from = (ip: string, name: string) =>
        t.call('POST', '/api/session', { body: { name }, headers: { 'x-forwarded-for': ip } });
      const statuses = [];
      const sameLan = [
        '2001:db8:1:2::1',
        '2001:db8:1:2:a:b:c:d',
        '2001:db8:1:2:ffff:ffff:ffff:ffff',
        '2001:db8:1:2::2',
      ];
      for (const [i, ip] of sameLan.entries()) statuses.push((await from(ip, `v6-${i}`)).status);
      assert.deepEqual(statuses, [201, 201, 201, 429]);
      assert.equal((await from('2001:db8:1:3::1', 'v6-next')).status, 201);
    } finally {
      await t.close();
    }
  });

  test('a full key table still serves a new client (the least recently seen key is forgotten)', async () => {
    const t = await injectBroker({
      limits: { createPerMinute: 1, getPerMinute: 1, rateLimitKeys: 100 },
      config: { trustProxy: '1' },
    });
    try {
      const s = (await t.call('POST', '/api/session', { body: { name: 'kt' } })).json;
      for (let i = 0; i < 100; i++) {
        const r = await t.call('GET', '/api/session/kt', {
          token: s.token,
          headers: { 'x-forwarded-for': `198.51.100.${i}` },
        });
        assert.equal(r.status, 200);
      }
      const fresh = await t.call('GET', '/api/session/kt', {
        token: s.token,
        headers: { 'x-forwarded-for': '192.0.2.200' },
      });
      assert.equal(fresh.status, 200, fresh.text);
      // The newest keys are kept: 198.51.100.99 is still limited.
      const again = await t.call('GET', '/api/session/kt', {
        token: s.token,
        headers: { 'x-forwarded-for': '198.51.100.99' },
      });
      assert.equal(again.status, 429);
    } finally {
      await t.close();
    }
  });
});

describe('fuzz: arbitrary create bodies', () => {
  test('every body gets 201, 400 or 409 with a well-formed answer; never a 500; the server stays up', async () => {
    const t = await injectBroker({ limits: { maxSessions: 0 } });
    try {
      const value = fc.oneof(
        fc.string({ maxLength: 80 }),
        fc.integer(),
        fc.double(),
        fc.boolean(),
        fc.constant(null),
        fc.array(fc.string({ maxLength: 70 }), { maxLength: 20 }),
      );
      const body = fc.oneof(
        fc.record(
          { name: value, streams: value, latency: value, ttl: value, extra: value },
          { requiredKeys: [] },
        ),
        fc.jsonValue({ maxDepth: 3 }),
      );
      await fc.assert(
        fc.asyncProperty(body, async (b) => {
          const r = await t.server.app.inject({
            method: 'POST',
            url: '/api/session',
            headers: { 'content-type': 'application/json' },
            payload: JSON.stringify(b) ?? 'null',
          });
          assert.equal(r.headers['punch-version'], '1.0');
          assert.ok([201, 400, 409].includes(r.statusCode), `${r.statusCode} ${r.body}`);
          const json = r.json();
          if (r.statusCode === 201) assert.equal(typeof json.token, 'string');
          else {
            assert.equal(json.error, r.statusCode === 400 ? 'INVALID_REQUEST' : 'SESSION_EXISTS');
            assert.equal(typeof json.message, 'string');
          }
        }),
        { numRuns: 300 },
      );
      assert.equal((await t.call('GET', '/api/health')).status, 200);
    } finally {
      await t.close();
    }
  });
});
