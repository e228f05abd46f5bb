import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PUNCH_ERRORS, forbidden } from '../src/errors.ts';

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
    },
  );
  const e = forbidden('token: issued for another session');
  assert.equal(e.code, 'AUTH_FAILED');
  assert.equal(e.status, 403);
});
