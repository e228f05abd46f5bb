import {
  AppError,
  bearerToken,
  Counter,
  Gauge,
  createHttpApp,
  isAppError,
  type Clock,
  type Logger,
  type Registry,
} from '@broadcast-ops/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PunchConfig } from '../config.ts';
import type { SessionBroker } from '../domain/broker.ts';
import { FixedWindowLimiter } from '../domain/rate-limiter.ts';
import { isLive, type PeerClaim, type SessionRecord } from '../domain/session.ts';
import { AccessChecker } from '../domain/access.ts';
import { fail } from '../errors.ts';
import { connectionStrings } from '../protocol/connection-strings.ts';
import { buildOpenApi } from '../protocol/openapi.ts';
import {
  MAX_TURNSTILE_TOKEN_LENGTH,
  PUNCH_VERSION,
  createSessionResponse,
  describeIssues,
  makeSchemas,
} from '../protocol/schemas.ts';
import { z } from 'zod';
import type { TokenClaims, TokenSigner } from '../protocol/token.ts';
import { renderQrSvg, renderSessionPage } from './pages.ts';
import type { TurnstileVerifier } from './turnstile.ts';

/**
 * The HTTP half of the broker (spec "Endpoints"; gap decisions in reference §1). Checks run in the order
 * of reference §1.2: rate limit (before the body is read), then token, then session lookup, then body.
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
}

const WWW_AUTHENTICATE = { 'www-authenticate': 'Bearer realm="punch"' };

/** The peer's IP as the spec wants it: from the socket (or the trusted proxy header), `::ffff:` stripped. */
export function clientIp(request: FastifyRequest, trustProxy: boolean): string {
  const raw = (trustProxy ? request.ip : request.socket.remoteAddress) ?? 'unknown';
  return raw.startsWith('::ffff:') && raw.includes('.') ? raw.slice(7) : raw;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Error body of every broker error: `{error, code, message}` (reference §1.2), `code` repeating `error`. */
function errorBodyOf(e: AppError): { error: string; code: string; message: string } {
  return { error: e.code, code: e.code, message: e.message };
}

/** The public part of a claim: the spec's view shows the address and label, never `meta` or `clientId`. */
function peerView(p: PeerClaim | null): { ip: string; port: number; label: string } | null {
  return p ? { ip: p.ip, port: p.port, label: p.label } : null;
}

export function sessionViewOf(session: SessionRecord, onlyStream: string | null) {
  const streams: Record<string, unknown> = {};
  for (const s of session.streams) {
    if (onlyStream !== null && s.name !== onlyStream) continue;
    // The spec's sample shows `waiting` and `connected`; `ready` is the matched state (reference §1.2).
    streams[s.name] = {
      state: s.state,
      peer_a: peerView(s.peerA),
      peer_b: peerView(s.peerB),
      health: s.health,
    };
  }
  return {
    session: session.name,
    state: session.state,
    streams,
    latency: session.latency,
    created: iso(session.createdAt),
    expiresAt: session.expiresAt,
  };
}

export function buildHttpApi(deps: HttpApiDeps): FastifyInstance {
  const { config, broker, signer, clock } = deps;
  const limits = config.limits;
  const schemas = makeSchemas(limits);
  const app = createHttpApp({
    logger: deps.logger,
    bodyLimit: limits.bodyLimit,
    trustProxy: config.trustProxy,
  });
  // JSON only: fastify would otherwise hand a text/plain body to the handlers as a string.
  app.removeContentTypeParser('text/plain');
  const ipOf = (r: FastifyRequest) => clientIp(r, config.trustProxy);

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
  const rateLimited = new Counter({
    name: 'punch_http_rate_limited_total',
    help: 'Requests refused by a per-IP limit',
    labelNames: ['limit'],
    registers: [deps.registry],
  });
  const authFailures = new Counter({
    name: 'punch_auth_failures_total',
    help: 'Requests refused for their token',
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

  // --- rate limits (spec "Limits"), run in onRequest: before the body is read or any session state is touched
  const window = 60_000;
  const createLimiter = new FixedWindowLimiter({
    limit: limits.createPerMinute,
    windowMs: window,
    maxKeys: limits.rateLimitKeys,
  });
  const getLimiter = new FixedWindowLimiter({
    limit: limits.getPerMinute,
    windowMs: window,
    maxKeys: limits.rateLimitKeys,
  });
  const limitWith =
    (limiter: FixedWindowLimiter, name: string) =>
    (request: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => {
      if (!limits.rateLimits) return done();
      const d = limiter.hit(ipOf(request), clock.monotonicMs());
      if (d.allowed) return done();
      rateLimited.inc({ limit: name });
      done(
        fail('RATE_LIMITED', `rate limit of ${name} exceeded; retry in ${d.retryAfterS} s`, {
          headers: { 'retry-after': String(d.retryAfterS) },
        }),
      );
    };
  const limitCreate = limitWith(createLimiter, 'session creation');
  const limitGet = limitWith(getLimiter, 'session requests');

  // --- Punch-Version on every response: 2xx, 204, errors, 404, HEAD (reference §1.1 "Version in path")
  app.addHook('onSend', (_request, reply, payload, done) => {
    void reply.header('punch-version', PUNCH_VERSION);
    done(null, payload);
  });

  app.setNotFoundHandler((request, reply) => {
    const e = fail('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`);
    return reply.status(e.status).send(errorBodyOf(e));
  });

  // Routes live in one plugin scope with the broker's own error handler (core's stays for the root).
  app.register((api, _opts, done) => {
    api.setErrorHandler((err, request, reply) => {
      let e: AppError;
      if (isAppError(err)) e = err;
      else {
        const fe = err as { statusCode?: number; code?: string; message?: string };
        if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
          e = fail('INVALID_MESSAGE', `body: larger than the limit of ${limits.bodyLimit} bytes`);
        } else if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
          e = fail('INVALID_MESSAGE', 'body: Content-Type must be application/json');
        } else if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
          e = fail('INVALID_MESSAGE', 'body: empty JSON body');
        } else if (fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError) {
          e = fail('INVALID_MESSAGE', 'body: not valid JSON');
        } else if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
          e = fail('INVALID_MESSAGE', `request: ${fe.message ?? 'bad request'}`);
        } else {
          request.log.error({ err }, 'unhandled error');
          e = fail('SERVER_ERROR');
        }
      }
      if (e.headers) void reply.headers(e.headers);
      if (e.code === 'AUTH_FAILED' && e.status === 401) void reply.headers(WWW_AUTHENTICATE);
      return reply.status(e.status).send(errorBodyOf(e));
    });

    // --- tokens (spec "Authentication"; reference §1.1 "Signature encoding")
    const access = new AccessChecker(signer, (reason) => authFailures.inc({ reason }));
    const authorize = (request: FastifyRequest, name: string): TokenClaims =>
      access.authenticate(bearerToken(request.headers.authorization), name, clock.now());
    const liveSession = (name: string, claims: TokenClaims): SessionRecord =>
      access.liveSession(broker.get(name), name, claims);
    const urls = (name: string, token?: string) => {
      const base = `${deps.baseUrl()}/s/${encodeURIComponent(name)}`;
      const q = token === undefined ? '' : `?t=${encodeURIComponent(token)}`;
      return { url: `${base}${q}`, qr: `${base}/qr${q}` };
    };

    // --- POST /api/session: no bearer needed (reference §1.1: createSession has `security: []`)
    // The 201 body is serialised by fast-json-stringify from the response schema (the hot path of creates).
    const createdSchema = (
      z.toJSONSchema(createSessionResponse, { target: 'draft-2020-12' }) as { $defs: Record<string, unknown> }
    ).$defs['CreateSessionResponse'];
    api.post(
      '/api/session',
      { onRequest: limitCreate, schema: { response: { 201: createdSchema } } },
      async (request, reply) => {
        if (deps.turnstile) {
          const fromHeader = request.headers['cf-turnstile-response'];
          const body = request.body as Record<string, unknown> | null | undefined;
          const fromBody = body && typeof body === 'object' ? body['turnstileToken'] : undefined;
          const token =
            typeof fromHeader === 'string' ? fromHeader : typeof fromBody === 'string' ? fromBody : '';
          if (
            token === '' ||
            token.length > MAX_TURNSTILE_TOKEN_LENGTH ||
            !(await deps.turnstile(token, ipOf(request)))
          ) {
            throw fail('TURNSTILE_FAILED', 'turnstileToken: missing or rejected by Turnstile');
          }
        }
        const parsed = schemas.createSessionRequest.safeParse(request.body);
        if (!parsed.success) throw fail('INVALID_MESSAGE', describeIssues(parsed.error));
        const { name, streams, latency, ttl } = parsed.data;
        const session = await broker.create({ name, streams, latency, ttl });
        const token = signer.sign({
          session: name,
          role: 'admin',
          stream: null,
          exp: session.expiresAt / 1000,
          sid: session.id,
        });
        deps.logger.info(
          { session: name, streams: session.streams.length, ttl, ip: ipOf(request) },
          'session created',
        );
        return reply.status(201).send({
          session: name,
          token,
          ...urls(name),
          streams: session.streams.map((s) => s.name),
          latency: session.latency,
          ttl: session.ttl,
          state: session.state,
          created: iso(session.createdAt),
          expiresAt: session.expiresAt,
        });
      },
    );

    api.get<{ Params: { name: string } }>('/api/session/:name', { onRequest: limitGet }, (request) => {
      const claims = authorize(request, request.params.name);
      const session = liveSession(request.params.name, claims);
      // A stream-scoped token sees only its stream (spec: "A token for one stream cannot access another stream").
      return sessionViewOf(session, claims.stream);
    });

    api.delete<{ Params: { name: string } }>(
      '/api/session/:name',
      { onRequest: limitGet },
      async (request, reply) => {
        const claims = authorize(request, request.params.name);
        access.requireAdmin(claims, 'closing a session');
        liveSession(request.params.name, claims);
        // Logged once, with its reason, by the broker's `session_closed` subscriber (server.ts).
        await broker.close(request.params.name, 'admin_closed');
        return reply.status(204).send();
      },
    );

    api.get<{ Params: { name: string }; Querystring: Record<string, unknown> }>(
      '/api/session/:name/connect',
      { onRequest: limitGet },
      (request) => {
        const claims = authorize(request, request.params.name);
        // The strings carry the passphrase: admin tokens only (spec "Passphrase handling").
        access.requireAdmin(claims, '/connect');
        const session = liveSession(request.params.name, claims);
        const q = schemas.connectQuery.safeParse(request.query);
        if (!q.success) throw fail('INVALID_MESSAGE', describeIssues(q.error, 'query'));
        const streamName = q.data.stream ?? session.streams[0]?.name;
        const stream = session.streams.find((s) => s.name === streamName);
        if (!stream) throw fail('INVALID_MESSAGE', `stream: no stream "${streamName}" in this session`);
        const { peerA, peerB } = stream;
        if (!peerA || !peerB) {
          throw fail('STREAM_NOT_READY', `stream "${stream.name}": both peers must register before /connect`);
        }
        const roleA = q.data.role;
        const roleB = roleA === 'sender' ? 'receiver' : 'sender';
        const common = { latencyMs: session.latency, passphrase: session.passphrase };
        return {
          stream: stream.name,
          role: roleA,
          // for_peer_a targets peer B's endpoint; for_peer_b is the mirror (spec).
          for_peer_a: connectionStrings({
            ...common,
            remoteIp: peerB.ip,
            remotePort: peerB.port,
            localPort: peerA.port,
            role: roleA,
          }),
          for_peer_b: connectionStrings({
            ...common,
            remoteIp: peerA.ip,
            remotePort: peerA.port,
            localPort: peerB.port,
            role: roleB,
          }),
        };
      },
    );

    api.post<{ Params: { name: string } }>(
      '/api/session/:name/token',
      { onRequest: limitGet },
      async (request, reply) => {
        const claims = authorize(request, request.params.name);
        access.requireAdmin(claims, 'issuing peer tokens');
        const session = liveSession(request.params.name, claims);
        const body = schemas.tokenRequest.safeParse(request.body ?? {});
        if (!body.success) throw fail('INVALID_MESSAGE', describeIssues(body.error));
        const stream = body.data.stream === undefined ? (session.streams[0]?.name ?? null) : body.data.stream;
        if (stream !== null && !session.streams.some((s) => s.name === stream)) {
          throw fail('INVALID_MESSAGE', `stream: no stream "${stream}" in this session`);
        }
        const exp = session.expiresAt / 1000;
        const token = signer.sign({
          session: session.name,
          role: 'peer',
          stream,
          exp,
          sid: session.id,
          ...(body.data.label === undefined ? {} : { label: body.data.label }),
        });
        return reply
          .status(201)
          .send({ token, session: session.name, stream, role: 'peer', exp, ...urls(session.name, token) });
      },
    );

    const startedAt = clock.monotonicMs();
    // Public (no token): monitors probe with GET or HEAD (fastify answers HEAD from the GET route).
    api.get('/api/health', () => ({
      status: 'ok',
      version: PUNCH_VERSION,
      uptime: Math.floor((clock.monotonicMs() - startedAt) / 1000),
    }));

    let openapi: unknown;
    api.get('/api/openapi.json', () => {
      openapi ??= buildOpenApi(schemas, { serverUrl: deps.baseUrl(), maxBodyBytes: limits.bodyLimit });
      return openapi;
    });

    api.get('/metrics', async (_request, reply) => {
      return reply.type(deps.registry.contentType).send(await deps.registry.metrics());
    });

    // --- pages (reference §1.2 "Pages"): join page and QR; the token, if any, comes from `?t=`
    const pageSession = (name: string): SessionRecord | undefined => {
      const s = broker.get(name);
      return s && isLive(s) ? s : undefined;
    };
    const validPageToken = (name: string, t: unknown): string | undefined => {
      if (typeof t !== 'string') return undefined;
      const v = signer.verify(t, clock.now());
      return v.ok && !v.expired && v.claims.session === name ? t : undefined;
    };
    api.get<{ Params: { name: string }; Querystring: { t?: string } }>(
      '/s/:name',
      { onRequest: limitGet },
      (request, reply) => {
        const s = pageSession(request.params.name);
        const html = s
          ? renderSessionPage(s.name, validPageToken(s.name, request.query.t), true)
          : renderSessionPage(request.params.name, undefined, false);
        void reply
          .status(s ? 200 : 404)
          .type('text/html; charset=utf-8')
          .send(html);
      },
    );
    api.get<{ Params: { name: string }; Querystring: { t?: string } }>(
      '/s/:name/qr',
      { onRequest: limitGet },
      async (request, reply) => {
        const s = pageSession(request.params.name);
        if (!s) throw fail('SESSION_EXPIRED', `session "${request.params.name}" is closed or unknown`);
        const { url } = urls(s.name, validPageToken(s.name, request.query.t));
        return reply.type('image/svg+xml').send(await renderQrSvg(url));
      },
    );

    done();
  });

  return app;
}
