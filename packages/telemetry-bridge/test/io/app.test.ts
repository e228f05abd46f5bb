/** app.ts: the bridge as core's `Service` (docs/ARCHITECTURE.md "One skeleton"), on 127.0.0.1:0. */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { Shutdown, silentLogger, systemClock, type ServiceContext } from '@broadcast-ops/core';
import { ManualClock, statusOf, waitFor } from '@broadcast-ops/core/testing';
import { bridgeApp, createBridge } from '../../src/app.ts';
import type { BridgeConfig } from '../../src/config.ts';
import { FakeAdapter, testConfig } from '../helpers.ts';

/** Resolves true when something accepts a TCP connection on the URL's port. */
function accepts(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

test('createBridge: nothing runs before start; start opens the three listeners with the injected clock; close twice is safe', async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const service = createBridge({
    config: testConfig(),
    logger: silentLogger(),
    clock,
    adapters: [new FakeAdapter()],
  });
  assert.equal(service.running, undefined);
  assert.deepEqual(service.describe(), {});
  assert.equal(service.health().status, 'unhealthy');
  await service.start();
  try {
    const d = service.describe();
    assert.match(String(d['clients']), /^ws:\/\/127\.0\.0\.1:\d+\/$/);
    assert.match(String(d['console']), /^http:\/\/127\.0\.0\.1:\d+\/$/);
    assert.match(String(d['metrics']), /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.equal(typeof d['epoch'], 'string');
    const health = service.health();
    assert.equal(health.status, 'healthy');
    const deps = health['dependencies'] as { name: string; lastCheck: number }[];
    assert.ok(deps.some((x) => x.name === 'client_transport'));
    assert.ok(
      deps.every((x) => x.lastCheck === 1_700_000_000_000),
      'checks read the injected clock',
    );
    const res = await fetch(`${String(d['health'])}/health`);
    assert.equal(((await res.json()) as { timestamp: number }).timestamp, 1_700_000_000_000);
    // The three listeners share one Host guard (core's, 421).
    for (const url of [String(d['console']), String(d['metrics']), `${String(d['health'])}/health`]) {
      assert.equal(await statusOf(url, { host: 'evil.example' }), 421, url);
      assert.equal(await statusOf(url, { host: '127.0.0.1' }), 200, url);
    }
    await service.close();
    assert.equal(await accepts(String(d['console'])), false);
    assert.equal(await accepts(String(d['health'])), false);
  } finally {
    await service.close();
  }
});

test('bridgeApp with --companion-sim and no Companion configured: the bridge connects to a simulator it started, and close stops both', async () => {
  const logger = silentLogger();
  const config: BridgeConfig = testConfig();
  assert.equal(config.companion.enabled, false);
  const ctx: ServiceContext<BridgeConfig> = {
    config,
    configFile: undefined,
    logger,
    clock: systemClock,
    env: {},
    values: { 'companion-sim': true },
    shutdown: new Shutdown({ logger, signals: [] }),
  };
  const service = bridgeApp(ctx);
  await service.start();
  try {
    const companion = await waitFor(
      () => {
        const deps = service.health()['dependencies'] as { name: string; status: string }[] | undefined;
        return deps?.find((x) => x.name === 'companion.satellite' && x.status === 'healthy');
      },
      { timeoutMs: 10_000, what: 'the Companion adapter connected to the simulator' },
    );
    assert.ok(companion);
  } finally {
    await service.close();
  }
  assert.equal(service.health().status, 'unhealthy');
  // Without the flag the configuration is used as it is: no Companion adapter.
  const plain = bridgeApp({ ...ctx, values: {} });
  await plain.start();
  try {
    const deps = plain.health()['dependencies'] as { name: string }[];
    assert.equal(
      deps.some((x) => x.name.startsWith('companion')),
      false,
    );
  } finally {
    await plain.close();
  }
});
