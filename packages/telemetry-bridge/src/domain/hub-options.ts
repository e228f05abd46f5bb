/** Options, limits and typed results of the hub (hub.ts). */
import type { Clock, Logger } from '@broadcast-ops/core';
import type { IdentityStore } from './client-registry.ts';
import type { EventLogSink } from './journal.ts';
import type { HubMetrics } from './metrics.ts';
import type { OutboundLimits } from './outbound-queue.ts';
import type { RecoveredLog } from './recovery.ts';

export interface HubLimits {
  /** Inbound messages per client per window. */
  rateLimit: number;
  rateLimitWindowMs: number;
  maxPatternsPerClient: number;
  /** Snapshot keys one connection may have waiting, over all its snapshots; a subscribe beyond is refused. */
  maxPendingSnapshotKeys: number;
  /** Command timeout when the command has no `ttl`. */
  defaultCommandTimeoutMs: number;
  idempotencyWindowMs: number;
  /** Commands one client may have in flight (received, no final ack yet); more are refused RATE_LIMITED. */
  maxCommandsInFlightPerClient: number;
  /** Broadcast messages kept in memory for resume: at most this many ... */
  replayRingSize: number;
  /** ... and at most this many bytes. */
  replayRingBytes: number;
  /** Keys one client namespace may hold under `app.<ns>.custom`. */
  maxKeysPerClient: number;
  /** A departed client's keys stay (stale) this long, then are deleted. */
  departedKeyTtlMs: number;
  outbound: OutboundLimits;
}

export const DEFAULT_HUB_LIMITS: HubLimits = {
  rateLimit: 100,
  rateLimitWindowMs: 1000,
  maxPatternsPerClient: 1000,
  maxPendingSnapshotKeys: 200_000,
  defaultCommandTimeoutMs: 30_000,
  idempotencyWindowMs: 60_000,
  maxCommandsInFlightPerClient: 100,
  replayRingSize: 10_000,
  replayRingBytes: 64 * 1024 * 1024,
  maxKeysPerClient: 10_000,
  departedKeyTtlMs: 600_000,
  outbound: {
    softLimitBytes: 1024 * 1024,
    hardLimitBytes: 8 * 1024 * 1024,
    maxQueuedMessages: 10_000,
    pollMs: 5,
  },
};

export interface HubOptions {
  clock: Clock;
  logger: Logger;
  limits?: Partial<HubLimits>;
  log?: EventLogSink;
  /** State and replay history read back from the event log at start. */
  recovered?: RecoveredLog;
  /** Epoch of this run (the event log's); a fresh one when absent. */
  epoch?: string;
  metrics?: HubMetrics;
  /**
   * With authentication on: where the namespace → credential binding is kept, so that after a restart a
   * restored namespace goes back only to the credential that held it.
   */
  identities?: IdentityStore;
}

export interface OpenedClient {
  connId: number;
  namespace: string;
  sessionId: string;
  /** Present it in a later handshake to get this namespace back (even while this socket lingers). */
  resumeToken: string;
  /** True when this connection took the namespace over from a live one. */
  superseded: boolean;
}

export type StateWriteOutcome =
  | { kind: 'changed'; version: number; offset: number }
  | { kind: 'unchanged' }
  | { kind: 'conflict'; owner: string | undefined };
