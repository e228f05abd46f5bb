// The login's real scrypt cost (OWASP parameters): a flood from one address, and the password hashes; the
// Host and Origin checks in front of a config file. The route-by-role matrix, login and throttle run on the
// app without a socket: test/app/web-auth.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Authenticator } from '../../src/io/web/auth.ts';
import { hashPassword, parsePasswordHash, verifyPassword } from '../../src/io/web/passwords.ts';
import { JWT_SECRET, startWebRig, testUsers } from '../helpers/web.ts';

test(
  'a login flood of 20 at once from one address (OWASP scrypt) does not keep an operator at another address out',
  { timeout: 120_000 },
  async () => {
    // The real parameters (N = 2^17, 128 MiB): a verification that takes long enough to be flooded.
    const flood = await startWebRig({
      web: {
        users: [
          { username: 'operator', password_hash: await hashPassword('flood-pass-1'), role: 'operator' },
        ],
      },
    });
    try {
      const login = (ip: string, password: string) =>
        flood.service.app.inject({
          method: 'POST',
          url: '/api/auth/login',
          remoteAddress: ip,
          payload: { username: 'operator', password },
        });
      const started = performance.now();
      const attackers = Array.from({ length: 20 }, (_, i) => login('203.0.113.9', `guess-${i}`));
      const operator = login('198.51.100.20', 'flood-pass-1').then((r) => ({
        r,
        ms: performance.now() - started,
      }));
      const [{ r, ms }, floodReplies] = await Promise.all([operator, Promise.all(attackers)]);
      assert.equal(r.statusCode, 200, r.body);
      assert.ok(ms < 10_000, `the operator logged in after ${ms.toFixed(0)} ms`);
      const codes = floodReplies.map((x) => x.statusCode).sort();
      assert.equal(
        codes.filter((c) => c === 401).length,
        1,
        `one verification for the flooding address: ${codes.join(',')}`,
      );
      assert.equal(codes.filter((c) => c === 429).length, 19, 'the others: login busy');
      // Identical requests in flight share one verification: five at once from one address all succeed
      // although that address has a single slot.
      const same = await Promise.all(Array.from({ length: 5 }, () => login('198.51.100.21', 'flood-pass-1')));
      assert.deepEqual(
        same.map((x) => x.statusCode),
        [200, 200, 200, 200, 200],
      );
    } finally {
      await flood.close();
    }
  },
);

test('every request checks the Host header (DNS rebinding), state changes the Origin too, even for an admin', async () => {
  // A config file behind the rig: past the Host and Origin checks, the peer body is validated.
  const rig = await startWebRig();
  try {
    const token = await rig.login('admin');
    const put = (host: string, origin?: string) =>
      rig.service.app.inject({
        method: 'POST',
        url: '/api/config/ntp/peers',
        headers: { authorization: `Bearer ${token}`, host, ...(origin ? { origin } : {}) },
        payload: { address: 'bad host' },
      });
    const evil = await put('evil.example:8080');
    assert.equal(evil.statusCode, 421);
    assert.equal(evil.json<{ error: string }>().error, 'HOST_NOT_ALLOWED');
    const crossOrigin = await put('127.0.0.1:8080', 'http://evil.example');
    assert.equal(crossOrigin.statusCode, 403);
    assert.equal(crossOrigin.json<{ error: string }>().error, 'FORBIDDEN');
    const ok = await put('127.0.0.1:8080', 'http://127.0.0.1:8080');
    assert.equal(ok.statusCode, 400, 'past the Host check, the body is validated');
    const read = await rig.service.app.inject({
      url: '/api/status',
      headers: { authorization: `Bearer ${token}`, host: 'evil.example' },
    });
    assert.equal(read.statusCode, 421, 'a read by a foreign name is refused too');
    assert.equal(read.json<{ error: string }>().error, 'HOST_NOT_ALLOWED');
  } finally {
    await rig.close();
  }
});

test('passwords: scrypt with the OWASP parameters by default, constant-time verify, weak or foreign hashes refused', async () => {
  const h = await hashPassword('correct horse');
  const p = parsePasswordHash(h);
  assert.equal(p?.log2N, 17);
  assert.equal(p?.r, 8);
  assert.equal(p?.p, 1);
  assert.ok(await verifyPassword('correct horse', h));
  assert.ok(!(await verifyPassword('correct horsE', h)));
  assert.notEqual(await hashPassword('correct horse'), h, 'salted');
  assert.equal(
    parsePasswordHash('scrypt$10$8$1$AAAAAAAAAAAAAAAAAAAAAA==$' + 'A'.repeat(44)),
    undefined,
    'N below 2^14',
  );
  assert.equal(parsePasswordHash('$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZRGdjGj/n3.AEwkWUJhX2pUVzWUHu'), undefined);
  assert.ok(!(await verifyPassword('x', 'garbage')));
  // An Authenticator with no such user still runs scrypt (timing) and answers undefined.
  const a = new Authenticator({ secret: JWT_SECRET, users: (await testUsers()) as never, expiryS: 60 });
  assert.equal(await a.check('nobody', 'x'), undefined);
  assert.equal((await a.check('viewer', 'viewer-pass-3'))?.role, 'viewer');
});
