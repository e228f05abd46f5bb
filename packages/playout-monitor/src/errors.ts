/** The playout monitor's error catalogue: stable codes, one HTTP status each. */
import { defineErrors, errorFactory } from '@broadcast-ops/core';

export const ERRORS = defineErrors({
  CONFIG_INVALID: { status: 400, message: 'the configuration is invalid' },
  DEVICE_NOT_FOUND: { status: 404, message: 'no such device' },
  NOT_FOUND: { status: 404, message: 'not found' },
  UNAUTHORIZED: { status: 401, message: 'a valid admin token is required' },
  DEVICE_CONFLICT: { status: 409, message: 'the device conflicts with the configuration' },
  CONFIG_NOT_SAVED: { status: 409, message: 'the monitor was started without a configuration file' },
  INVALID_REQUEST: { status: 400, message: 'the request is invalid' },
  HOST_NOT_ALLOWED: { status: 421, message: 'this server does not answer to that Host name' },
  STORAGE_FULL: { status: 507, message: 'the configuration could not be saved: the disk is full' },
  CONFIG_NOT_APPLICABLE: {
    status: 409,
    message: 'the configuration cannot be applied (a port it needs is taken); nothing was saved',
  },
  CONFIG_WRITE_FAILED: { status: 500, message: 'the configuration could not be saved' },
});

export const fail = errorFactory(ERRORS);
