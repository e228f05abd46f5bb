import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AppError, createHttpApp, createLogger } from '../src/index.ts';

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
  app.setNotFoundHandler((_req, reply) => reply.status(404).send({ error: 'NOT_FOUND', message: 'own' }));
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
  assert.deepEqual(Object.keys(big.json()).sort(), ['error', 'message']);
  const boom = await app.inject('/boom');
  assert.equal(boom.statusCode, 500);
  assert.deepEqual(boom.json(), { error: 'SERVER_ERROR', message: 'internal server error' });
  await app.close();
});
