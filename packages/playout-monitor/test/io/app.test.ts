/** app.ts: the playout monitor as core's `Service` (docs/ARCHITECTURE.md "One skeleton"), on 127.0.0.1:0. */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConfigError, Shutdown, silentLogger, type ServiceContext } from '@broadcast-ops/core';
import { ManualClock, statusOf, tempDir } from '@broadcast-ops/core/testing';
import { loadPlayoutSetup, playoutApp, type PlayoutSetup } from '../../src/app.ts';
import { makeConfig } from '../helpers.ts';

test('playoutApp: nothing listens before start; one HTTP app with the Host guard and the injected clock; close twice is safe', async () => {
  const logger = silentLogger();
  const clock = new ManualClock(1_700_000_000_000);
  const ctx: ServiceContext<PlayoutSetup> = {
    config: {
      // A deck nobody answers for: the monitor starts and shows it offline.
      config: makeConfig([{ id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port: 1 }], {
        emberPlusPort: 0,
      }),
      admin: { token: undefined, source: 'disabled' },
    },
    configFile: undefined,
    logger,
    clock,
    env: {},
    values: {},
    shutdown: new Shutdown({ logger, signals: [] }),
  };
  const service = playoutApp(ctx);
  assert.deepEqual(service.describe(), {});
  await service.start();
  try {
    const d = service.describe();
    const url = String(d['url']);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
    assert.equal(d['adminToken'], 'off (PLAYOUT_MONITOR_AUTH=off)');
    assert.equal(String(d['websocket']), `${url.replace(/^http/, 'ws')}ws`);
    const res = await fetch(`${url}health`);
    const body = (await res.json()) as { timestamp: number };
    assert.equal(body.timestamp, 1_700_000_000_000, '/health reads the clock app.ts was given');
    assert.equal(service.health()['timestamp'], 1_700_000_000_000);
    for (const path of ['health', 'metrics', 'api/devices', 'dashboard.html']) {
      assert.equal(await statusOf(url + path, { host: 'evil.example' }), 421, path);
      assert.equal(await statusOf(url + path, { host: '127.0.0.1' }), 200, path);
    }
    await service.close();
    await assert.rejects(fetch(`${url}health`));
  } finally {
    await service.close();
  }
});

test('loadPlayoutSetup: an admin token that cannot be kept is a configuration error (exit 2), like a bad file', () => {
  const dir = tempDir('playout-app-');
  try {
    const file = join(dir.path, 'monitor.json');
    writeFileSync(
      file,
      JSON.stringify({
        settings: { webSocketPort: 0 },
        servers: [{ id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1' }],
      }),
    );
    // The data directory is a regular file: the generated token cannot be saved.
    const blocker = join(dir.path, 'not-a-dir');
    writeFileSync(blocker, 'x');
    assert.throws(
      () => loadPlayoutSetup(file, { PLAYOUT_MONITOR_DATA_DIR: blocker }),
      (err: unknown) => err instanceof ConfigError && /^cannot keep the admin token: /.test(err.message),
    );
    const ok = loadPlayoutSetup(file, { PLAYOUT_MONITOR_ADMIN_TOKEN: 'sekrit-token-value' });
    assert.equal(ok.admin.source, 'environment');
    assert.equal(ok.config.settings.webSocketPort, 0);
    assert.throws(() => loadPlayoutSetup(undefined, {}), ConfigError);
  } finally {
    dir.remove();
  }
});
