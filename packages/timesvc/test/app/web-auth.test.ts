// Route-by-role on the app wired on a ManualClock (inject, no socket): every route of the permission table
// (src/domain/permissions.ts) with no token, a bad token, an expired token and each role; login, its
// throttle, one error shape. The scrypt cost and the Host check (it reaches a config file) are in
// test/io/web-auth.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { allowed, ROLES, ROUTES, type RouteSpec } from '../../src/domain/permissions.ts';
import { LoginThrottle } from '../../src/io/web/auth.ts';
import { buildWebApp, JWT_SECRET, type WebApp } from '../helpers/web-app.ts';

describe('the web API’s authentication and roles', () => {
  let rig: WebApp;
  before(async () => {
    rig = await buildWebApp();
  });
  after(async () => {
    await rig?.close();
  });

  const sign = (claims: Record<string, unknown>, expS: number, secret = JWT_SECRET): Promise<string> =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(String(claims['username']))
      .setIssuer('timesvc')
      .setIssuedAt(expS - 3600)
      .setExpirationTime(expS)
      .sign(new TextEncoder().encode(secret));

  /** The request a route gets in the matrix (WebSocket paths are plain GETs here: no upgrade). */
  function call(r: RouteSpec, token?: string) {
    const url = r.url.replace(':address', encodeURIComponent('127.0.0.1:9'));
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    let payload: unknown;
    if (r.method === 'PUT') payload = { ntp: { port: 0, interface: '127.0.0.1', local_stratum: true } };
    if (r.url === '/api/config/ntp/peers') payload = { address: '127.0.0.1:9' };
    return rig.service.app.inject({
      method: r.method,
      url,
      headers,
      ...(payload ? { payload: payload } : {}),
    });
  }

  test('every protected route: 401 without a token, with a bad token, with an expired token; one error shape', async () => {
    const now = Math.floor(Date.now() / 1000);
    const expired = await sign({ username: 'admin', role: 'admin' }, now - 10);
    const foreign = await sign(
      { username: 'admin', role: 'admin' },
      now + 3600,
      'another-secret-0123456789abcdef-xyz',
    );
    const noneAlg =
      Buffer.from('{"alg":"none"}').toString('base64url') +
      '.' +
      Buffer.from(
        JSON.stringify({ username: 'admin', role: 'admin', sub: 'admin', iss: 'timesvc', exp: now + 99 }),
      ).toString('base64url') +
      '.';
    for (const r of ROUTES.filter((x) => x.permission !== 'public')) {
      for (const [what, token, message] of [
        ['no token', undefined, 'missing authentication token'],
        ['garbage', 'not-a-jwt', 'invalid token'],
        ['other secret', foreign, 'invalid token'],
        ['alg none', noneAlg, 'invalid token'],
        ['expired', expired, 'token expired'],
      ] as const) {
        const res = await call(r, token);
        assert.equal(res.statusCode, 401, `${r.method} ${r.url} ${what}: ${res.body}`);
        assert.deepEqual(res.json(), { error: 'UNAUTHORIZED', message }, `${r.method} ${r.url} ${what}`);
      }
    }
  });

  test('every route with each role follows the permission table (403 insufficient permissions otherwise)', async () => {
    for (const role of ROLES) {
      const token = await rig.login(role);
      for (const r of ROUTES) {
        const res = await call(r, token);
        if (r.permission === 'public' || allowed(role, r.permission)) {
          assert.ok(
            ![401, 403].includes(res.statusCode),
            `${role} ${r.method} ${r.url}: ${res.statusCode} ${res.body}`,
          );
        } else {
          assert.equal(res.statusCode, 403, `${role} ${r.method} ${r.url}: ${res.body}`);
          assert.deepEqual(res.json(), { error: 'FORBIDDEN', message: 'insufficient permissions' });
        }
      }
    }
    // The table itself: read for all, operate for operator and admin, config for admin only.
    assert.deepEqual(
      ROLES.map((r) => [r, allowed(r, 'read'), allowed(r, 'operate'), allowed(r, 'config')]),
      [
        ['admin', true, true, true],
        ['operator', true, true, false],
        ['viewer', true, false, false],
      ],
    );
  });

  test('a token whose role was changed by the holder is refused (signature), and a forged role with the right secret but another user role too', async () => {
    const now = Math.floor(Date.now() / 1000);
    const viewer = await rig.login('viewer');
    const [h, p, s] = viewer.split('.');
    const claims = JSON.parse(Buffer.from(p ?? '', 'base64url').toString()) as Record<string, unknown>;
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims, role: 'admin' })).toString('base64url')}.${s}`;
    const res = await rig.service.app.inject({
      url: '/api/config',
      headers: { authorization: `Bearer ${tampered}` },
    });
    assert.equal(res.statusCode, 401);
    // Signed with the right key but claiming a role the user does not have: refused as invalid.
    const wrongRole = await sign({ username: 'viewer', role: 'admin' }, now + 600);
    const r2 = await rig.service.app.inject({
      url: '/api/config',
      headers: { authorization: `Bearer ${wrongRole}` },
    });
    assert.equal(r2.statusCode, 401);
    const unknownUser = await sign({ username: 'mallory', role: 'admin' }, now + 600);
    const r3 = await rig.service.app.inject({
      url: '/api/status',
      headers: { authorization: `Bearer ${unknownUser}` },
    });
    assert.equal(r3.statusCode, 401);
  });

  test('login: token with claims and expiry; bad body 400; wrong password and unknown user 401 alike', async () => {
    const ok = await rig.service.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { username: 'operator', password: 'operator-pass-2' },
    });
    assert.equal(ok.statusCode, 200, ok.body);
    const body = ok.json<{ token: string; expires_in: number; user: { username: string; role: string } }>();
    assert.deepEqual(body.user, { username: 'operator', role: 'operator' });
    assert.ok(body.expires_in > 23 * 3600 && body.expires_in <= 24 * 3600, String(body.expires_in));
    const claims = JSON.parse(Buffer.from(body.token.split('.')[1] ?? '', 'base64url').toString()) as Record<
      string,
      unknown
    >;
    assert.equal(claims['iss'], 'timesvc');
    assert.equal(claims['sub'], 'operator');
    assert.equal(claims['role'], 'operator');
    assert.ok(typeof claims['exp'] === 'number' && typeof claims['iat'] === 'number');
    assert.equal(
      JSON.parse(Buffer.from(body.token.split('.')[0] ?? '', 'base64url').toString()).alg,
      'HS256',
    );
    for (const payload of [{}, { username: 'x' }, { username: 'x', password: 'y', extra: 1 }]) {
      const res = await rig.service.app.inject({
        method: 'POST',
        url: '/api/auth/login',
        payload: payload as object,
      });
      assert.equal(res.statusCode, 400, JSON.stringify(payload));
      assert.equal(res.json<{ error: string }>().error, 'INVALID_REQUEST');
    }
    const text = await rig.service.app.inject({ method: 'POST', url: '/api/auth/login', payload: 'text' });
    assert.equal(text.statusCode, 415);
    assert.equal(
      typeof text.json<{ error: string; message: string }>().message,
      'string',
      'the one error shape',
    );
    const big = await rig.service.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { username: 'admin', password: 'x'.repeat(5000) },
    });
    assert.equal(big.statusCode, 413, 'login bodies are capped at 4 KiB');
    const wrong = await rig.service.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      remoteAddress: '192.0.2.50',
      payload: { username: 'admin', password: 'nope' },
    });
    const unknown = await rig.service.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      remoteAddress: '192.0.2.51',
      payload: { username: 'nobody', password: 'nope' },
    });
    assert.equal(wrong.statusCode, 401);
    assert.deepEqual(
      wrong.json(),
      unknown.json(),
      'the same answer for a wrong password and an unknown user',
    );
    assert.deepEqual(wrong.json(), { error: 'UNAUTHORIZED', message: 'invalid credentials' });
    const logged = rig.logs.query({ level: 'warning' }).filter((e) => e.message === 'login failed');
    assert.ok(
      logged.some((e) => e.fields?.['ip'] === '192.0.2.50'),
      'failed logins are logged with the address',
    );
    assert.ok(!JSON.stringify(rig.logs.query()).includes('operator-pass-2'), 'no password in the logs');
    assert.ok(!JSON.stringify(rig.logs.query()).includes(JWT_SECRET), 'no JWT secret in the logs');
  });

  test('repeated failed logins from one address are slowed down (429 + Retry-After), others unaffected', async () => {
    const attempt = (ip: string, password: string) =>
      rig.service.app.inject({
        method: 'POST',
        url: '/api/auth/login',
        remoteAddress: ip,
        payload: { username: 'viewer', password },
      });
    for (let i = 0; i < 5; i++) assert.equal((await attempt('198.51.100.7', 'bad')).statusCode, 401);
    const blocked = await attempt('198.51.100.7', 'viewer-pass-3');
    assert.equal(blocked.statusCode, 429, 'even the right password waits');
    assert.ok(Number(blocked.headers['retry-after']) >= 1);
    assert.equal((await attempt('198.51.100.8', 'viewer-pass-3')).statusCode, 200, 'another address logs in');
    // The throttle itself, on an injected clock: exponential, bounded, forgiven after the window.
    let now = 0;
    const t = new LoginThrottle(
      { freeFailures: 2, windowMs: 60_000, maxDelayMs: 8000, maxEntries: 3 },
      () => now,
    );
    t.fail('a');
    assert.equal(t.waitMs('a'), 0);
    t.fail('a');
    assert.equal(t.waitMs('a'), 1000);
    t.fail('a');
    assert.equal(t.waitMs('a'), 2000);
    for (let i = 0; i < 10; i++) t.fail('a');
    assert.equal(t.waitMs('a'), 8000);
    now = 61_000;
    assert.equal(t.waitMs('a'), 0);
    for (const ip of ['b', 'c', 'd', 'e']) t.fail(ip);
    t.fail('b');
    assert.equal(
      t.waitMs('b'),
      0,
      'the oldest address was evicted (its count restarted): memory stays bounded',
    );
  });
});
