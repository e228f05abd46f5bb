import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConfigError } from '@broadcast-ops/core';
import { repoRoot } from '@broadcast-ops/core/testing';
import { loadPunchConfig } from '../src/config.ts';

test('the committed example config parses and equals the embedded defaults where it should', () => {
  const c = loadPunchConfig({ file: join(repoRoot, 'config/punch.yaml'), environment: {} });
  const d = loadPunchConfig({ environment: { PUNCH_SECRET: 'x'.repeat(32) } });
  assert.equal(c.port, 8787);
  assert.equal(c.host, '127.0.0.1');
  assert.deepEqual(c.limits, d.limits);
  assert.deepEqual(c.limits, {
    rateLimits: true,
    createPerMinute: 10,
    getPerMinute: 60,
    wsConnectPerMinute: 20,
    wsMessagesPerSecond: 100,
    rateLimitKeys: 100_000,
    maxStreams: 16,
    maxSessions: 100_000,
    defaultTtl: 1800,
    maxTtl: 86_400,
    defaultLatency: 200,
    bodyLimit: 16_384,
    tombstoneTtl: 600,
  });
  assert.equal(c.db, 'data/punch/punch.db');
  assert.equal(c.trustProxy, false);
});

test('environment variables override, with the documented names', () => {
  const c = loadPunchConfig({
    environment: {
      PUNCH_SECRET: '12345678901234567890123456789012345', // digits stay a string
      PUNCH_PORT: '9999',
      PUNCH_HOST: '::1',
      PUNCH_BASE_URL: 'https://punch.example.com',
      PUNCH_DB: '/tmp/x.db',
      PUNCH_TRUST_PROXY: 'on',
      PUNCH_RATE_LIMITS: 'off',
      PUNCH_RATE_LIMIT: '3',
      PUNCH_MAX_STREAMS: '4',
      PUNCH_DEFAULT_TTL: '60',
      TURNSTILE_SECRET: 'ts',
    },
  });
  assert.equal(c.secret, '12345678901234567890123456789012345');
  assert.equal(c.port, 9999);
  assert.equal(c.host, '::1');
  assert.equal(c.baseUrl, 'https://punch.example.com');
  assert.equal(c.db, '/tmp/x.db');
  assert.equal(c.trustProxy, true);
  assert.equal(c.limits.rateLimits, false);
  assert.equal(c.limits.createPerMinute, 3);
  assert.equal(c.limits.maxStreams, 4);
  assert.equal(c.limits.defaultTtl, 60);
  assert.equal(c.turnstile.secret, 'ts');
});

test('errors name the key: short secret, bad port, unknown key', () => {
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_SECRET: 'short' } }),
    (e) => e instanceof ConfigError && /secret: must be at least 32/.test(e.message),
  );
  assert.throws(() => loadPunchConfig({ environment: { PUNCH_PORT: '70000' } }), /PUNCH_PORT.*port/s);
  assert.throws(
    () =>
      loadPunchConfig({
        file: join(repoRoot, 'packages/punch/test/fixtures/unknown-key.yaml'),
        environment: {},
      }),
    /unknown-key\.yaml: unknown key "limits\.maxStreem"/,
  );
});
