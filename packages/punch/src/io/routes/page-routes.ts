import { NAME_PARAM, RATE_LIMITED, type ParamDoc, type ResponseDoc } from '../../protocol/openapi.ts';
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
import { publicRoute, type RouteSpec } from './route-table.ts';
import { PUNCH_PACKAGE_VERSION, agentFileName } from '../agent-bundle.ts';
import { LINK_PLACEHOLDER, isLoopbackBase, loopbackBaseNote, renderJoinSteps } from '../join-steps.ts';

const agentFile = agentFileName(PUNCH_PACKAGE_VERSION);
const baseUrlNote = (base: string): string | undefined =>
  isLoopbackBase(base) ? loopbackBaseNote(base) : undefined;

const html = (description: string): ResponseDoc => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});
/** `?t=`: read leniently (anything but one valid token is "no token"), so documented, not validated. */
const PAGE_TOKEN: ParamDoc = {
  name: 't',
  in: 'query',
  required: false,
  description: 'Access token; a peer token is carried into the QR code, an admin token never is',
  schema: { type: 'string' },
};

/**
 * Pages (README "Pages"): the join page `/s/:name` and its QR `/s/:name/qr`, bucket `page`. A token in
 * `?t=` is checked exactly like a bearer token on the API (signature, session, expiry, incarnation), so a
 * page never accepts a token the API refuses. Without a valid token both answer the same for every name,
 * so they do not reveal whether a session exists. The QR carries `?t=` only for a peer token: an admin
 * token (which can close the session and read the passphrase) never goes into a code an encoder scans.
 */
export function pageRoutes(ctx: RouteContext): RouteSpec[] {
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

  return [
    publicRoute({
      method: 'GET',
      path: '/',
      operationId: null,
      auth: 'public',
      limit: 'page',
      responses: { '200': html('The create page') },
      handler: ({ reply }) => {
        void reply
          .header('content-security-policy', PAGE_CSP)
          .type('text/html; charset=utf-8')
          .send(renderCreatePage(baseUrlNote(ctx.deps.baseUrl())));
      },
    }),

    // Browsers ask for it on every page; no icon, and no 404 in their consoles.
    publicRoute({
      method: 'GET',
      path: '/favicon.ico',
      operationId: null,
      auth: 'public',
      limit: 'page',
      responses: { '204': { description: 'No icon' } },
      handler: ({ reply }) => {
        void reply.status(204).send();
      },
    }),

    publicRoute({
      method: 'GET',
      path: '/assets/:file',
      operationId: null,
      auth: 'public',
      limit: 'page',
      parameters: [{ name: 'file', in: 'path', schema: { type: 'string' } }],
      responses: { '200': { description: 'A page asset' }, '404': { description: 'not found' } },
      handler: ({ params, reply }) => {
        const file = params['file'] ?? '';
        const asset = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
        if (!asset) {
          void reply.status(404).type('text/plain; charset=utf-8').send('not found');
          return;
        }
        void reply.header('cache-control', 'no-cache').type(asset.type).send(asset.body);
      },
    }),

    publicRoute<{ t?: unknown }>({
      method: 'GET',
      path: '/s/:name',
      operationId: 'sessionPage',
      summary: 'Join page (HTML, mobile-first); the same prompt for unknown names without a valid token',
      auth: 'public',
      limit: 'page',
      parameters: [NAME_PARAM, PAGE_TOKEN],
      responses: {
        '200': html('Join page'),
        '410': html('The token is genuine but its session is closed or expired'),
        '429': RATE_LIMITED,
      },
      handler: ({ params, query, reply }) => {
        const name = params['name'] ?? '';
        const a = pageAccess(name, query.t);
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
    }),

    /**
     * The QR of the page URL: `t=` only when the caller presented a valid peer token (never an admin token:
     * a QR is meant for an encoder). SVG, or PNG with `?format=png`.
     */
    publicRoute<{ t?: unknown; format?: unknown }>({
      method: 'GET',
      path: '/s/:name/qr',
      operationId: 'sessionQr',
      summary: 'SVG QR code of the join page URL (with ?t= only for a valid peer token)',
      auth: 'public',
      limit: 'page',
      parameters: [NAME_PARAM, PAGE_TOKEN],
      responses: {
        '200': { description: 'QR code', content: { 'image/svg+xml': { schema: { type: 'string' } } } },
        '429': RATE_LIMITED,
      },
      handler: async ({ params, query, reply }) => {
        const name = params['name'] ?? '';
        const a = pageAccess(name, query.t);
        // Like the page: 404 for a name with no session, 410 for a closed one (a QR of a dead link helps nobody).
        const session = broker.get(name);
        if (!session) return reply.status(404).type('text/plain; charset=utf-8').send('no such session');
        if (a.kind === 'closed' || session.state === 'CLOSED') {
          return reply.status(410).type('text/plain; charset=utf-8').send('session closed');
        }
        const token = a.kind === 'valid' && a.claims.role === 'peer' ? a.token : undefined;
        const url = ctx.urls(name, token).url;
        if (query.format === 'png') return reply.type('image/png').send(await renderQrPng(url));
        return reply.type('image/svg+xml').send(await renderQrSvg(url));
      },
    }),
  ];
}
