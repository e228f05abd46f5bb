// One HTTP edge for the four services (docs/ARCHITECTURE.md "The HTTP edge"): each service runs as its tests
// start it, on 127.0.0.1:0, and gets the same bad requests over real sockets: a foreign Host, an unknown
// route, malformed JSON, a wrong content type, an oversized body, a state change without a credential. The
// answers must agree in status, generic code and body shape, and no answer may carry a fastify `FST_ERR`
// code. Body cases carry a valid credential, so each reaches the body parser and not the credential check.
// Last, each stops with a connection open that never sent a byte, as a browser's preconnect (core's
// close rules, docs/ARCHITECTURE.md "The HTTP edge").
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { settlesWithin } from '@broadcast-ops/core/testing';
import { startTestServer, type TestServer } from '@broadcast-ops/punch/testing';
import { startRig, type Rig } from '@broadcast-ops/playout-monitor/testing';
import { startTestBridge, type TestBridge } from '@broadcast-ops/telemetry-bridge/testing';
import { startWebRig, type WebRig } from '@broadcast-ops/timesvc/testing';

const PLAYOUT_TOKEN = 'parity-admin-token-0123456789abcdef';
const BRIDGE_TOKEN = 'parity-bridge-token-0123456789';

interface Target {
  name: string;
  url: string;
  /** A credential every route of the service accepts. */
  auth: Record<string, string>;
  /** A route that takes a JSON body (POST). */
  jsonRoute: string;
  /** A state-changing route that needs a credential: [method, path]. */
  changing: [string, string];
}

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One request over a real socket (node:http, so the Host header is ours to set). */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
  holdBody = false,
): Promise<Answer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          connection: 'close',
          ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
          ...headers,
        },
      },
      (res) => {
        answered = true;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers });
          if (holdBody) req.destroy();
        });
        res.on('error', reject);
      },
    );
    // Only an error before the answer counts (a held body's request is destroyed after its answer).
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    // A held body is announced by Content-Length and never sent: the answer must come from the length
    // alone, and no unread bytes are left for the server to reset the connection over.
    if (holdBody) req.flushHeaders();
    else req.end(body);
  });
}

let punch: TestServer;
let playout: Rig;
let bridge: TestBridge;
let timesvc: WebRig;
const targets: Target[] = [];

before(async () => {
  punch = await startTestServer();
  playout = await startRig(1, {}, { adminToken: PLAYOUT_TOKEN });
  bridge = await startTestBridge({ clientTransport: { requireAuth: true, authTokens: [BRIDGE_TOKEN] } });
  timesvc = await startWebRig();
  const timesvcAdmin = await timesvc.login('admin');
  targets.push(
    {
      name: 'punch',
      url: punch.url,
      auth: {},
      jsonRoute: '/api/session',
      changing: ['DELETE', '/api/session/parity'],
    },
    {
      name: 'playout-monitor',
      url: playout.url,
      auth: { authorization: `Bearer ${PLAYOUT_TOKEN}` },
      jsonRoute: '/api/devices',
      changing: ['DELETE', '/api/devices/1'],
    },
    {
      name: 'telemetry-bridge',
      url: bridge.bridge.consoleUrl ?? '',
      auth: { authorization: `Bearer ${BRIDGE_TOKEN}` },
      // The bridge's HTTP side takes no body and changes nothing (every change goes through its WebSocket,
      // docs/console.md): the body cases go to a path without a POST route, the credential case to a read.
      jsonRoute: '/api/state',
      changing: ['GET', '/api/state'],
    },
    {
      name: 'timesvc',
      url: timesvc.url,
      auth: { authorization: `Bearer ${timesvcAdmin}` },
      jsonRoute: '/api/config/ntp/peers',
      changing: ['DELETE', '/api/config/ntp/peers/192.0.2.1'],
    },
  );
});

let closed = false;
after(async () => {
  if (!closed)
    await Promise.allSettled([punch?.close(), playout?.close(), bridge?.close(), timesvc?.close()]);
});

const OVERSIZED = JSON.stringify({ pad: 'x'.repeat(256 * 1024) });

const CASES: {
  name: string;
  status: number;
  error: string;
  send: (t: Target) => Promise<Answer>;
  /** Services that answer otherwise, with the reason (asserted too). */
  except?: Record<string, { status: number; error: string; why: string }>;
}[] = [
  {
    name: 'a Host this server does not answer to',
    status: 421,
    error: 'HOST_NOT_ALLOWED',
    send: (t) => send(t.url, t.changing[0], t.changing[1], { ...t.auth, host: 'rebind.evil.example' }),
  },
  {
    name: 'an unknown route',
    status: 404,
    error: 'NOT_FOUND',
    send: (t) => send(t.url, 'GET', '/no-such-route/at-all', t.auth),
  },
  {
    name: 'malformed JSON',
    status: 400,
    error: 'INVALID_REQUEST',
    send: (t) =>
      send(t.url, 'POST', t.jsonRoute, { ...t.auth, 'content-type': 'application/json' }, '{"name": "x",'),
  },
  {
    name: 'a body that is not JSON',
    status: 415,
    error: 'UNSUPPORTED_MEDIA_TYPE',
    send: (t) => send(t.url, 'POST', t.jsonRoute, { ...t.auth, 'content-type': 'text/x-parity' }, 'name=x'),
    except: {
      'telemetry-bridge': {
        status: 404,
        error: 'NOT_FOUND',
        why: 'no route of the bridge takes a body; fastify checks the media type only on one that does',
      },
    },
  },
  {
    name: 'an oversized body',
    status: 413,
    error: 'PAYLOAD_TOO_LARGE',
    send: (t) =>
      send(t.url, 'POST', t.jsonRoute, { ...t.auth, 'content-type': 'application/json' }, OVERSIZED, true),
  },
  {
    name: 'a state change without a credential',
    status: 401,
    error: 'UNAUTHORIZED',
    send: (t) => send(t.url, t.changing[0], t.changing[1], {}),
  },
];

for (const c of CASES) {
  test(`${c.name}: the same status, code and body shape from every service`, async () => {
    const seen: string[] = [];
    for (const t of targets) {
      const r = await c.send(t);
      const expected = c.except?.[t.name] ?? { status: c.status, error: c.error };
      const what = `${t.name}: ${r.status} ${r.body}`;
      assert.equal(r.status, expected.status, what);
      assert.match(String(r.headers['content-type']), /^application\/json/, what);
      const body = JSON.parse(r.body) as Record<string, unknown>;
      assert.equal(body['error'], expected.error, what);
      assert.equal(typeof body['message'], 'string', what);
      assert.ok((body['message'] as string).length > 0, what);
      // One shape: {error, message} (+ details); punch adds the spec's `code` (packages/punch/README.md "Errors").
      for (const key of Object.keys(body))
        assert.ok(['error', 'message', 'details', 'code'].includes(key), what);
      if ('code' in body) assert.equal(t.name, 'punch', what);
      assert.doesNotMatch(r.body, /FST_/, what);
      assert.doesNotMatch(JSON.stringify(r.headers), /FST_/, what);
      seen.push(t.name);
    }
    assert.deepEqual(seen, ['punch', 'playout-monitor', 'telemetry-bridge', 'timesvc']);
  });
}

test('each service stops with a connection open that never sent a byte (a page open on a PC), and ends it', async () => {
  const silent = await Promise.all(
    targets.map(
      (t) =>
        new Promise<{ name: string; ended: Promise<void> }>((resolve, reject) => {
          const url = new URL(t.url);
          const socket = connect(Number(url.port), url.hostname);
          const ended = new Promise<void>((r) => socket.once('close', () => r()));
          socket.once('error', reject);
          socket.once('connect', () => {
            socket.removeListener('error', reject);
            socket.on('error', () => undefined);
            resolve({ name: t.name, ended });
          });
        }),
    ),
  );
  // Each accept has run once a request on another connection is answered.
  for (const t of targets) await send(t.url, 'GET', '/no-such-route/at-all', t.auth);
  closed = true;
  const stops = await Promise.all(
    [punch.close(), playout.close(), bridge.close(), timesvc.close()].map((p, i) =>
      settlesWithin(p, 30_000, `${targets[i]!.name} close`),
    ),
  );
  assert.equal(stops.length, 4);
  for (const s of silent)
    await settlesWithin(s.ended, 30_000, `${s.name}: the silent connection ended by the server`);
});
