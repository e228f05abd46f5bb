/**
 * The status service as app.ts builds it (docs/ARCHITECTURE.md "One skeleton"), listening on 127.0.0.1:0 with
 * a `ManualClock`: `describe()` names the listening URL and the services, and `close` is safe twice. /health on
 * the context's clock: test/app/app.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, serviceContext } from '@broadcast-ops/core';
import { createStatusService } from '../../src/app.ts';
import { appTestConfig } from '../app-config.ts';

test('app.ts: describe() names the URL main.ts logs; close is safe twice', async () => {
  const clock = new ManualClock();
  const config = appTestConfig();
  const service = createStatusService(serviceContext(config, { clock }));
  try {
    await service.start();
    const url = service.describe()['url'];
    assert.match(String(url), /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.deepEqual(service.describe()['services'], ['punch']);
    const body = (await (await fetch(`${String(url)}/health`)).json()) as Record<string, unknown>;
    assert.equal(body['status'], 'ok');
  } finally {
    await service.close();
    await service.close();
  }
});
