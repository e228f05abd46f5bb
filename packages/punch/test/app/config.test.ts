import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConfigError } from '@broadcast-ops/core';
import { repoRoot } from '@broadcast-ops/core/testing';
import { loadPunchConfig, punchConfigSchema, warnsPlainHttp } from '../../src/config.ts';
import { relayPublicAddress } from '../../src/io/relay/relay-port.ts';

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
    adminPerMinute: 60,
    pagePerMinute: 60,
    wsConnectPerMinute: 20,
    wsMessagesPerSecond: 100,
    rateLimitKeys: 100_000,
    ipv6PrefixBits: 64,
    maxStreams: 16,
    maxSessions: 100_000,
    defaultTtl: 1800,
    maxTtl: 86_400,
    defaultLatency: 200,
    bodyLimit: 16_384,
    tombstoneTtl: 600,
    maxTombstones: 10_000,
  });
  assert.equal(c.db, 'data/punch/punch.db');
  assert.equal(c.trustProxy, false);
  assert.deepEqual(c.tls, {});
});

test('environment variables override, with the documented names', () => {
  const c = loadPunchConfig({
    environment: {
      PUNCH_SECRET: '12345678901234567890123456789012345', // digits stay a string
      PUNCH_PORT: '9999',
      PUNCH_HOST: '::1',
      PUNCH_BASE_URL: 'https://punch.example.com',
      PUNCH_DB: '/tmp/x.db',
      PUNCH_TRUST_PROXY: '10.0.0.0/8, 2001:db8::/32',
      PUNCH_TLS_CERT: '/etc/punch/cert.pem',
      PUNCH_TLS_KEY: '/etc/punch/key.pem',
      PUNCH_RATE_LIMITING: 'off',
      PUNCH_RATE_LIMIT: '3',
      PUNCH_RATE_LIMIT_GET: '30',
      PUNCH_RATE_LIMIT_ADMIN: '20',
      PUNCH_RATE_LIMIT_PAGES: '40',
      PUNCH_IPV6_PREFIX: '56',
      PUNCH_MAX_TOMBSTONES: '500',
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
  assert.equal(c.trustProxy, '10.0.0.0/8, 2001:db8::/32');
  assert.deepEqual(c.tls, { cert: '/etc/punch/cert.pem', key: '/etc/punch/key.pem' });
  assert.equal(c.limits.rateLimits, false);
  assert.equal(c.limits.createPerMinute, 3);
  assert.equal(c.limits.getPerMinute, 30);
  assert.equal(c.limits.adminPerMinute, 20);
  assert.equal(c.limits.pagePerMinute, 40);
  assert.equal(c.limits.ipv6PrefixBits, 56);
  assert.equal(c.limits.maxTombstones, 500);
  assert.equal(c.limits.maxStreams, 4);
  assert.equal(c.limits.defaultTtl, 60);
  assert.equal(c.turnstile.secret, 'ts');
});

test('inconsistent settings are refused: max TTL below the default, half a TLS pair, a bad proxy network', () => {
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_MAX_TTL: '60', PUNCH_DEFAULT_TTL: '1800' } }),
    /maxTtl \(PUNCH_MAX_TTL\) must be at least defaultTtl/,
  );
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_TLS_CERT: '/c.pem' } }),
    /PUNCH_TLS_CERT and PUNCH_TLS_KEY must be set together/,
  );
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_TRUST_PROXY: '10.0.0.0/33' } }),
    /trustProxy: bad prefix in "10.0.0.0\/33"/,
  );
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_TRUST_PROXY: 'proxy.lan' } }),
    /neither a hop count/,
  );
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

test('relay: defaults, the environment names, port range and allow list parsed; bad values named', () => {
  const d = loadPunchConfig({ environment: {} });
  assert.deepEqual(d.relay, {
    enabled: true,
    host: '0.0.0.0',
    ports: '0-0',
    fallbackAfterMs: 8_000,
    allow: [],
    maxAllocations: 100,
    bytesPerSecond: 2_500_000,
    lifetimeMs: 21_600_000,
    http: { host: '127.0.0.1' },
  });
  const c = loadPunchConfig({
    environment: {
      PUNCH_RELAY: 'off',
      PUNCH_RELAY_PUBLIC_ADDRESS: '203.0.113.9',
      PUNCH_RELAY_PORTS: '40000-40999',
      PUNCH_RELAY_AFTER_MS: '5000',
      PUNCH_RELAY_ALLOW: '10.0.0.0/8, 192.168.1.0/24',
      PUNCH_RELAY_HTTP_HOST: '0.0.0.0',
      PUNCH_RELAY_HTTP_PORT: '9796',
    },
  });
  assert.deepEqual(c.relay.http, { host: '0.0.0.0', port: 9796 });
  assert.equal(c.relay.enabled, false);
  assert.equal(c.relay.publicAddress, '203.0.113.9');
  assert.equal(c.relay.ports, '40000-40999');
  assert.equal(c.relay.fallbackAfterMs, 5_000);
  assert.deepEqual(c.relay.allow, ['10.0.0.0/8', '192.168.1.0/24']);
  assert.throws(() => loadPunchConfig({ environment: { PUNCH_RELAY_PORTS: '41000-40000' } }), /relay\.ports/);
  assert.throws(() => loadPunchConfig({ environment: { PUNCH_RELAY_PORTS: '80-90' } }), /relay\.ports/);
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_RELAY_AFTER_MS: '500' } }),
    /relay\.fallbackAfterMs/,
  );
  assert.throws(() => loadPunchConfig({ environment: { PUNCH_RELAY_ALLOW: '10.0.0.0/8, nope' } }), /"nope"/);
  assert.throws(
    () => loadPunchConfig({ environment: { PUNCH_RELAY_HTTP_PORT: '70000' } }),
    /relay\.http\.port/,
  );
  // The address the peers are told: configured, else the base URL's host unless it is loopback.
  assert.equal(relayPublicAddress(c.relay, 'http://localhost:8787'), '203.0.113.9');
  assert.equal(relayPublicAddress(d.relay, 'https://punch.example.com'), 'punch.example.com');
  assert.equal(relayPublicAddress(d.relay, 'http://[2001:db8::1]:8787'), '2001:db8::1');
  for (const local of ['http://localhost:8787', 'http://127.0.0.1:8787', 'http://[::1]:8787']) {
    assert.equal(relayPublicAddress(d.relay, local), undefined, local);
  }
});

test('alarm webhook config: strict, and no secret in the URL', () => {
  const parse = (webhook: Record<string, unknown>) => punchConfigSchema.safeParse({ alarms: { webhook } });
  assert.equal(parse({ url: 'https://hooks.example.com/punch' }).success, true);
  const d = punchConfigSchema.parse({});
  assert.deepEqual(d.alarms.webhook, { retries: 3, timeoutMs: 5000 });
  for (const [webhook, why] of [
    [{ url: 'https://user:pw@hooks.example.com/x' }, /user or password/],
    [{ url: 'https://hooks.example.com/x?token=abc' }, /query string/],
    [{ url: 'ftp://hooks.example.com/x' }, /http/],
    [{ url: 'https://h.example.com/x', retries: 50 }, /retries|50|5/],
    [{ url: 'https://h.example.com/x', secret: 'short' }, /16 characters/],
    [{ url: 'https://h.example.com/x', extra: 1 }, /extra|Unrecognized/i],
  ] as const) {
    const p = parse(webhook);
    assert.equal(p.success, false, JSON.stringify(webhook));
    assert.match(JSON.stringify(p.error?.issues), why);
  }
});

test('the plain-HTTP warning: every host but loopback without TLS; never with TLS', () => {
  for (const host of ['0.0.0.0', '::', '198.51.100.7', '2001:db8::1', 'punch.example.com']) {
    assert.equal(warnsPlainHttp(host, false), true, host);
    assert.equal(warnsPlainHttp(host, true), false, `${host} with TLS`);
  }
  for (const host of ['127.0.0.1', '127.0.0.2', 'localhost', '::1']) {
    assert.equal(warnsPlainHttp(host, false), false, host);
  }
});
