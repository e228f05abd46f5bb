import type { Refusal } from '../../domain/outcome.ts';
import { connectionStrings } from '../../protocol/connection-strings.ts';
import {
  NAME_PARAM,
  RATE_LIMITED,
  SERVER_ERROR,
  VERSION_HEADER,
  errorResponse,
  retryLaterResponse,
} from '../../protocol/openapi.ts';
import {
  MAX_TURNSTILE_TOKEN_LENGTH,
  connectResponse,
  createSessionResponse,
  inviteList,
  sessionView,
  tokenResponse,
} from '../../protocol/schemas.ts';
import type { InviteRecord, SessionRecord } from '../../domain/session.ts';
import type { INVITE_STATES } from '../../protocol/schemas.ts';
import { fail, httpErrorOf } from '../http-errors.ts';
import { tokenFingerprint } from '../ws-server.ts';
import { iso, type RouteContext } from './context.ts';
import { publicRoute, sessionRoute, type RouteSpec } from './route-table.ts';
import { sessionViewOf } from './session-view.ts';

/**
 * Session routes (spec "Endpoints"): create, view, extend, close, connection strings, peer tokens and their
 * invites (README "Invites"). Buckets: create (POST), read (GET), admin (DELETE, PATCH, /connect, /token,
 * /invites). Declared as a table (route-table.ts): registration, validation and the OpenAPI document
 * come from it.
 */
type InviteState = (typeof INVITE_STATES)[number];

const storeFailed = retryLaterResponse(
  'STORE_UNAVAILABLE: the change could not be saved (nothing changed; header Retry-After)',
);

export function sessionRoutes(ctx: RouteContext): RouteSpec[] {
  const { deps, schemas } = ctx;
  const { broker, signer, logger } = deps;

  /** A refusal as its HTTP error; a failed save is also logged with its cause (the client sees "retry"). */
  const refused = (r: Refusal, what: string, session: string): Error => {
    if (r.code === 'STORE_FAILED') {
      logger.error({ session, store: broker.storeState }, `${what}: not saved, rolled back`);
    }
    return httpErrorOf(r);
  };

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

  return [
    // POST /api/session: no bearer needed (the creator receives the admin token). The 201 body is
    // serialised by fast-json-stringify from its response schema (the hot path of creates).
    publicRoute({
      method: 'POST',
      path: '/api/session',
      operationId: 'createSession',
      summary: 'Create a session; the response carries the admin token (once)',
      auth: 'public',
      limit: 'create',
      body: { schema: schemas.createSessionRequest, required: true },
      serialize: 201,
      responses: {
        '201': { description: 'Created', headers: VERSION_HEADER, json: createSessionResponse },
        '400': errorResponse('INVALID_REQUEST (code INVALID_MESSAGE): bad field or non-JSON body'),
        '413': errorResponse(
          `PAYLOAD_TOO_LARGE (code INVALID_MESSAGE): body over ${deps.config.limits.bodyLimit} bytes`,
        ),
        '415': errorResponse(
          'UNSUPPORTED_MEDIA_TYPE (code INVALID_MESSAGE): Content-Type is not application/json',
        ),
        '403': errorResponse('TURNSTILE_FAILED'),
        '409': errorResponse('SESSION_EXISTS'),
        '429': RATE_LIMITED,
        '500': SERVER_ERROR,
        '503': errorResponse('SESSION_LIMIT or STORE_UNAVAILABLE (header Retry-After)'),
      },
      // Turnstile before the body's fields (README "Turnstile").
      precheck: async ({ request }) => {
        if (!deps.turnstile) return;
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
      },
      handler: async ({ request, reply, body }) => {
        const { name, streams, latency, ttl } = body;
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
    }),

    sessionRoute({
      method: 'GET',
      path: '/api/session/:name',
      operationId: 'getSession',
      auth: 'token',
      limit: 'read',
      parameters: [NAME_PARAM],
      responses: { '200': { description: 'Session view', json: sessionView } },
      // A stream-scoped token sees only its stream (spec: "A token for one stream cannot access another stream").
      handler: ({ claims, session }) =>
        sessionViewOf(session, claims.stream, broker, deps.clock.now(), deps.relayFigures),
    }),

    // PATCH: extend a live session (README "Lifetime"), also one past its TTL that media keeps open.
    sessionRoute({
      method: 'PATCH',
      path: '/api/session/:name',
      operationId: 'extendSession',
      summary: 'Extend a live session (admin token): it expires ttl seconds from now; tokens stay valid',
      auth: { admin: 'extending a session' },
      limit: 'admin',
      parameters: [NAME_PARAM],
      body: { schema: schemas.extendRequest, required: true },
      responses: {
        '200': { description: 'Extended; the session view', json: sessionView },
        '400': errorResponse(
          'INVALID_REQUEST (code INVALID_MESSAGE): ttl missing, not an integer, or above the maximum',
        ),
        '503': storeFailed,
      },
      handler: async ({ session, body }) => {
        // Whole seconds, like a created session's expiry.
        const expiresAt = Math.ceil((deps.clock.now() + body.ttl * 1000) / 1000) * 1000;
        const outcome = await broker.extend(session.name, expiresAt);
        if (!outcome.ok) throw refused(outcome, 'session extend', session.name);
        logger.info({ session: session.name, ttl: body.ttl, expiresAt }, 'session extended');
        return sessionViewOf(outcome.session, null, broker, deps.clock.now(), deps.relayFigures);
      },
    }),

    sessionRoute({
      method: 'DELETE',
      path: '/api/session/:name',
      operationId: 'closeSession',
      auth: { admin: 'closing a session' },
      limit: 'admin',
      parameters: [NAME_PARAM],
      responses: {
        '204': { description: 'Closed; peers receive session_closed' },
        '503': storeFailed,
      },
      handler: async ({ session, reply }) => {
        // Logged once, with its reason, by the broker's `session_closed` subscriber (server.ts).
        const outcome = await broker.close(session.name, 'admin_closed');
        if (!outcome.ok) throw refused(outcome, 'session close', session.name);
        return reply.status(204).send();
      },
    }),

    // The strings carry the passphrase: admin tokens only (spec "Passphrase handling").
    sessionRoute({
      method: 'GET',
      path: '/api/session/:name/connect',
      operationId: 'connectionStrings',
      summary: 'Connection strings for both peers (admin token: they contain the passphrase)',
      auth: { admin: '/connect' },
      limit: 'admin',
      parameters: [NAME_PARAM],
      query: schemas.connectQuery,
      responses: {
        '200': { description: 'Strings per format', json: connectResponse },
        '400': errorResponse('INVALID_REQUEST (code INVALID_MESSAGE): unknown stream or role'),
        '409': errorResponse('STREAM_NOT_READY: both peers must register first'),
      },
      handler: ({ session, query }) => {
        const streamName = query.stream ?? session.streams[0]?.name;
        const stream = session.streams.find((s) => s.name === streamName);
        if (!stream) throw fail('INVALID_MESSAGE', `stream: no stream "${streamName}" in this session`);
        const { peerA, peerB } = stream;
        if (!peerA || !peerB) {
          throw fail('STREAM_NOT_READY', `stream "${stream.name}": both peers must register before /connect`);
        }
        const roleA = query.role;
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
    }),

    sessionRoute({
      method: 'POST',
      path: '/api/session/:name/token',
      operationId: 'issuePeerToken',
      summary: 'Issue a peer token scoped to one stream (admin only)',
      auth: { admin: 'issuing peer tokens' },
      limit: 'admin',
      parameters: [NAME_PARAM],
      body: { schema: schemas.tokenRequest, required: false },
      responses: {
        '201': { description: 'Peer token', json: tokenResponse },
        '400': errorResponse(
          'INVALID_REQUEST (code INVALID_MESSAGE): unknown stream, or the session holds its maximum of invites',
        ),
      },
      // Past its lifetime before the body is looked at: nothing to invite to.
      precheck: ({ session }) => {
        if (!broker.admits(session)) {
          throw fail(
            'SESSION_EXPIRED',
            'the session is past its lifetime (kept open for its running links): extend it to invite',
          );
        }
      },
      handler: async ({ session, body, reply }) => {
        const stream = body.stream === undefined ? (session.streams[0]?.name ?? null) : body.stream;
        if (stream !== null && !session.streams.some((s) => s.name === stream)) {
          throw fail('INVALID_MESSAGE', `stream: no stream "${stream}" in this session`);
        }
        // README "Invites": recorded (saved) before the token is handed out, so it can be listed and revoked.
        const outcome = await broker.issueInvite(session.name, stream, body.label ?? null);
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
    }),

    sessionRoute({
      method: 'GET',
      path: '/api/session/:name/invites',
      operationId: 'listInvites',
      summary: 'Every peer token issued for the session, oldest first, with its state (admin only)',
      auth: { admin: 'listing invites' },
      limit: 'admin',
      parameters: [NAME_PARAM],
      responses: { '200': { description: 'Invites', json: inviteList } },
      handler: ({ session }) => ({
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
      }),
    }),

    sessionRoute({
      method: 'DELETE',
      path: '/api/session/:name/invites/:id',
      operationId: 'revokeInvite',
      summary:
        'Revoke an invite (admin only): its token is refused from now on and its connections are closed (4401)',
      auth: { admin: 'revoking invites' },
      limit: 'admin',
      parameters: [
        NAME_PARAM,
        { name: 'id', in: 'path', schema: { type: 'string' }, description: 'Invite id' },
      ],
      responses: {
        '204': { description: 'Revoked (also when it already was)' },
        '400': errorResponse('INVALID_REQUEST (code INVALID_MESSAGE): no such invite in this session'),
      },
      handler: async ({ session, params, reply }) => {
        const outcome = await broker.revokeInvite(session.name, params['id'] ?? '');
        if (!outcome.ok) throw refused(outcome, 'invite revoke', session.name);
        logger.info(
          { session: session.name, invite: outcome.invite.id, stream: outcome.invite.stream },
          'invite revoked',
        );
        return reply.status(204).send();
      },
    }),
  ];
}
