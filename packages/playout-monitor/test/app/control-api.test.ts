/**
 * The control API's answers that need no device and no file (docs/ARCHITECTURE.md "Tests mirror the layers"):
 * the service built on a ManualClock and never started, asked through fastify `inject`. The changes that
 * save the configuration and reach a device are in test/io/outputs-control-api.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { PlayoutService } from '../../src/playout-service.ts';
import { apiHeaders, deckEntry, makeConfig, unstartedService } from '../pure-helpers.ts';

const TOKEN = 'test-admin-token-0123456789';

// One service for the suite, closed by the suite's own hook once its tests are done. A top-level after()
// belongs to the whole process, which the quick tier shares between test files (scripts/run-tests.ts
// quickShards): there it ran while a test of this file was still waiting on an inject.
describe('one unstarted service', () => {
  const service = unstartedService(TOKEN);
  after(() => service.close());

  async function call(
    method: 'GET' | 'POST' | 'PUT',
    path: string,
    body?: unknown,
    token: string | null = TOKEN,
  ): Promise<{ status: number; json: Record<string, unknown> | undefined }> {
    const res = await service.app.inject({
      method,
      url: path,
      headers: apiHeaders(body, token),
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    return {
      status: res.statusCode,
      json: res.body ? (JSON.parse(res.body) as Record<string, unknown>) : undefined,
    };
  }

  test('mutating endpoints need the admin token; reads do not', async () => {
    assert.equal((await call('GET', '/api/config', undefined, null)).status, 200);
    for (const token of [null, 'wrong', TOKEN.slice(0, -1)]) {
      const r = await call('POST', '/api/devices/1/simulate', { state: 'play' }, token);
      assert.equal(r.status, 401, String(token));
      assert.equal(r.json?.['error'], 'UNAUTHORIZED');
    }
    assert.equal(service.view.get(1)?.simulated, undefined, 'nothing happened');
    assert.equal((await call('PUT', '/api/config', service.config, null)).status, 401);
  });

  test('a thirteenth device is refused', async () => {
    const cfg = service.config;
    const servers = Array.from({ length: 12 }, (_, i) => deckEntry(i + 1, 1));
    const r = await call('PUT', '/api/config', { ...cfg, servers: [...servers, deckEntry(13, 1)] });
    assert.equal(r.status, 400);
    assert.match(String(r.json?.['message']), /servers/);
  });
});

test('without a configuration file the control API refuses changes instead of pretending', async () => {
  const service = new PlayoutService({
    config: makeConfig([deckEntry(1, 1)], { emberPlusPort: 0 }),
    logger: silentLogger(),
  });
  const res = await service.app.inject({
    method: 'PUT',
    url: '/api/settings',
    payload: { updateIntervalMs: 50 },
  });
  assert.equal(res.statusCode, 409);
  assert.equal(service.config.settings.updateIntervalMs, 100);
  await service.close();
});
