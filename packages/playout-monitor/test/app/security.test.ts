/**
 * The control API only for its operator, asked through fastify `inject` on a service built on a ManualClock and
 * never started: a foreign Host header (DNS rebinding) is refused on every route, and the allow-list's rule.
 * The WebSocket upgrade and the token on a running service: test/io/outputs-security.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostAllowed } from '@broadcast-ops/core';
import { allowedHostNames } from '../../src/io/access.ts';
import type { PlayoutService } from '../../src/playout-service.ts';
import { MUTATIONS, unstartedService } from '../pure-helpers.ts';

const TOKEN = 'operator-token-0123456789abcdef';

// Built and closed by the test that uses it, not by a top-level `after`: the quick tier runs many files in one
// process (scripts/run-tests.ts quickShards), where top-level hooks belong to the shared root.
async function call(
  service: PlayoutService,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; body: string }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  const res = await service.app.inject({
    method: method as 'GET',
    url: path,
    headers: { ...(data ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(data ? { payload: data } : {}),
  });
  return { status: res.statusCode, body: res.body };
}

test('a foreign Host header is refused with 421 on every route, token or not', async (t) => {
  const service = unstartedService(TOKEN);
  t.after(() => service.close());
  for (const host of ['evil.example', 'evil.example:3050', 'attacker.test.', 'rebind.evil.example:80']) {
    for (const [method, path, body] of [
      ...MUTATIONS,
      ['GET', '/health', undefined] as const,
      ['GET', '/api/config', undefined] as const,
    ]) {
      const r = await call(service, method, path, { host, authorization: `Bearer ${TOKEN}` }, body);
      assert.equal(r.status, 421, `${method} ${path} with Host ${host}: ${r.body}`);
      const err = JSON.parse(r.body) as { error: string; message: string };
      assert.equal(err.error, 'HOST_NOT_ALLOWED');
      assert.equal(typeof err.message, 'string');
    }
  }
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
