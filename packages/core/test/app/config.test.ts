import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as z from '../../src/zod.ts';
import { ConfigError, loadConfig, substituteEnv } from '../../src/config.ts';

const fixture = join(fileURLToPath(new URL('../', import.meta.url)), 'fixtures', 'example.yaml');

const schema = z.strictObject({
  server: z.strictObject({
    port: z.int().check(z.minimum(1), z.maximum(65535)),
    host: z._default(z.string(), '0.0.0.0'),
  }),
  secret: z.string().check(z.minLength(8)),
  peers: z._default(
    z.array(z.strictObject({ address: z.string(), prefer: z._default(z.boolean(), false) })),
    [],
  ),
  debug: z._default(z.boolean(), false),
});

test('a valid example config parses, with defaults and ${NAME:-default} substitution', () => {
  const cfg = loadConfig({ schema, file: fixture, environment: {}, substitute: true });
  assert.equal(cfg.server.port, 8080);
  assert.equal(cfg.server.host, '127.0.0.1');
  assert.equal(cfg.secret, 'change-me-please');
  assert.deepEqual(cfg.peers, [{ address: '127.0.0.1:123', prefer: true }]);
  assert.equal(cfg.debug, false);
});

test('${NAME} takes the environment value when set', () => {
  const cfg = loadConfig({
    schema,
    file: fixture,
    environment: { TEST_SECRET: 'from-environment' },
    substitute: true,
  });
  assert.equal(cfg.secret, 'from-environment');
});

test('${NAME} without default and unset is an error naming the variable', () => {
  assert.throws(() => substituteEnv({ a: '${NOPE_NOT_SET}' }, {}), /NOPE_NOT_SET/);
});

test('an unknown key is rejected with a message naming the key and the file', () => {
  const data = { server: { port: 1, colour: 'red' }, secret: 'abcdefghij', tpyo: 1 };
  assert.throws(
    () => loadConfig({ schema, data, file: '/etc/x.yaml', environment: {} }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /"server\.colour"/);
      assert.match(err.message, /"tpyo"/);
      return true;
    },
  );
});

test('an unknown key in a file on disk names the file', () => {
  assert.throws(
    () =>
      loadConfig({
        schema: z.omit(schema, { peers: true }),
        file: fixture,
        environment: {},
        substitute: true,
      }),
    (err: unknown) =>
      err instanceof ConfigError && err.message.includes(fixture) && err.message.includes('"peers"'),
  );
});

test('an environment override wins over the file, with type coercion', () => {
  const cfg = loadConfig({
    schema,
    file: fixture,
    substitute: true,
    environment: { APP_PORT: '9999', APP_SECRET: 'overridden-secret', APP_DEBUG: 'true' },
    env: { APP_PORT: 'server.port', APP_SECRET: { path: 'secret', parse: (s) => s }, APP_DEBUG: 'debug' },
  });
  assert.equal(cfg.server.port, 9999);
  assert.equal(cfg.secret, 'overridden-secret');
  assert.equal(cfg.debug, true);
});

test('an invalid override value is reported with the variable that set it', () => {
  assert.throws(
    () =>
      loadConfig({
        schema,
        file: fixture,
        substitute: true,
        environment: { APP_PORT: 'seventy' },
        env: { APP_PORT: 'server.port' },
      }),
    (err: unknown) =>
      err instanceof ConfigError && /server\.port/.test(err.message) && /APP_PORT/.test(err.message),
  );
});

test('a missing file and a broken file give clear errors', () => {
  assert.throws(
    () => loadConfig({ schema, file: '/nonexistent/x.json' }),
    /cannot read config file \/nonexistent\/x\.json/,
  );
  const broken = join(fileURLToPath(new URL('../', import.meta.url)), 'fixtures', 'slow-server.ts');
  assert.throws(() => loadConfig({ schema, file: broken }), /not valid JSON/);
});

test("zod from core has English messages without zod's classic API in the process", () => {
  const r = z.strictObject({ port: z.int().check(z.maximum(65535)), mode: z.enum(['a', 'b']) }).safeParse({
    port: 70000,
    mode: 'c',
    extra: 1,
  });
  assert.equal(r.success, false);
  assert.deepEqual(
    r.error?.issues.map((i) => i.message),
    [
      'Too big: expected number to be <=65535',
      'Invalid option: expected one of "a"|"b"',
      'Unrecognized key: "extra"',
    ],
  );
});
