import { AppError, defineErrors, errorFactory } from '@broadcast-ops/core';
import { isCredentialFailure, type AccessRefusal } from '../domain/access.ts';
import type { Refusal } from '../domain/outcome.ts';

/**
 * The one HTTP error catalogue of the broker: code → HTTP status (README "Errors"). Codes are the API
 * contract; bodies are `{error: CODE, code: CODE, message}`. The domain returns refusals with a code and
 * this module alone turns them into statuses and headers.
 */
export const PUNCH_ERRORS = defineErrors({
  INVALID_MESSAGE: { status: 400, message: 'invalid request' },
  /** 401 for a missing, malformed or forged token; 403 (`forbidden()`) for a genuine token not allowed here. */
  AUTH_FAILED: { status: 401, message: 'missing or invalid bearer token' },
  TURNSTILE_FAILED: { status: 403, message: 'Turnstile challenge failed' },
  NOT_FOUND: { status: 404, message: 'no such route' },
  SESSION_EXISTS: { status: 409, message: 'a live session with this name exists' },
  SESSION_FULL: { status: 409, message: 'all stream slots are occupied' },
  STREAM_TAKEN: { status: 409, message: 'stream slot already claimed' },
  STREAM_NOT_READY: { status: 409, message: 'both peers of the stream must register first' },
  SESSION_EXPIRED: { status: 410, message: 'session expired or closed' },
  RATE_LIMITED: { status: 429, message: 'rate limit exceeded' },
  SERVER_ERROR: { status: 500, message: 'internal server error' },
  SESSION_LIMIT: { status: 503, message: 'the server holds its maximum number of live sessions' },
  /** A change that could not be saved (disk full, I/O error): nothing changed; retry later. */
  STORE_UNAVAILABLE: { status: 503, message: 'the session store cannot save changes' },
});

export type PunchErrorCode = keyof typeof PUNCH_ERRORS;

export const fail = errorFactory(PUNCH_ERRORS);

/** AUTH_FAILED with 403: the token is genuine but not allowed here (other session, peer role, other stream). */
export function forbidden(message: string): AppError<PunchErrorCode> {
  return new AppError<PunchErrorCode>('AUTH_FAILED', 403, message);
}

export function isPunchError(err: unknown, code?: PunchErrorCode): err is AppError<PunchErrorCode> {
  return err instanceof AppError && (code === undefined || err.code === code);
}

/** Seconds a client should wait before retrying after a failed save or at the session cap. */
export const STORE_RETRY_AFTER_S = 5;
const SESSION_LIMIT_RETRY_AFTER_S = 60;

/** The HTTP error of a domain refusal: status and headers are chosen here, not in the domain. */
export function httpErrorOf(r: Refusal | AccessRefusal): AppError<PunchErrorCode> {
  switch (r.code) {
    case 'AUTH_FAILED':
      return 'reason' in r && !isCredentialFailure(r.reason)
        ? forbidden(r.message)
        : fail('AUTH_FAILED', r.message);
    case 'STORE_FAILED':
      return fail('STORE_UNAVAILABLE', r.message, {
        headers: { 'retry-after': String(STORE_RETRY_AFTER_S) },
      });
    case 'SESSION_LIMIT':
      return fail('SESSION_LIMIT', r.message, {
        headers: { 'retry-after': String(SESSION_LIMIT_RETRY_AFTER_S) },
      });
    default:
      return fail(r.code, r.message);
  }
}

/** The value of an outcome, or its refusal thrown as the matching HTTP error (for route handlers). */
export function orThrow<T extends { ok: true }>(outcome: T | Refusal | AccessRefusal): T {
  if (outcome.ok) return outcome;
  throw httpErrorOf(outcome);
}

/**
 * A request that cannot be served now because the shared store (Redis) or the owning instance is
 * unreachable (docs/multi-instance.md): SERVER_ERROR with 503 and `Retry-After`; nothing was changed.
 */
export function unavailable(message: string): AppError<PunchErrorCode> {
  return new AppError<PunchErrorCode>('SERVER_ERROR', 503, message, {
    headers: { 'retry-after': String(STORE_RETRY_AFTER_S) },
  });
}

/** Throw the refusal of a check that returns `undefined` when allowed. */
export function check(refusal: Refusal | AccessRefusal | undefined): void {
  if (refusal) throw httpErrorOf(refusal);
}
