import type { FastifyInstance } from 'fastify';
import type { TokenClaims } from '../../protocol/token.ts';
import { renderQrSvg, renderSessionPage, type PageView } from '../pages.ts';
import type { RouteContext } from '../http-api.ts';

/**
 * Pages (README "Pages"): the join page `/s/:name` and its QR `/s/:name/qr`, bucket `page`. A token in
 * `?t=` is checked exactly like a bearer token on the API (signature, session, expiry, incarnation), so a
 * page never accepts a token the API refuses. Without a valid token both answer the same for every name,
 * so they do not reveal whether a session exists. The QR carries `?t=` only for a peer token: an admin
 * token (which can close the session and read the passphrase) never goes into a code an encoder scans.
 */
export function registerPageRoutes(api: FastifyInstance, ctx: RouteContext): void {
  const { broker, clock } = ctx.deps;

  type PageAccess =
    { kind: 'none' } | { kind: 'closed' } | { kind: 'valid'; token: string; claims: TokenClaims };
  const pageAccess = (name: string, t: unknown): PageAccess => {
    if (typeof t !== 'string' || t === '') return { kind: 'none' };
    const auth = ctx.access.authenticate(t, name, clock.now());
    if (!auth.ok) return auth.code === 'SESSION_EXPIRED' ? { kind: 'closed' } : { kind: 'none' };
    const live = ctx.access.liveSession(broker.get(name), name, auth.claims);
    return live.ok ? { kind: 'valid', token: t, claims: auth.claims } : { kind: 'closed' };
  };

  api.get<{ Params: { name: string }; Querystring: { t?: string } }>(
    '/s/:name',
    { onRequest: ctx.limit.page },
    (request, reply) => {
      const name = request.params.name;
      const a = pageAccess(name, request.query.t);
      let view: PageView;
      if (a.kind === 'valid')
        view = a.claims.role === 'admin' ? { kind: 'admin' } : { kind: 'peer', token: a.token };
      else view = { kind: a.kind === 'closed' ? 'closed' : 'join' };
      void reply
        .status(a.kind === 'closed' ? 410 : 200)
        .type('text/html; charset=utf-8')
        .send(renderSessionPage(name, view));
    },
  );

  api.get<{ Params: { name: string }; Querystring: { t?: string } }>(
    '/s/:name/qr',
    { onRequest: ctx.limit.page },
    async (request, reply) => {
      const name = request.params.name;
      const a = pageAccess(name, request.query.t);
      const token = a.kind === 'valid' && a.claims.role === 'peer' ? a.token : undefined;
      return reply.type('image/svg+xml').send(await renderQrSvg(ctx.urls(name, token).url));
    },
  );
}
