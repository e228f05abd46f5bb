import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostname } from 'node:os';
import {
  AppError,
  createHttpApp,
  createLogger,
  extendErrors,
  GENERIC_ERRORS,
  hostAllowed,
  hostNameOf,
  installHostGuard,
  sendError,
} from '../../src/index.ts';

const logger = createLogger({ service: 'test', level: 'silent' });

test('an unknown route answers the one error shape: 404 {error: NOT_FOUND, message}', async () => {
  const app = createHttpApp({ logger });
  app.get('/known', () => ({ ok: true }));
  app.register((child, _opts, done) => {
    child.get('/inner', () => 'inner');
    done();
  });
  const res = await app.inject({ method: 'GET', url: '/nope?secret=1' });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(res.json(), { error: 'NOT_FOUND', message: 'no route GET /nope' });
  assert.equal((await app.inject('/known')).statusCode, 200);
  assert.equal((await app.inject('/inner')).body, 'inner');
  await app.close();
});

test('an app that sets its own not-found handler keeps it (no "already set" error)', async () => {
  const app = createHttpApp({ logger });
  app.setNotFoundHandler((_req, reply) => sendError(reply, new AppError('NOT_FOUND', 404, 'own')));
  const res = await app.inject('/nope');
  assert.deepEqual(res.json(), { error: 'NOT_FOUND', message: 'own' });
  await app.close();
});

test('AppError, a fastify 4xx and an unexpected throw all answer {error, message}', async () => {
  const app = createHttpApp({ logger, bodyLimit: 10 });
  app.get('/app', () => {
    throw new AppError('THING_MISSING', 409, 'the thing is missing', { details: { id: 3 } });
  });
  app.get('/boom', () => {
    throw new Error('internal detail');
  });
  app.post('/echo', (req) => req.body);
  const a = await app.inject('/app');
  assert.equal(a.statusCode, 409);
  assert.deepEqual(a.json(), { error: 'THING_MISSING', message: 'the thing is missing', details: { id: 3 } });
  const big = await app.inject({
    method: 'POST',
    url: '/echo',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ a: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }),
  });
  assert.equal(big.statusCode, 413);
  assert.deepEqual(big.json(), {
    error: 'PAYLOAD_TOO_LARGE',
    message: 'body: larger than the limit of 10 bytes',
  });
  const boom = await app.inject('/boom');
  assert.equal(boom.statusCode, 500);
  assert.deepEqual(boom.json(), { error: 'SERVER_ERROR', message: 'internal server error' });
  await app.close();
});

test("fastify's own errors answer generic codes; no FST_ERR code or prefix reaches the client", async () => {
  const app = createHttpApp({ logger, bodyLimit: 64 });
  app.post('/echo', (req) => req.body);
  app.post('/typed', { schema: { body: { type: 'object', required: ['n'] } } }, (req) => req.body);
  const post = (payload: string, type?: string, url = '/echo') =>
    app.inject({ method: 'POST', url, payload, headers: type === undefined ? {} : { 'content-type': type } });
  const cases: [Awaited<ReturnType<typeof post>>, number, string][] = [
    [await post('{"a":', 'application/json'), 400, 'INVALID_REQUEST'],
    [await post('', 'application/json'), 400, 'INVALID_REQUEST'],
    [await post('x', 'application/x-thing'), 415, 'UNSUPPORTED_MEDIA_TYPE'],
    [await post(JSON.stringify({ a: 'y'.repeat(100) }), 'application/json'), 413, 'PAYLOAD_TOO_LARGE'],
    [await post('{}', 'application/json', '/typed'), 400, 'INVALID_REQUEST'],
    [await app.inject('/nope'), 404, 'NOT_FOUND'],
  ];
  for (const [r, status, code] of cases) {
    assert.equal(r.statusCode, status, r.body);
    const body = r.json<{ error: string; message: string }>();
    assert.deepEqual(Object.keys(body).sort(), ['error', 'message'], r.body);
    assert.equal(body.error, code, r.body);
    assert.equal(GENERIC_ERRORS[code as keyof typeof GENERIC_ERRORS].status, status);
    assert.doesNotMatch(r.body, /FST_/);
  }
  await app.close();
});

test('the Host guard: IP literals, localhost, this machine and configured names pass; others get 421', async () => {
  assert.equal(hostNameOf('Example.ORG.:8080'), 'example.org');
  assert.equal(hostNameOf('[2001:DB8::1]:80'), '2001:db8::1');
  assert.equal(hostNameOf('a b'), undefined);
  assert.equal(hostNameOf(''), undefined);
  for (const ok of ['127.0.0.1:3000', '[::1]', '10.1.2.3', 'localhost:80', hostname(), 'studio.lan:9'])
    assert.ok(hostAllowed(ok, ['studio.lan']), ok);
  for (const bad of ['rebind.evil.example', 'studio.lan.evil', undefined, '', 'x@studio.lan'])
    assert.ok(!hostAllowed(bad, ['studio.lan']), String(bad));
  let names: readonly string[] = [];
  const app = createHttpApp({ logger });
  installHostGuard(app, () => names);
  app.post('/change', () => ({ ok: true }));
  const call = (host: string) => app.inject({ method: 'POST', url: '/change', headers: { host } });
  const refused = await call('studio.lan');
  assert.equal(refused.statusCode, 421);
  assert.equal(refused.json<{ error: string }>().error, 'HOST_NOT_ALLOWED');
  // Unknown routes are guarded too: a foreign name learns nothing about the routes.
  assert.equal((await app.inject({ url: '/nope', headers: { host: 'evil.example' } })).statusCode, 421);
  names = ['studio.lan'];
  assert.equal((await call('studio.lan:8080')).statusCode, 200, 'a reloaded list applies at once');
  await app.close();
});

test('a catalogue extends the generic codes and cannot restate one; sendError uses the app body shape', async () => {
  const own = extendErrors({ THING_GONE: { status: 410, message: 'gone' } });
  assert.equal(own.THING_GONE.status, 410);
  assert.equal(own.UNAUTHORIZED.status, 401);
  assert.throws(() => extendErrors({ NOT_FOUND: { status: 400, message: 'x' } } as never), /generic/);
  const app = createHttpApp({
    logger,
    errorBody: (err) => ({ ...err.toBody(), code: `spec-${err.code}` }),
  });
  app.get('/gone', (_req, reply) => sendError(reply, new AppError('THING_GONE', 410, 'gone')));
  app.register((child, _opts, done) => {
    child.get('/child', () => {
      throw new AppError('THING_GONE', 410, 'gone');
    });
    done();
  });
  for (const url of ['/gone', '/child']) {
    const r = await app.inject(url);
    assert.equal(r.statusCode, 410);
    assert.deepEqual(r.json(), { error: 'THING_GONE', message: 'gone', code: 'spec-THING_GONE' });
  }
  assert.deepEqual((await app.inject('/nope')).json(), {
    error: 'NOT_FOUND',
    message: 'no route GET /nope',
    code: 'spec-NOT_FOUND',
  });
  await app.close();
});
