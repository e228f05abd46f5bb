import { AppError, defineErrors, errorFactory } from '@broadcast-ops/core';

/**
 * The one error catalogue of the broker: code → HTTP status (reference §1.2 "HTTP status per error code").
 * Codes are the API contract. Bodies are `{error: CODE, code: CODE, message}`.
 */
export const PUNCH_ERRORS = defineErrors({
  INVALID_MESSAGE: { status: 400, message: 'invalid request' },
  /** 401 for a missing, malformed or forged token; `forbidden()` gives the 403 variant (valid token, not allowed). */
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
