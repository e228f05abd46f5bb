// Control API and WebSocket only for their operator: a foreign Host header (DNS rebinding) is refused on
// every route and on the WebSocket upgrade; mutations without the admin token answer 401; the token is
// generated at first start, kept 0600 and reused.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { tempDir } from '@broadcast-ops/core/testing';
import { hostAllowed } from '@broadcast-ops/core';
import { allowedHostNames, loadAdminToken } from '../../src/io/access.ts';
import { startRig, type Rig } from '../outputs/helpers.ts';

const TOKEN = 'operator-token-0123456789abcdef';
let rig: Rig;

before(async () => {
  rig = await startRig(1, {}, { adminToken: TOKEN });
});
after(async () => {
  await rig?.close();
});

function call(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; body: string }> {
  const url = new URL(rig.url);
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { ...(data ? { 'content-type': 'application/json' } : {}), ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const MUTATIONS: [string, string, unknown][] = [
  ['PUT', '/api/config', {}],
  ['PUT', '/api/settings', { updateIntervalMs: 200 }],
  ['POST', '/api/devices', { name: 'X', type: 'tcp_recorder', ip: '127.0.0.1' }],
  ['PUT', '/api/devices/1', { name: 'X', type: 'tcp_recorder', ip: '127.0.0.1' }],
  ['PATCH', '/api/devices/1', { name: 'Renamed' }],
  ['DELETE', '/api/devices/1', undefined],
  ['POST', '/api/devices/1/test', undefined],
  ['POST', '/api/test', { type: 'tcp_recorder', ip: '127.0.0.1' }],
  ['POST', '/api/devices/1/simulate', { state: 'play' }],
  ['DELETE', '/api/devices/1/simulate', undefined],
];

test('a foreign Host header is refused with 421 on every route, token or not', async () => {
  for (const host of ['evil.example', 'evil.example:3050', 'attacker.test.', 'rebind.evil.example:80']) {
    for (const [method, path, body] of [
      ...MUTATIONS,
      ['GET', '/health', undefined] as const,
      ['GET', '/api/config', undefined] as const,
    ]) {
      const r = await call(method, path, { host, authorization: `Bearer ${TOKEN}` }, body);
      assert.equal(r.status, 421, `${method} ${path} with Host ${host}: ${r.body}`);
      const err = JSON.parse(r.body) as { error: string; message: string };
      assert.equal(err.error, 'HOST_NOT_ALLOWED');
      assert.equal(typeof err.message, 'string');
    }
  }
});

test('without the token every mutation answers 401; with it they run', async () => {
  for (const [method, path, body] of MUTATIONS) {
    const r = await call(method, path, {}, body);
    assert.equal(r.status, 401, `${method} ${path}: ${r.body}`);
    const wrong = await call(method, path, { authorization: 'Bearer not-the-token' }, body);
    assert.equal(wrong.status, 401, `${method} ${path} with a wrong token`);
  }
  const ok = await call(
    'POST',
    '/api/devices/1/simulate',
    { authorization: `Bearer ${TOKEN}` },
    { state: 'play' },
  );
  assert.equal(ok.status, 200, ok.body);
  const end = await call('DELETE', '/api/devices/1/simulate', { authorization: `Bearer ${TOKEN}` });
  assert.equal(end.status, 204);
  // The page's own name works without a token for reads.
  assert.equal((await call('GET', '/health', { host: `localhost:${new URL(rig.url).port}` })).status, 200);
});

test('the WebSocket upgrade with a foreign Host is refused (421); with the right one it is accepted', async () => {
  const upgrade = (host: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const url = new URL(rig.url);
      const req = request({
        host: url.hostname,
        port: url.port,
        path: '/ws',
        headers: {
          host,
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        },
      });
      req.on('response', (res) => {
        resolve(res.statusCode ?? 0);
        res.resume();
      });
      req.on('upgrade', (res, socket) => {
        resolve(res.statusCode ?? 0);
        socket.destroy();
      });
      req.on('error', reject);
      req.end();
    });
  assert.equal(await upgrade('evil.example'), 421);
  assert.equal(await upgrade(new URL(rig.url).host), 101);
});

test("host allow-list: core's rule (IP literals, localhost, this machine) plus the listen address and configured names", () => {
  const named = allowedHostNames({ listenAddress: 'playout.local', allowedHosts: ['playout.studio.lan'] });
  assert.ok(hostAllowed('PLAYOUT.studio.lan:3050', named));
  assert.ok(hostAllowed('playout.local:3050', named));
  assert.ok(hostAllowed('10.0.0.5', named));
  assert.ok(hostAllowed('[::1]:3050', named));
  assert.ok(hostAllowed('localhost', named));
  assert.ok(!hostAllowed('rebind.evil.example', named));
  assert.ok(!hostAllowed(undefined, named));
});

test('admin token: generated once at first start (0600), reused, explicit opt-out', () => {
  const dir = tempDir('playout-token-');
  try {
    const env = { PLAYOUT_MONITOR_DATA_DIR: join(dir.path, 'data') };
    const first = loadAdminToken(env);
    assert.equal(first.source, 'generated');
    assert.ok(first.token && first.token.length >= 24);
    assert.equal(statSync(first.file ?? '').mode & 0o777, 0o600);
    const again = loadAdminToken(env);
    assert.equal(again.source, 'file');
    assert.equal(again.token, first.token);
    assert.equal(
      loadAdminToken({ ...env, PLAYOUT_MONITOR_ADMIN_TOKEN: 'from-env-0123456789' }).token,
      'from-env-0123456789',
    );
    const off = loadAdminToken({ ...env, PLAYOUT_MONITOR_AUTH: 'off' });
    assert.equal(off.token, undefined);
  } finally {
    dir.remove();
  }
});
