/** The playout monitor's error catalogue: stable codes, one HTTP status each. */
import { defineErrors, errorFactory } from '@broadcast-ops/core';

export const ERRORS = defineErrors({
  CONFIG_INVALID: { status: 400, message: 'the configuration is invalid' },
  DEVICE_NOT_FOUND: { status: 404, message: 'no such device' },
  NOT_FOUND: { status: 404, message: 'not found' },
});

export const fail = errorFactory(ERRORS);
