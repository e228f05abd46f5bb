/**
 * The bridge's error catalogue (docs/protocol.md "Errors"): core's generic codes, which the HTTP side
 * answers with (docs/console.md "Errors"), plus the protocol's codes carried in `error` messages and in
 * `ack.payload.error` (UNAUTHORIZED, FORBIDDEN and RATE_LIMITED are generic and protocol codes alike).
 */
import { errorFactory, extendErrors } from '@broadcast-ops/core';

export const BRIDGE_ERRORS = extendErrors({
  PARSE_ERROR: { status: 400, message: 'frame is not valid JSON' },
  INVALID_MESSAGE: { status: 400, message: 'message failed schema validation' },
  UNKNOWN_TARGET: { status: 404, message: 'no adapter or client with that namespace' },
  TIMEOUT: { status: 504, message: 'operation timed out' },
  ADAPTER_ERROR: { status: 502, message: 'adapter-side failure' },
  STATE_CONFLICT: { status: 409, message: 'key is owned by another namespace' },
  SUBSCRIPTION_FAILED: { status: 400, message: 'bad pattern or too many subscriptions' },
  INTERNAL_ERROR: { status: 500, message: 'unexpected failure' },
});

export type BridgeErrorCode = keyof typeof BRIDGE_ERRORS;

export const fail = errorFactory(BRIDGE_ERRORS);
