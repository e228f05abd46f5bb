import type { Clock, Logger, Registry } from '@broadcast-ops/core';
import type { FastifyRequest } from 'fastify';
import type { PunchConfig } from '../../config.ts';
import type { AccessChecker } from '../../domain/access.ts';
import type { SessionBroker } from '../../domain/broker.ts';
import type { LinkHealthView } from '../../domain/health-monitor.ts';
import type { LimitGroup } from '../../domain/rate-limiter.ts';
import type { SessionRecord, StreamRecord } from '../../domain/session.ts';
import type { RelayPathReport } from '../../protocol/relay-path-view.ts';
import type { Schemas } from '../../protocol/schemas.ts';
import type { TokenClaims, TokenSigner } from '../../protocol/token.ts';
import type { ClientLimits } from '../client-limits.ts';
import type { TurnstileVerifier } from '../turnstile.ts';

/**
 * What the HTTP app (`../http-api.ts`) hands to each route group: its dependencies and the shared route
 * context. Kept apart from the app so that the route modules and the app that registers them do not import
 * each other (the repository's ARCHITECTURE.md, "No import cycles").
 */
export interface HttpApiDeps {
  config: PunchConfig;
  broker: SessionBroker;
  signer: TokenSigner;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  /** `{base_url}` of `url` and `qr`; a function because port 0 is known only after listen. */
  baseUrl: () => string;
  /** Present only when Turnstile is configured. */
  turnstile?: TurnstileVerifier | undefined;
  /** The per-client buckets, shared with the WebSocket layer (its connect limit); default: new ones. */
  clientLimits?: ClientLimits | undefined;
  /**
   * Per-client limits shared by every instance (Redis counters, docs/multi-instance.md "Rate limits"):
   * resolves to 0 when allowed, else the seconds to wait; rejects when the counters are unreachable.
   */
  sharedLimits?: ((group: LimitGroup, ip: string) => Promise<number>) | undefined;
  /** What `/api/health` says about the store besides its save state (kind, Redis reachability, role). */
  storeInfo?: (() => Promise<StoreInfo>) | undefined;
  /** A stream's health and 10-minute history (the signalling hub's; set once the hub exists). */
  healthView?: ((session: string, stream: string) => LinkHealthView | null) | undefined;
  /** What the relay measured on a relayed stream (the signalling hub's; set once the hub exists). */
  relayFigures?: ((stream: StreamRecord) => RelayPathReport | undefined) | undefined;
  /** PEM certificate chain and key: the app serves HTTPS (and, later, WSS on the same port). */
  tls?: { cert: Buffer; key: Buffer } | undefined;
}

/** The store in use, for `/api/health`. */
export interface StoreInfo {
  kind: 'sqlite' | 'redis';
  /** Redis only: whether it answers now. */
  reachable?: boolean;
  /** Redis only: this instance's id, whether it owns the sessions, and the owner's id. */
  instance?: string;
  role?: 'owner' | 'relay';
  owner?: string | null;
}

export type Hook = (request: FastifyRequest, reply: unknown, done: (err?: Error) => void) => void;

/** What every route group shares. */
export interface RouteContext {
  deps: HttpApiDeps;
  schemas: Schemas;
  access: AccessChecker;
  /** `onRequest` hooks of the per-client buckets. */
  limit: Record<LimitGroup, Hook>;
  /** The client's address (the one function shared with the WebSocket layer). */
  clientOf: (request: FastifyRequest) => string;
  /** Verified claims of the request's bearer token for session `name`, or the matching HTTP error. */
  authorize: (request: FastifyRequest, name: string) => TokenClaims;
  liveSession: (name: string, claims: TokenClaims) => SessionRecord;
  urls: (name: string, token?: string) => { url: string; qr: string };
}

/** A time in the views: ISO 8601 in UTC. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
