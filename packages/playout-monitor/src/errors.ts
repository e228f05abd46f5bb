/**
 * The playout monitor's error catalogue: core's generic codes (INVALID_REQUEST, UNAUTHORIZED, FORBIDDEN,
 * NOT_FOUND, PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, HOST_NOT_ALLOWED, RATE_LIMITED, SERVER_ERROR)
 * plus its own; stable codes, one HTTP status each.
 */
import { errorFactory, extendErrors } from '@broadcast-ops/core';

export const ERRORS = extendErrors({
  CONFIG_INVALID: { status: 400, message: 'the configuration is invalid' },
  DEVICE_NOT_FOUND: { status: 404, message: 'no such device' },
  DEVICE_CONFLICT: { status: 409, message: 'the device conflicts with the configuration' },
  CONFIG_NOT_SAVED: { status: 409, message: 'the monitor was started without a configuration file' },
  STORAGE_FULL: { status: 507, message: 'the configuration could not be saved: the disk is full' },
  CONFIG_NOT_APPLICABLE: {
    status: 409,
    message: 'the configuration cannot be applied (a port it needs is taken); nothing was saved',
  },
  CONFIG_WRITE_FAILED: { status: 500, message: 'the configuration could not be saved' },
  /** The WebSocket holds its maximum of clients; retry later. */
  CLIENTS_FULL: { status: 503, message: 'the WebSocket holds its maximum of clients' },
});

export const fail = errorFactory(ERRORS);
