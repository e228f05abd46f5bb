import type { Clock, Logger } from '@broadcast-ops/core';
import type { DeviceStore } from '../domain/device-store.ts';
import type { MalformedInputs } from '../malformed.ts';
import type { RetryGrid } from './retry-grid.ts';

/** What the monitor gives every input runner (OSC, vMix, HyperDeck): the store it writes to, time, logs. */
export interface InputContext {
  defaultFramerate: number;
  store: DeviceStore;
  clock: Clock;
  logger: Logger;
  malformed: MalformedInputs;
  /** Retries of absent devices at their cap share its instants (one wake for all); a plain timer without. */
  retryGrid?: RetryGrid;
}
