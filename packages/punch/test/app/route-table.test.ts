import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { ManualClock, createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import { punchConfigSchema } from '../../src/config.ts';
import { SessionBroker } from '../../src/domain/broker.ts';
import { MemoryStore } from '../../src/domain/store.ts';
import { buildHttpApi, routeTableOf } from '../../src/io/http-api.ts';
import type { RouteSpec } from '../../src/io/routes/route-table.ts';
import { SIGNALLING_PATH } from '../../src/io/ws-server.ts';
import { openApiPath } from '../../src/protocol/openapi.ts';
import { TokenSigner } from '../../src/protocol/token.ts';

/**
 * The route table (docs/protocol.md "Route table") against what fastify registers and what the broker
 * documented before the table existed. Quick tier: the app is driven with `inject`, no socket.
 */

const BASE = 'http://punch.test';
const SECRET = 'route-table-test-secret-0123456789-abcdefghij';

function build(): { app: FastifyInstance; routes: string[] } {
  const config = punchConfigSchema.parse({ secret: SECRET });
  const clock = new ManualClock();
  const broker = new SessionBroker({
    store: new MemoryStore(),
    clock,
    maxSessions: config.limits.maxSessions,
    tombstoneMs: config.limits.tombstoneTtl * 1000,
  });
  const app = buildHttpApi({
    config,
    broker,
    signer: new TokenSigner(SECRET),
    clock,
    logger: silentLogger(),
    registry: createMetricsRegistry(),
    baseUrl: () => BASE,
  });
  // The routes are registered in a plugin, at ready(): this hook sees every one of them.
  const routes: string[] = [];
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) routes.push(`${m} ${r.url}`);
  });
  return { app, routes };
}

async function documentOf(app: FastifyInstance): Promise<Record<string, unknown>> {
  const r = await app.inject({ method: 'GET', url: '/api/openapi.json', headers: { host: 'punch.test' } });
  assert.equal(r.statusCode, 200, r.body);
  return r.json();
}

type Operation = { operationId: string; parameters?: { name: string; in: string; schema: unknown }[] };
type Paths = Record<string, Record<string, Operation>>;

/** What fastify should hold for a table: each route but the upgrades, and the HEAD it answers from a GET. */
function expectedRoutes(table: readonly RouteSpec[]): string[] {
  return table
    .filter((r) => !r.upgrade)
    .flatMap((r) => (r.method === 'GET' ? [`GET ${r.path}`, `HEAD ${r.path}`] : [`${r.method} ${r.path}`]));
}

/** Registered routes the table does not declare, and declared ones fastify does not hold. */
function drift(registered: readonly string[], table: readonly RouteSpec[]) {
  const reg = new Set(registered);
  const declared = new Set(expectedRoutes(table));
  return {
    notDeclared: [...reg].filter((r) => !declared.has(r)).sort(),
    notRegistered: [...declared].filter((r) => !reg.has(r)).sort(),
  };
}

describe('route table', () => {
  test('fastify registers exactly the routes the table declares', async () => {
    const { app, routes } = build();
    await app.ready();
    const table = routeTableOf(app);
    assert.ok(table && table.length > 10);
    assert.deepEqual(drift(routes, table), { notDeclared: [], notRegistered: [] });
    // An upgrade row is the WebSocket server's: its path is the one that server answers.
    const upgrades = table.filter((r) => r.upgrade);
    assert.deepEqual(
      upgrades.map((r) => r.path),
      ['/api/ws/:name'],
    );
    for (const r of upgrades) assert.ok(SIGNALLING_PATH.test(r.path.replace(':name', 'cam-1')), r.path);
    assert.ok(!SIGNALLING_PATH.test('/api/ws/cam-1/extra'));
    // No route twice (two declarations of one method and path would make fastify throw at ready).
    assert.equal(new Set(routes).size, routes.length);
    await app.close();
  });

  test('a route registered beside the table, or declared and not registered, is caught', async () => {
    const { app, routes } = build();
    app.get('/api/extra', () => 'x');
    await app.ready();
    const table = routeTableOf(app) ?? [];
    const seen = drift(
      routes.filter((r) => r !== 'PATCH /api/session/:name'),
      table,
    );
    assert.deepEqual(seen, {
      notDeclared: ['GET /api/extra', 'HEAD /api/extra'],
      notRegistered: ['PATCH /api/session/:name'],
    });
    await app.close();
  });

  test('the document lists every declared operation once, at its path, and nothing else', async () => {
    const { app } = build();
    await app.ready();
    const table = routeTableOf(app) ?? [];
    const doc = await documentOf(app);
    const inDoc = Object.entries(doc['paths'] as Paths)
      .flatMap(([path, item]) =>
        Object.entries(item).map(([m, o]) => `${o.operationId} ${m.toUpperCase()} ${path}`),
      )
      .sort();
    const declared = table
      .flatMap((r) => [
        ...(r.operationId === null ? [] : [`${r.operationId} ${r.method} ${openApiPath(r.path)}`]),
        ...(r.head ? [`${r.head.operationId} HEAD ${openApiPath(r.path)}`] : []),
      ])
      .sort();
    assert.deepEqual(inDoc, declared);
    assert.equal(new Set(declared.map((d) => d.split(' ')[0])).size, declared.length, 'operationIds unique');
    await app.close();
  });

  test("a row's checks run in the broker's order: token, admin role, session, query and body", async () => {
    const { app } = build();
    const call = async (method: 'GET' | 'POST' | 'PATCH', url: string, token?: string, payload?: unknown) => {
      const r = await app.inject({
        method,
        url,
        headers: {
          host: 'punch.test',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
      });
      return { status: r.statusCode, body: r.json<{ code: string; message: string; token: string }>() };
    };
    const created = await call('POST', '/api/session', undefined, { name: 'order', streams: ['cam'] });
    assert.equal(created.status, 201);
    const admin = created.body.token;
    const peer = (await call('POST', '/api/session/order/token', admin, { stream: 'cam' })).body.token;

    // No token: 401 before the query is looked at.
    assert.equal((await call('GET', '/api/session/order/health?stream=a%20b')).status, 401);
    // The query by its schema, naming the field; an array is not a name either.
    for (const q of ['stream=a%20b', 'stream=', 'stream=cam&stream=cam']) {
      const r = await call('GET', `/api/session/order/health?${q}`, admin);
      assert.deepEqual(
        [r.status, r.body.code, r.body.message],
        [400, 'INVALID_MESSAGE', 'stream: must be a stream name'],
      );
    }
    // The admin role before the body: a peer token with a bad body is a 403.
    const patched = await call('PATCH', '/api/session/order', peer, { ttl: 'soon' });
    assert.deepEqual([patched.status, patched.body.code], [403, 'AUTH_FAILED']);
    const bad = await call('PATCH', '/api/session/order', admin, { ttl: 'soon' });
    assert.deepEqual([bad.status, bad.body.code], [400, 'INVALID_MESSAGE']);
    assert.match(bad.body.message, /^ttl: /);
    // A missing optional body is validated as {}: a token for the first stream.
    assert.equal((await call('POST', '/api/session/order/token', admin)).status, 201);
    // A token of another session: 403 before the body.
    const gone = await call('PATCH', '/api/session/nothing', admin, { ttl: 'soon' });
    assert.equal(gone.status, 403);
    await app.close();
  });

  test('the document equals the one served before the table, but for the health query', async () => {
    // Provenance: test/fixtures/openapi/before-route-table.json was written by the hand-kept buildOpenApi
    // (protocol/openapi.ts before the route table) with the default limits and server http://punch.test.
    const before = JSON.parse(
      readFileSync(new URL('../fixtures/openapi/before-route-table.json', import.meta.url), 'utf8'),
    ) as Record<string, unknown>;
    const { app } = build();
    const doc = await documentOf(app);
    // The one documented difference (docs/protocol.md "Route table"): `?stream=` of the health route is
    // validated by its schema now, so the document states its pattern instead of a bare string.
    const health = (doc['paths'] as Paths)['/api/session/{name}/health']?.['get'];
    const param = health?.parameters?.find((p) => p.name === 'stream');
    assert.ok(param, 'health documents ?stream=');
    assert.deepEqual(param.schema, { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' });
    param.schema = { type: 'string' };
    assert.deepEqual(doc, before);
    await app.close();
  });
});
