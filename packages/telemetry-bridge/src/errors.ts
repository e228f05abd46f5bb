/**
 * The bridge's error catalogue (docs/protocol.md "Errors"): stable codes carried in `error` messages and in
 * `ack.payload.error`. The HTTP status is used only where an error crosses HTTP (health, metrics).
 */
import { defineErrors } from '@broadcast-ops/core';

export const BRIDGE_ERRORS = defineErrors({
  PARSE_ERROR: { status: 400, message: 'frame is not valid JSON' },
  INVALID_MESSAGE: { status: 400, message: 'message failed schema validation' },
  UNKNOWN_TARGET: { status: 404, message: 'no adapter or client with that namespace' },
  TIMEOUT: { status: 504, message: 'operation timed out' },
  RATE_LIMITED: { status: 429, message: 'client is over its message rate' },
  UNAUTHORIZED: { status: 401, message: 'missing or invalid credentials' },
  FORBIDDEN: { status: 403, message: 'not permitted' },
  ADAPTER_ERROR: { status: 502, message: 'adapter-side failure' },
  STATE_CONFLICT: { status: 409, message: 'key is owned by another namespace' },
  SUBSCRIPTION_FAILED: { status: 400, message: 'bad pattern or too many subscriptions' },
  INTERNAL_ERROR: { status: 500, message: 'unexpected failure' },
});

export type BridgeErrorCode = keyof typeof BRIDGE_ERRORS;
