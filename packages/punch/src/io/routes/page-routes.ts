import type { FastifyInstance } from 'fastify';
import type { TokenClaims } from '../../protocol/token.ts';
import {
  ASSETS,
  PAGE_CSP,
  renderConsole,
  renderCreatePage,
  renderQrPng,
  renderQrSvg,
  renderSessionPage,
  renderUnknown,
  type PageView,
} from '../pages.ts';
import type { RouteContext } from './context.ts';
import { PUNCH_PACKAGE_VERSION, agentFileName } from '../agent-bundle.ts';
import { LINK_PLACEHOLDER, isLoopbackBase, loopbackBaseNote, renderJoinSteps } from '../join-steps.ts';

const agentFile = agentFileName(PUNCH_PACKAGE_VERSION);
const baseUrlNote = (base: string): string | undefined =>
  isLoopbackBase(base) ? loopbackBaseNote(base) : undefined;

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

  api.get('/', { onRequest: ctx.limit.page }, (_request, reply) => {
    void reply
      .header('content-security-policy', PAGE_CSP)
      .type('text/html; charset=utf-8')
      .send(renderCreatePage(baseUrlNote(ctx.deps.baseUrl())));
  });

  // Browsers ask for it on every page; no icon, and no 404 in their consoles.
  api.get('/favicon.ico', { onRequest: ctx.limit.page }, (_request, reply) => {
    void reply.status(204).send();
  });

  api.get<{ Params: { file: string } }>('/assets/:file', { onRequest: ctx.limit.page }, (request, reply) => {
    const asset = Object.hasOwn(ASSETS, request.params.file) ? ASSETS[request.params.file] : undefined;
    if (!asset) {
      void reply.status(404).type('text/plain; charset=utf-8').send('not found');
      return;
    }
    void reply.header('cache-control', 'no-cache').type(asset.type).send(asset.body);
  });

  api.get<{ Params: { name: string }; Querystring: { t?: string } }>(
    '/s/:name',
    { onRequest: ctx.limit.page },
    (request, reply) => {
      const name = request.params.name;
      const a = pageAccess(name, request.query.t);
      void reply.header('content-security-policy', PAGE_CSP).type('text/html; charset=utf-8');
      if (a.kind === 'valid') {
        // The page of a token: never stored by a cache, and no Referer with its address to the links it has.
        void reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
        const base = ctx.deps.baseUrl();
        const admin = a.claims.role === 'admin';
        const extra = admin
          ? { note: baseUrlNote(base) }
          : { joinSteps: renderJoinSteps({ link: LINK_PLACEHOLDER, base, agentFile }) };
        void reply.send(renderConsole(name, admin ? 'admin' : 'peer', '', extra));
        return;
      }
      const session = broker.get(name);
      if (!session) {
        void reply.status(404).send(renderUnknown(name));
        return;
      }
      const closed = a.kind === 'closed' || session.state === 'CLOSED';
      const view: PageView = { kind: closed ? 'closed' : 'join' };
      void reply.status(closed ? 410 : 200).send(renderSessionPage(name, view));
    },
  );

  /**
   * The QR of the page URL: `t=` only when the caller presented a valid peer token (never an admin token:
   * a QR is meant for an encoder). SVG, or PNG with `?format=png`.
   */
  api.get<{ Params: { name: string }; Querystring: { t?: string; format?: string } }>(
    '/s/:name/qr',
    { onRequest: ctx.limit.page },
    async (request, reply) => {
      const name = request.params.name;
      const a = pageAccess(name, request.query.t);
      // Like the page: 404 for a name with no session, 410 for a closed one (a QR of a dead link helps nobody).
      const session = broker.get(name);
      if (!session) return reply.status(404).type('text/plain; charset=utf-8').send('no such session');
      if (a.kind === 'closed' || session.state === 'CLOSED') {
        return reply.status(410).type('text/plain; charset=utf-8').send('session closed');
      }
      const token = a.kind === 'valid' && a.claims.role === 'peer' ? a.token : undefined;
      const url = ctx.urls(name, token).url;
      if (request.query.format === 'png') return reply.type('image/png').send(await renderQrPng(url));
      return reply.type('image/svg+xml').send(await renderQrSvg(url));
    },
  );
}
