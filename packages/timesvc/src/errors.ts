import { errorFactory, extendErrors } from '@broadcast-ops/core';

/**
 * timesvc's error catalogue: core's generic codes (INVALID_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND,
 * PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, HOST_NOT_ALLOWED, RATE_LIMITED, SERVER_ERROR) plus its own;
 * stable codes (API contract), one HTTP status each.
 */
export const TIMESVC_ERRORS = extendErrors({
  NOT_IMPLEMENTED: { status: 501, message: 'not implemented yet' },
  CONFIG_INVALID: { status: 400, message: 'invalid configuration' },
  NTP_BIND_FAILED: { status: 500, message: 'cannot bind the NTP socket' },
  PEER_RESOLVE_FAILED: { status: 400, message: 'cannot resolve the upstream peer' },
  NOT_ENABLED: { status: 404, message: 'not enabled' },
  CONFLICT: { status: 409, message: 'conflict' },
  /** A stream path asked over plain HTTP (RFC 9110 §15.5.22). */
  UPGRADE_REQUIRED: { status: 426, message: 'this is a WebSocket endpoint' },
  /** The status and log streams hold their maximum of clients; retry later. */
  STREAMS_FULL: { status: 503, message: 'too many stream clients' },
  CONFIG_WRITE_FAILED: { status: 500, message: 'failed to save config' },
});

export type TimesvcErrorCode = keyof typeof TIMESVC_ERRORS;
export const fail = errorFactory(TIMESVC_ERRORS);
