// Control API and WebSocket only for their operator: a foreign Host header (DNS rebinding) is refused on
// the WebSocket upgrade (on every route: test/app/security.test.ts); mutations without the admin token
// answer 401; the token is generated at first start, kept 0600 and reused.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { tempDir } from '@broadcast-ops/core/testing';
import { loadAdminToken } from '../../src/io/access.ts';
import { startRig, type Rig } from '../outputs/helpers.ts';
import { MUTATIONS } from '../pure-helpers.ts';

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
