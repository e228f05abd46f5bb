/**
 * The status service as app.ts builds it (docs/ARCHITECTURE.md "One skeleton"), on a `ManualClock` and never
 * started (fastify `inject`, no socket): /health's uptime follows the context's clock and `health()` is what
 * /health answers. Listening, `describe()`'s URL and `close` twice: test/io/app.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, serviceContext } from '@broadcast-ops/core';
import { createStatusService } from '../../src/app.ts';
import { appTestConfig } from '../app-config.ts';

test('app.ts: the service runs on the context clock; health() is /health', async () => {
  const clock = new ManualClock();
  const config = appTestConfig();
  const service = createStatusService(serviceContext(config, { clock }));
  try {
    clock.advance(5_000);
    const body = (await service.app.inject({ url: '/health' })).json<Record<string, unknown>>();
    assert.equal(body['uptime'], 5);
    assert.equal(body['status'], 'ok');
    assert.equal(typeof body['version'], 'string');
    const { version: _version, ...rest } = body;
    assert.deepEqual(rest, service.health());
  } finally {
    await service.close();
  }
});
