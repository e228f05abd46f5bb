import { defineErrors, errorFactory } from '@broadcast-ops/core';

/** timesvc's error catalogue: stable codes (API contract), one HTTP status each. */
export const TIMESVC_ERRORS = defineErrors({
  NOT_FOUND: { status: 404, message: 'not found' },
  NOT_IMPLEMENTED: { status: 501, message: 'not implemented yet' },
  CONFIG_INVALID: { status: 400, message: 'invalid configuration' },
  NTP_BIND_FAILED: { status: 500, message: 'cannot bind the NTP socket' },
  PEER_RESOLVE_FAILED: { status: 400, message: 'cannot resolve the upstream peer' },
  BAD_REQUEST: { status: 400, message: 'invalid request' },
  UNAUTHORIZED: { status: 401, message: 'missing authentication token' },
  FORBIDDEN: { status: 403, message: 'insufficient permissions' },
  HOST_NOT_ALLOWED: { status: 403, message: 'Host header not allowed for this request' },
  NOT_ENABLED: { status: 404, message: 'not enabled' },
  CONFLICT: { status: 409, message: 'conflict' },
  RATE_LIMITED: { status: 429, message: 'too many requests' },
  CONFIG_WRITE_FAILED: { status: 500, message: 'failed to save config' },
});

export type TimesvcErrorCode = keyof typeof TIMESVC_ERRORS;
export const fail = errorFactory(TIMESVC_ERRORS);
