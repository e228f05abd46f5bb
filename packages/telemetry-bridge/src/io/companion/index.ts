/** Companion adapter from the `companion` config section (docs/companion.md "Configuration"). */
import type { BridgeConfig } from '../../config.ts';
import { MAX_LINE_LENGTH } from '../../protocol/satellite.ts';
import { CompanionAdapter } from './adapter.ts';

export { CompanionAdapter } from './adapter.ts';
export type {
  CompanionAdapterOptions,
  CompanionConnectionState,
  CompanionDevice,
  CompanionHost,
  CompanionVariable,
} from './adapter.ts';

export function companionAdapterFromConfig(c: BridgeConfig['companion']): CompanionAdapter {
  const { serial, ...device } = c.device;
  return new CompanionAdapter({
    host: c.host,
    port: c.port,
    ...(c.hosts ? { hosts: c.hosts } : {}),
    transport: c.transport,
    device: { ...device, ...(serial ? { serial } : {}) },
    heartbeatInterval: c.heartbeatInterval,
    deadAfter: c.deadAfter,
    connectionTimeout: c.connectionTimeout,
    replyTimeout: c.replyTimeout,
    reconnectDelay: c.reconnectDelay,
    failoverDelay: c.failoverDelay,
    maxReconnectDelay: c.maxReconnectDelay,
    reconnectJitter: c.reconnectJitter,
    maxReconnectAttempts: c.maxReconnectAttempts,
    refreshTimeout: c.refreshTimeout,
    locations: c.locations,
    maxLineLength: MAX_LINE_LENGTH,
  });
}
