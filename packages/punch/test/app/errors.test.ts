import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PUNCH_ERRORS, fail, forbidden, httpErrorOf, punchErrorBody } from '../../src/io/http-errors.ts';

test('error catalogue: stable codes and their HTTP statuses (README "Errors")', () => {
  assert.deepEqual(
    Object.fromEntries(Object.entries(PUNCH_ERRORS).map(([code, spec]) => [code, spec.status])),
    {
      INVALID_REQUEST: 400,
      UNAUTHORIZED: 401,
      FORBIDDEN: 403,
      NOT_FOUND: 404,
      PAYLOAD_TOO_LARGE: 413,
      UNSUPPORTED_MEDIA_TYPE: 415,
      HOST_NOT_ALLOWED: 421,
      INVALID_MESSAGE: 400,
      AUTH_FAILED: 401,
      TURNSTILE_FAILED: 403,
      SESSION_EXISTS: 409,
      SESSION_FULL: 409,
      STREAM_TAKEN: 409,
      STREAM_NOT_READY: 409,
      SESSION_EXPIRED: 410,
      RATE_LIMITED: 429,
      SERVER_ERROR: 500,
      SESSION_LIMIT: 503,
      STORE_UNAVAILABLE: 503,
    },
  );
  // A failed save is 503 with Retry-After, never a 500 that looks like a bug or a 2xx that lies.
  const stored = httpErrorOf({ ok: false, code: 'STORE_FAILED', message: 'disk full' });
  assert.deepEqual(
    [stored.code, stored.status, stored.headers],
    ['STORE_UNAVAILABLE', 503, { 'retry-after': '5' }],
  );
  const e = forbidden('token: issued for another session');
  assert.equal(e.code, 'AUTH_FAILED');
  assert.equal(e.status, 403);
  // The body: core's generic code in `error`, the spec's code in `code` (README "Errors").
  assert.deepEqual(punchErrorBody(e), {
    error: 'FORBIDDEN',
    code: 'AUTH_FAILED',
    message: 'token: issued for another session',
  });
  const headers: Record<string, string> = {};
  const reply = { header: (k: string, v: string) => (headers[k] = v) };
  assert.deepEqual(punchErrorBody(fail('AUTH_FAILED'), reply), {
    error: 'UNAUTHORIZED',
    code: 'AUTH_FAILED',
    message: 'missing or invalid bearer token',
  });
  assert.equal(headers['www-authenticate'], 'Bearer realm="punch"');
  assert.deepEqual(punchErrorBody(fail('SESSION_EXISTS')).code, 'SESSION_EXISTS');
  assert.deepEqual(punchErrorBody(fail('PAYLOAD_TOO_LARGE')).code, 'INVALID_MESSAGE');
});
