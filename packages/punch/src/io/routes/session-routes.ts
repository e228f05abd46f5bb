import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Refusal } from '../../domain/outcome.ts';
import { connectionStrings } from '../../protocol/connection-strings.ts';
import { MAX_TURNSTILE_TOKEN_LENGTH, createSessionResponse, describeIssues } from '../../protocol/schemas.ts';
import type { InviteRecord, SessionRecord } from '../../domain/session.ts';
import type { INVITE_STATES } from '../../protocol/schemas.ts';
import { check, fail, httpErrorOf } from '../http-errors.ts';
import { tokenFingerprint } from '../ws-server.ts';
import { iso, type RouteContext } from './context.ts';
import { sessionViewOf } from './session-view.ts';

/**
 * Session routes (spec "Endpoints"): create, view, close, connection strings, peer tokens and their invites
 * (README "Invites"). Buckets: create (POST), read (GET), admin (DELETE, /connect, /token, /invites).
 */
type InviteState = (typeof INVITE_STATES)[number];

export function registerSessionRoutes(api: FastifyInstance, ctx: RouteContext): void {
  const { deps, schemas, access } = ctx;
  const { broker, signer, logger } = deps;

  /** A refusal as its HTTP error; a failed save is also logged with its cause (the client sees "retry"). */
  const refused = (r: Refusal, what: string, session: string): Error => {
    if (r.code === 'STORE_FAILED') {
      logger.error({ session, store: broker.storeState }, `${what}: not saved, rolled back`);
    }
    return httpErrorOf(r);
  };

  // --- POST /api/session: no bearer needed (the creator receives the admin token)
  // The 201 body is serialised by fast-json-stringify from the response schema (the hot path of creates).
  const createdSchema = (
    z.toJSONSchema(createSessionResponse, { target: 'draft-2020-12' }) as { $defs: Record<string, unknown> }
  ).$defs['CreateSessionResponse'];
  api.post(
    '/api/session',
    { onRequest: ctx.limit.create, schema: { response: { 201: createdSchema } } },
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
          !(await deps.turnstile(token, ctx.clientOf(request)))
        ) {
          throw fail('TURNSTILE_FAILED', 'turnstileToken: missing or rejected by Turnstile');
        }
      }
      const parsed = schemas.createSessionRequest.safeParse(request.body);
      if (!parsed.success) throw fail('INVALID_MESSAGE', describeIssues(parsed.error));
      const { name, streams, latency, ttl } = parsed.data;
      const outcome = await broker.create({ name, streams, latency, ttl });
      if (!outcome.ok) throw refused(outcome, 'session create', name);
      const { session } = outcome;
      const token = signer.sign({
        session: name,
        role: 'admin',
        stream: null,
        exp: session.expiresAt / 1000,
        sid: session.id,
      });
      logger.info(
        { session: name, streams: session.streams.length, ttl, ip: ctx.clientOf(request) },
        'session created',
      );
      return reply.status(201).send({
        session: name,
        token,
        ...ctx.urls(name),
        streams: session.streams.map((s) => s.name),
        latency: session.latency,
        ttl: session.ttl,
        state: session.state,
        created: iso(session.createdAt),
        expiresAt: session.expiresAt,
      });
    },
  );

  api.get<{ Params: { name: string } }>('/api/session/:name', { onRequest: ctx.limit.read }, (request) => {
    const claims = ctx.authorize(request, request.params.name);
    const session = ctx.liveSession(request.params.name, claims);
    // A stream-scoped token sees only its stream (spec: "A token for one stream cannot access another stream").
    return sessionViewOf(session, claims.stream, ctx.deps.broker, ctx.deps.clock.now());
  });

  api.delete<{ Params: { name: string } }>(
    '/api/session/:name',
    { onRequest: ctx.limit.admin },
    async (request, reply) => {
      const claims = ctx.authorize(request, request.params.name);
      check(access.requireAdmin(claims, 'closing a session'));
      ctx.liveSession(request.params.name, claims);
      // Logged once, with its reason, by the broker's `session_closed` subscriber (server.ts).
      const outcome = await broker.close(request.params.name, 'admin_closed');
      if (!outcome.ok) throw refused(outcome, 'session close', request.params.name);
      return reply.status(204).send();
    },
  );

  // PATCH: extend a live session (README "Lifetime"), also one past its TTL that media keeps open.
  api.patch<{ Params: { name: string } }>(
    '/api/session/:name',
    { onRequest: ctx.limit.admin },
    async (request) => {
      const claims = ctx.authorize(request, request.params.name);
      check(access.requireAdmin(claims, 'extending a session'));
      ctx.liveSession(request.params.name, claims);
      const body = schemas.extendRequest.safeParse(request.body);
      if (!body.success) throw fail('INVALID_MESSAGE', describeIssues(body.error));
      // Whole seconds, like a created session's expiry.
      const expiresAt = Math.ceil((ctx.deps.clock.now() + body.data.ttl * 1000) / 1000) * 1000;
      const outcome = await broker.extend(request.params.name, expiresAt);
      if (!outcome.ok) throw refused(outcome, 'session extend', request.params.name);
      logger.info({ session: request.params.name, ttl: body.data.ttl, expiresAt }, 'session extended');
      return sessionViewOf(outcome.session, null, broker, ctx.deps.clock.now());
    },
  );

  api.get<{ Params: { name: string }; Querystring: Record<string, unknown> }>(
    '/api/session/:name/connect',
    { onRequest: ctx.limit.admin },
    (request) => {
      const claims = ctx.authorize(request, request.params.name);
      // The strings carry the passphrase: admin tokens only (spec "Passphrase handling").
      check(access.requireAdmin(claims, '/connect'));
      const session = ctx.liveSession(request.params.name, claims);
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
      // On the relay (docs/connection-strings.md "Relayed streams", a deviation from the spec's strings):
      // each peer's remote is the relay's address at that peer's own relay port.
      const relay = stream.relay?.state === 'allocated' ? stream.relay : null;
      const remoteOf = (partner: typeof peerA, side: 0 | 1) =>
        relay?.address && relay.ports
          ? { remoteIp: relay.address, remotePort: relay.ports[side] }
          : { remoteIp: partner.ip, remotePort: partner.port };
      return {
        stream: stream.name,
        role: roleA,
        // for_peer_a targets peer B's endpoint; for_peer_b is the mirror (spec).
        for_peer_a: connectionStrings({
          ...common,
          ...remoteOf(peerB, 0),
          localPort: peerA.port,
          role: roleA,
        }),
        for_peer_b: connectionStrings({
          ...common,
          ...remoteOf(peerA, 1),
          localPort: peerB.port,
          role: roleB,
        }),
      };
    },
  );

  api.post<{ Params: { name: string } }>(
    '/api/session/:name/token',
    { onRequest: ctx.limit.admin },
    async (request, reply) => {
      const claims = ctx.authorize(request, request.params.name);
      check(access.requireAdmin(claims, 'issuing peer tokens'));
      const session = ctx.liveSession(request.params.name, claims);
      if (!broker.admits(session)) {
        throw fail(
          'SESSION_EXPIRED',
          'the session is past its lifetime (kept open for its running links): extend it to invite',
        );
      }
      const body = schemas.tokenRequest.safeParse(request.body ?? {});
      if (!body.success) throw fail('INVALID_MESSAGE', describeIssues(body.error));
      const stream = body.data.stream === undefined ? (session.streams[0]?.name ?? null) : body.data.stream;
      if (stream !== null && !session.streams.some((s) => s.name === stream)) {
        throw fail('INVALID_MESSAGE', `stream: no stream "${stream}" in this session`);
      }
      // README "Invites": recorded (saved) before the token is handed out, so it can be listed and revoked.
      const outcome = await broker.issueInvite(session.name, stream, body.data.label ?? null);
      if (!outcome.ok) throw refused(outcome, 'invite', session.name);
      const token = inviteToken(outcome.session, outcome.invite);
      const exp = session.expiresAt / 1000;
      return reply.status(201).send({
        token,
        session: session.name,
        stream,
        role: 'peer',
        exp,
        ...ctx.urls(session.name, token),
        invite: outcome.invite.id,
      });
    },
  );

  /** The token of an invite, re-signed from its record (signing is deterministic, nothing else stored). */
  const inviteToken = (session: SessionRecord, invite: InviteRecord): string =>
    signer.sign({
      session: session.name,
      role: 'peer',
      stream: invite.stream,
      exp: session.expiresAt / 1000,
      sid: session.id,
      ...(invite.label === null ? {} : { label: invite.label }),
      inv: invite.id,
    });

  /** Whether a slot is held with this token, and whether its holder is connected now. */
  const inviteState = (session: SessionRecord, invite: InviteRecord, token: string): InviteState => {
    if (invite.revokedAt !== null) return 'revoked';
    const holder = tokenFingerprint(token);
    for (const s of session.streams) {
      for (const slot of ['a', 'b'] as const) {
        const claim = slot === 'a' ? s.peerA : s.peerB;
        if (claim?.holder === holder) return broker.isPresent(s, slot) ? 'present' : 'away';
      }
    }
    return 'unused';
  };

  api.get<{ Params: { name: string } }>(
    '/api/session/:name/invites',
    { onRequest: ctx.limit.admin },
    (request) => {
      const claims = ctx.authorize(request, request.params.name);
      check(access.requireAdmin(claims, 'listing invites'));
      const session = ctx.liveSession(request.params.name, claims);
      return {
        invites: (session.invites ?? []).map((invite) => {
          // A revoked token is never handed out again.
          const token = invite.revokedAt === null ? inviteToken(session, invite) : null;
          const urls = token === null ? { url: null, qr: null } : ctx.urls(session.name, token);
          return {
            id: invite.id,
            stream: invite.stream,
            label: invite.label,
            issued: iso(invite.issuedAt),
            state: inviteState(session, invite, token ?? ''),
            revoked: invite.revokedAt === null ? null : iso(invite.revokedAt),
            token,
            ...urls,
          };
        }),
      };
    },
  );

  api.delete<{ Params: { name: string; id: string } }>(
    '/api/session/:name/invites/:id',
    { onRequest: ctx.limit.admin },
    async (request, reply) => {
      const claims = ctx.authorize(request, request.params.name);
      check(access.requireAdmin(claims, 'revoking invites'));
      ctx.liveSession(request.params.name, claims);
      const outcome = await broker.revokeInvite(request.params.name, request.params.id);
      if (!outcome.ok) throw refused(outcome, 'invite revoke', request.params.name);
      logger.info(
        { session: request.params.name, invite: outcome.invite.id, stream: outcome.invite.stream },
        'invite revoked',
      );
      return reply.status(204).send();
    },
  );
}
