import { AppError, errorFactory, extendErrors, type ErrorBody } from '@broadcast-ops/core';
import { isCredentialFailure, type AccessRefusal } from '../domain/access.ts';
import type { Refusal } from '../domain/outcome.ts';

/**
 * The one HTTP error catalogue of the broker: core's generic codes plus the spec's and punch's own, code →
 * HTTP status (README "Errors"). Codes are the API contract. The domain returns refusals with a code and
 * this module alone turns them into statuses and headers. `INVALID_MESSAGE` and `AUTH_FAILED` are the
 * spec's codes (spec "Errors"); a body carries them in `code` and core's generic code in `error`
 * (punchErrorBody below).
 */
export const PUNCH_ERRORS = extendErrors({
  INVALID_MESSAGE: { status: 400, message: 'invalid request' },
  /** 401 for a missing, malformed or forged token; 403 (`forbidden()`) for a genuine token not allowed here. */
  AUTH_FAILED: { status: 401, message: 'missing or invalid bearer token' },
  TURNSTILE_FAILED: { status: 403, message: 'Turnstile challenge failed' },
  SESSION_EXISTS: { status: 409, message: 'a live session with this name exists' },
  SESSION_FULL: { status: 409, message: 'all stream slots are occupied' },
  STREAM_TAKEN: { status: 409, message: 'stream slot already claimed' },
  STREAM_NOT_READY: { status: 409, message: 'both peers of the stream must register first' },
  SESSION_EXPIRED: { status: 410, message: 'session expired or closed' },
  SESSION_LIMIT: { status: 503, message: 'the server holds its maximum number of live sessions' },
  /** A change that could not be saved (disk full, I/O error): nothing changed; retry later. */
  STORE_UNAVAILABLE: { status: 503, message: 'the session store cannot save changes' },
});

/** The spec's code (spec "Errors") of each generic code that has one; any other code is its own. */
const SPEC_CODE: Readonly<Record<string, string>> = {
  INVALID_REQUEST: 'INVALID_MESSAGE',
  PAYLOAD_TOO_LARGE: 'INVALID_MESSAGE',
  UNSUPPORTED_MEDIA_TYPE: 'INVALID_MESSAGE',
  UNAUTHORIZED: 'AUTH_FAILED',
  FORBIDDEN: 'AUTH_FAILED',
};

const WWW_AUTHENTICATE = { 'www-authenticate': 'Bearer realm="punch"' };

/**
 * The broker's error body: core's `{error, message}` with `error` the generic code (the same answer as every
 * other service of the toolkit gives), plus `code`, the spec's code, as the WebSocket's `error` message
 * carries it: `{"error":"UNAUTHORIZED","code":"AUTH_FAILED",…}`, `{"error":"SESSION_EXISTS","code":
 * "SESSION_EXISTS",…}`. A 401 carries `WWW-Authenticate` (RFC 6750 §3) when a reply is given.
 */
export function punchErrorBody(
  e: AppError,
  reply?: { header: (name: string, value: string) => unknown },
): ErrorBody & { code: string } {
  const error =
    e.code === 'INVALID_MESSAGE'
      ? 'INVALID_REQUEST'
      : e.code === 'AUTH_FAILED'
        ? e.status === 403
          ? 'FORBIDDEN'
          : 'UNAUTHORIZED'
        : e.code;
  if (e.status === 401 && reply) reply.header('www-authenticate', WWW_AUTHENTICATE['www-authenticate']);
  return { error, code: SPEC_CODE[error] ?? e.code, message: e.message };
}

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
