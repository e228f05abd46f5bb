import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PUNCH_ERRORS, forbidden, httpErrorOf } from '../src/io/http-errors.ts';

test('error catalogue: stable codes and their HTTP statuses (README "Errors")', () => {
  assert.deepEqual(
    Object.fromEntries(Object.entries(PUNCH_ERRORS).map(([code, spec]) => [code, spec.status])),
    {
      INVALID_MESSAGE: 400,
      AUTH_FAILED: 401,
      TURNSTILE_FAILED: 403,
      NOT_FOUND: 404,
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
});
