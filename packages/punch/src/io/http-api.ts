import {
  bearerToken,
  Counter,
  Gauge,
  createHttpApp,
  installHostGuard,
  type AppError,
  type Clock,
  type Logger,
  type Registry,
} from '@broadcast-ops/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PunchConfig } from '../config.ts';
import { AccessChecker } from '../domain/access.ts';
import type { SessionBroker } from '../domain/broker.ts';
import { liveHealth } from '../domain/health.ts';
import type { LimitGroup } from '../domain/rate-limiter.ts';
import { ClientLimits } from './client-limits.ts';
import { pathOf, type PeerClaim, type SessionRecord, type StreamRelay } from '../domain/session.ts';
import { PUNCH_VERSION, makeSchemas, type Schemas } from '../protocol/schemas.ts';
import type { TokenClaims, TokenSigner } from '../protocol/token.ts';
import { clientAddress, parseTrustPolicy, type TrustPolicy } from './client-address.ts';
import { fail, orThrow, punchErrorBody, unavailable } from './http-errors.ts';
import type { LinkHealthView } from '../domain/health-monitor.ts';
import { registerAgentRoutes } from './routes/agent-routes.ts';
import { registerHealthRoutes } from './routes/health-routes.ts';
import { registerOpsRoutes } from './routes/ops-routes.ts';
import { registerPageRoutes } from './routes/page-routes.ts';
import { registerSessionRoutes } from './routes/session-routes.ts';
import type { TurnstileVerifier } from './turnstile.ts';

/**
 * The HTTP half of the broker (spec "Endpoints"; README "API documentation"). This module builds the app,
 * the per-client limits, the error handler and the shared route context; the routes live in one module per
 * group (`routes/session-routes.ts`, `routes/page-routes.ts`, `routes/ops-routes.ts`). Checks run in this
 * order: rate limit (in `onRequest`, before the body is read), then token, then session lookup, then body.
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

type Hook = (request: FastifyRequest, reply: unknown, done: (err?: Error) => void) => void;

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

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
export { iso };

/** Error body of every broker error: `{error, code, message}` (http-errors.ts punchErrorBody). */
export function errorBodyOf(e: AppError): { error: string; code: string; message: string } {
  return punchErrorBody(e);
}

/**
 * The public part of a claim: the spec's view shows the address and label, never `meta` or `clientId`;
 * `present` (an added field) says whether its holder is connected now (README "Presence").
 */
function peerView(p: PeerClaim | null, present: boolean, mediaOnly: boolean) {
  if (!p) return null;
  const view = { ip: p.ip, port: p.port, label: p.label, role: p.role, present };
  // README "State from media": the link is up on the other end's word while this end's signalling is lost.
  return mediaOnly ? { ...view, signalling: 'lost, media reported by the other end' } : view;
}

/** A stream's relay in the view: its state, the reason when refused or ended, its address and ports. */
function relayView(r: StreamRelay) {
  return {
    state: r.state,
    reason: r.reason,
    address: r.address,
    ports: r.ports ? { peer_a: r.ports[0], peer_b: r.ports[1] } : null,
    since: iso(r.since),
  };
}

export function sessionViewOf(
  session: SessionRecord,
  onlyStream: string | null,
  broker: Pick<SessionBroker, 'isPresent' | 'isOvertime' | 'mediaWithoutSignalling'>,
  now: number,
) {
  const streams: Record<string, unknown> = {};
  for (const s of session.streams) {
    if (onlyStream !== null && s.name !== onlyStream) continue;
    // The spec's sample shows `waiting` and `connected`; `ready` is the matched state (README "States").
    // Health is shown only while current (README "Health"): `at` and `age` (seconds) say how current.
    const h = liveHealth(s.health, now);
    streams[s.name] = {
      state: s.state,
      peer_a: peerView(s.peerA, broker.isPresent(s, 'a'), broker.mediaWithoutSignalling(s, 'a')),
      peer_b: peerView(s.peerB, broker.isPresent(s, 'b'), broker.mediaWithoutSignalling(s, 'b')),
      // docs/relay.md "What the operator sees": the link's path, and the relay when there is one.
      path: pathOf(s),
      ...(s.relay ? { relay: relayView(s.relay) } : {}),
      health: h
        ? {
            rtt: h.rtt,
            retransmit: h.retransmit,
            bitrate: h.bitrate,
            at: iso(h.at),
            age: Math.max(0, Math.round((now - h.at) / 100) / 10),
          }
        : null,
    };
  }
  return {
    session: session.name,
    state: session.state,
    streams,
    latency: session.latency,
    created: iso(session.createdAt),
    expiresAt: session.expiresAt,
    // README "Lifetime": past its TTL and kept open by its media (admits no new peer until extended);
    // present only then, so the view keeps the spec's shape otherwise.
    ...(broker.isOvertime(session) ? { overtime: true } : {}),
  };
}

const GROUP_NAMES: Record<LimitGroup, string> = {
  create: 'session creation',
  read: 'session reads',
  admin: 'session administration',
  page: 'session pages',
  wsConnect: 'WebSocket connects',
};

export function buildHttpApi(deps: HttpApiDeps): FastifyInstance {
  const { config, broker, signer, clock } = deps;
  const limits = config.limits;
  const schemas = makeSchemas(limits);
  // fastify's own trustProxy stays off: the client address is computed by clientAddress() alone.
  const app = createHttpApp({
    logger: deps.logger,
    bodyLimit: limits.bodyLimit,
    trustProxy: false,
    errorBody: punchErrorBody,
    ...(deps.tls
      ? { fastify: { https: deps.tls } as NonNullable<Parameters<typeof createHttpApp>[0]['fastify']> }
      : {}),
  });
  // JSON only: fastify would otherwise hand a text/plain body to the handlers as a string. An empty JSON
  // body is "no body" (DELETE or /token with `Content-Type: application/json` and nothing else).
  app.removeContentTypeParser(['text/plain', 'application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch {
      done(fail('INVALID_MESSAGE', 'body: not valid JSON'), undefined);
    }
  });
  const trust: TrustPolicy = parseTrustPolicy(config.trustProxy);
  const clientOf = (r: FastifyRequest): string =>
    clientAddress(r.socket.remoteAddress, r.headers['x-forwarded-for'], trust);

  const rateLimited = new Counter({
    name: 'punch_http_rate_limited_total',
    help: 'Requests refused by a per-client limit',
    labelNames: ['limit'],
    registers: [deps.registry],
  });
  const authFailures = new Counter({
    name: 'punch_auth_failures_total',
    help: 'Requests refused for their token',
    labelNames: ['reason'],
    registers: [deps.registry],
  });
  const created = new Counter({
    name: 'punch_sessions_created_total',
    help: 'Sessions created',
    registers: [deps.registry],
  });
  const closed = new Counter({
    name: 'punch_sessions_closed_total',
    help: 'Sessions closed, by reason',
    labelNames: ['reason'],
    registers: [deps.registry],
  });
  new Gauge({
    name: 'punch_sessions_live',
    help: 'Live (not closed) sessions',
    registers: [deps.registry],
    collect() {
      this.set(broker.liveSessions);
    },
  });
  broker.subscribe((e) => {
    if (e.type === 'session_created') created.inc();
    else if (e.type === 'session_closed') closed.inc({ reason: e.reason });
  });

  // --- per-client limits (spec "Limits"), in onRequest: before the body is read or session state touched
  const buckets = deps.clientLimits ?? new ClientLimits(limits);
  const hookFor =
    (group: LimitGroup): Hook =>
    (request, _reply, done) => {
      if (!limits.rateLimits) return done();
      const shared = deps.sharedLimits;
      if (shared) {
        shared(group, clientOf(request)).then(
          (wait) => {
            if (wait === 0) return done();
            rateLimited.inc({ limit: group });
            done(
              fail('RATE_LIMITED', `rate limit of ${GROUP_NAMES[group]} exceeded; retry in ${wait} s`, {
                headers: { 'retry-after': String(wait) },
              }),
            );
          },
          () => done(unavailable('the rate-limit counters (Redis) are unreachable; retry')),
        );
        return;
      }
      const d = buckets.hit(group, clientOf(request), clock.monotonicMs());
      if (d.allowed) return done();
      rateLimited.inc({ limit: group });
      done(
        fail('RATE_LIMITED', `rate limit of ${GROUP_NAMES[group]} exceeded; retry in ${d.retryAfterS} s`, {
          headers: { 'retry-after': String(d.retryAfterS) },
        }),
      );
    };
  const limit: Record<LimitGroup, Hook> = {
    create: hookFor('create'),
    read: hookFor('read'),
    admin: hookFor('admin'),
    page: hookFor('page'),
    wsConnect: hookFor('wsConnect'),
  };

  // --- Punch-Version on every response: 2xx, 204, errors, 404, HEAD
  app.addHook('onSend', (_request, reply, payload, done) => {
    void reply.header('punch-version', PUNCH_VERSION);
    done(null, payload);
  });

  // DNS rebinding: core's Host guard, before the rate limits (README "Errors"); the base URL's host is ours.
  let hostsFor = '';
  let hosts: readonly string[] = [];
  installHostGuard(app, () => {
    const base = deps.baseUrl();
    if (base !== hostsFor) {
      hostsFor = base;
      hosts = [new URL(base).host, config.host];
    }
    return hosts;
  });

  const access = new AccessChecker(signer, (reason) => authFailures.inc({ reason }));
  const ctx: RouteContext = {
    deps,
    schemas,
    access,
    limit,
    clientOf,
    authorize: (request, name) =>
      orThrow(access.authenticate(bearerToken(request.headers.authorization), name, clock.now())).claims,
    liveSession: (name, claims) => orThrow(access.liveSession(broker.get(name), name, claims)).session,
    urls: (name, token) => {
      const base = `${deps.baseUrl()}/s/${encodeURIComponent(name)}`;
      const q = token === undefined ? '' : `?t=${encodeURIComponent(token)}`;
      return { url: `${base}${q}`, qr: `${base}/qr${q}` };
    },
  };

  // Errors of every route go through core's handler (fastify's own errors as generic codes) and leave with
  // punchErrorBody's shape.
  app.register((api, _opts, done) => {
    registerSessionRoutes(api, ctx);
    registerHealthRoutes(api, ctx);
    registerPageRoutes(api, ctx);
    registerOpsRoutes(api, ctx);
    registerAgentRoutes(api, ctx);
    done();
  });

  return app;
}
