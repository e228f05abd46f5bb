import {
  bearerToken,
  Counter,
  Gauge,
  createHttpApp,
  installHostGuard,
  type AppError,
} from '@broadcast-ops/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AccessChecker } from '../domain/access.ts';
import type { LimitGroup } from '../domain/rate-limiter.ts';
import { ClientLimits } from './client-limits.ts';
import { PUNCH_VERSION, makeSchemas } from '../protocol/schemas.ts';
import { clientAddress, parseTrustPolicy, type TrustPolicy } from './client-address.ts';
import { fail, orThrow, punchErrorBody, unavailable } from './http-errors.ts';
import type { Hook, HttpApiDeps, RouteContext } from './routes/context.ts';
import { agentRoutes } from './routes/agent-routes.ts';
import { healthRoutes } from './routes/health-routes.ts';
import { opsRoutes } from './routes/ops-routes.ts';
import { pageRoutes } from './routes/page-routes.ts';
import { registerRoutes, type RouteSpec } from './routes/route-table.ts';
import { sessionRoutes } from './routes/session-routes.ts';
import { signallingRoutes } from './routes/signalling-routes.ts';

export type { HttpApiDeps, StoreInfo } from './routes/context.ts';

/**
 * The HTTP half of the broker (spec "Endpoints"; README "API documentation"). This module builds the app,
 * the per-client limits, the error handler and the shared route context; the routes are declared as one
 * table per group (`routes/session-routes.ts`, `routes/page-routes.ts`, `routes/ops-routes.ts`, ...; the
 * table's shape in `routes/route-table.ts`), and what they share in `routes/context.ts`. Checks run in this
 * order: rate limit (in `onRequest`, before the body is read), then token, then session lookup, then query
 * and body.
 */

/** Error body of every broker error: `{error, code, message}` (http-errors.ts punchErrorBody). */
export function errorBodyOf(e: AppError): { error: string; code: string; message: string } {
  return punchErrorBody(e);
}

const GROUP_NAMES: Record<LimitGroup, string> = {
  create: 'session creation',
  read: 'session reads',
  admin: 'session administration',
  page: 'session pages',
  wsConnect: 'WebSocket connects',
};

/**
 * The broker's route table (routes/route-table.ts): every route once, in one list that registers them,
 * validates their requests and writes the OpenAPI document (`GET /api/openapi.json`).
 */
export function routeTable(ctx: RouteContext): readonly RouteSpec[] {
  const table: RouteSpec[] = [
    ...sessionRoutes(ctx),
    ...healthRoutes(ctx),
    ...pageRoutes(ctx),
    ...opsRoutes(ctx, () => table),
    ...agentRoutes(ctx),
    ...signallingRoutes(),
  ];
  return table;
}

const tables = new WeakMap<FastifyInstance, readonly RouteSpec[]>();

/** The table an app of `buildHttpApi` was built from (the route-table test compares it with fastify's). */
export function routeTableOf(app: FastifyInstance): readonly RouteSpec[] | undefined {
  return tables.get(app);
}

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
  const table = routeTable(ctx);
  tables.set(app, table);
  app.register((api, _opts, done) => {
    registerRoutes(api, ctx, table);
    done();
  });

  return app;
}
