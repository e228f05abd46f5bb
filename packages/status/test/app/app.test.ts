/**
 * The status service as app.ts builds it (docs/ARCHITECTURE.md "One skeleton"), on 127.0.0.1:0 with a
 * `ManualClock`: /health's uptime follows the context's clock, `health()` is what /health answers, `describe()`
 * names the listening URL, and `close` is safe twice.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, serviceContext } from '@broadcast-ops/core';
import { createStatusService } from '../../src/app.ts';
import { statusConfigSchema } from '../../src/config.ts';

test('app.ts: the service runs on the context clock; health() is /health; describe() names the URL', async () => {
  const clock = new ManualClock();
  const config = statusConfigSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    pollIntervalMs: 60_000,
    timeoutMs: 500,
    // Port 9 (discard) on loopback: nothing answers, so the one poll ends quickly as "no answer".
    services: [{ name: 'punch', kind: 'punch', health: 'http://127.0.0.1:9/health' }],
  });
  const service = createStatusService(serviceContext(config, { clock }));
  try {
    await service.start();
    const url = service.describe()['url'];
    assert.match(String(url), /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.deepEqual(service.describe()['services'], ['punch']);
    clock.advance(5_000);
    const body = (await (await fetch(`${String(url)}/health`)).json()) as Record<string, unknown>;
    assert.equal(body['uptime'], 5);
    assert.equal(body['status'], 'ok');
    assert.equal(typeof body['version'], 'string');
    const { version: _version, ...rest } = body;
    assert.deepEqual(rest, service.health());
  } finally {
    await service.close();
    await service.close();
  }
});
