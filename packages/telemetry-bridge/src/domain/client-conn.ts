/**
 * A connected client as the hub keeps it, with its subscriptions and the paged streams that bring them up to
 * date. The three types refer to each other, so they live together here, apart from the registry
 * (client-registry.ts) and the router (subscriptions.ts) that both use them (the repository's
 * docs/ARCHITECTURE.md "No import cycles").
 */
import type { TimerHandle } from '@broadcast-ops/core';
import type { OutboundQueue, OutboundSink } from './outbound-queue.ts';

export interface ClientConn {
  connId: number;
  namespace: string;
  sessionId: string;
  sink: OutboundSink;
  queue: OutboundQueue;
  subs: Map<string, Subscription>;
  patternCount: number;
  windowStart: number;
  windowCount: number;
  /** Offset of the last broadcast pushed, so a client with two matching subscriptions gets it once. */
  lastStamp: number;
  /** Offsets already replayed on this connection, so overlapping resumed subscriptions get each once. */
  replayed: Set<number>;
  /** Paged snapshots and replays, served one after the other as the socket drains. */
  streams: Stream[];
  pumpTimer: TimerHandle | undefined;
  open: boolean;
  /** Whose idempotency keys this connection's commands use (idempotencyScope). */
  idemScope: string;
}

export type SubscriptionFilter = 'state' | 'events' | 'all';

export interface Subscription {
  id: string;
  conn: ClientConn;
  patterns: Set<string>;
  filter: SubscriptionFilter;
  /** Keys of a snapshot not yet sent; live deltas for them are held back. */
  pendingPaths: Set<string> | undefined;
  /** A replay is catching up: live messages wait in the ring. */
  replaying: boolean;
  /** Hub offset from which the subscription receives live messages (meaningful once streams are done). */
  liveFrom: number;
  /** Id of the subscribe message, so a later failure of its stream names it (`relatedMessageId`). */
  messageId: string;
}

export type Stream =
  | {
      kind: 'snapshot';
      sub: Subscription;
      paths: string[];
      next: number;
      correlationId: string;
      recoveryFailed: string | undefined;
    }
  | { kind: 'replay'; sub: Subscription; cursor: number; replayed: number; correlationId: string };
