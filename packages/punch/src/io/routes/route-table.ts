import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type * as z from '@broadcast-ops/core/zod';
import type { LimitGroup } from '../../domain/rate-limiter.ts';
import type { SessionRecord } from '../../domain/session.ts';
import { jsonSchemaOf, type RouteDoc } from '../../protocol/openapi.ts';
import { describeIssues } from '../../protocol/schemas.ts';
import type { TokenClaims } from '../../protocol/token.ts';
import { check, fail } from '../http-errors.ts';
import type { RouteContext } from './context.ts';

/**
 * The route table (docs/protocol.md "Route table"): each route group declares its routes once, as data
 * (`RouteDoc`: method, path, operationId, summary, parameters, query and body schemas, responses, auth)
 * plus its per-client bucket and handler. From that one declaration `registerRoutes` registers the route
 * on fastify and runs the checks in the broker's order (README "Errors"): rate limit (`onRequest`, before
 * the body is read), token, admin role, session lookup, the route's own `precheck`, then query and body
 * against their schemas; and protocol/openapi.ts writes the document.
 */

type Params = Record<string, string>;

/** What a handler receives: the request, its reply, and its checked inputs. */
export interface PublicCall<Q, B> {
  request: FastifyRequest<{ Params: Params }>;
  reply: FastifyReply;
  params: Params;
  /** The query parsed by the route's `query` schema (the raw query when it declares none). */
  query: Q;
  /** The body parsed by the route's `body` schema (`undefined` when it declares none). */
  body: B;
}

/** A token route's call: also the token's verified claims and the live session they name. */
export interface SessionCall<Q, B> extends PublicCall<Q, B> {
  claims: TokenClaims;
  session: SessionRecord;
}

type Reply = unknown;

interface SpecBase extends RouteDoc {
  /** The per-client bucket (spec "Limits"); none for the operations routes monitors poll. */
  limit?: LimitGroup;
  /** The status whose declared JSON response fastify serialises from its schema (fast-json-stringify). */
  serialize?: number;
}

/** One route of the table, its types erased (see `publicRoute` and `sessionRoute`). */
export interface RouteSpec extends SpecBase {
  run: (ctx: RouteContext, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => Reply;
}

type Inputs<Q, B> = {
  query?: z.ZodMiniType<Q> & z.ZodMiniObject;
  body?: { schema: z.ZodMiniType<B>; required: boolean };
};

/** Query and body parsed by their declared schemas, or 400 INVALID_MESSAGE naming the field. */
function parseInputs<Q, B>(spec: Inputs<Q, B>, request: FastifyRequest): { query: Q; body: B } {
  let query = request.query as Q;
  if (spec.query) {
    const q = spec.query.safeParse(request.query);
    if (!q.success) throw fail('INVALID_MESSAGE', describeIssues(q.error, 'query'));
    query = q.data;
  }
  let body = undefined as B;
  if (spec.body) {
    const b = spec.body.schema.safeParse(spec.body.required ? request.body : (request.body ?? {}));
    if (!b.success) throw fail('INVALID_MESSAGE', describeIssues(b.error));
    body = b.data;
  }
  return { query, body };
}

/** Run `next` after `pre`, synchronously when `pre` is not a promise (a sync handler stays sync). */
function after(pre: unknown, next: () => Reply): Reply {
  return pre instanceof Promise ? pre.then(next) : next();
}

/** A route without a token. */
export function publicRoute<Q = Record<string, unknown>, B = undefined>(
  spec: SpecBase &
    Inputs<Q, B> & {
      auth: 'public';
      precheck?: (call: Omit<PublicCall<unknown, unknown>, 'query' | 'body'>) => unknown;
      handler: (call: PublicCall<Q, B>) => Reply;
    },
): RouteSpec {
  const { handler, precheck, ...doc } = spec;
  return {
    ...doc,
    run: (_ctx, request, reply) => {
      const base = { request, reply, params: request.params };
      return after(precheck?.(base), () => handler({ ...base, ...parseInputs(spec, request) }));
    },
  };
}

/** A route of one session, with its token (`auth: 'token'`) or an admin token (`auth: {admin}`). */
export function sessionRoute<Q = Record<string, unknown>, B = undefined>(
  spec: SpecBase &
    Inputs<Q, B> & {
      auth: 'token' | { admin: string };
      precheck?: (call: Omit<SessionCall<unknown, unknown>, 'query' | 'body'>) => unknown;
      handler: (call: SessionCall<Q, B>) => Reply;
    },
): RouteSpec {
  const { handler, precheck, ...doc } = spec;
  const auth = spec.auth;
  return {
    ...doc,
    run: (ctx, request, reply) => {
      const name = request.params['name'] ?? '';
      const claims = ctx.authorize(request, name);
      if (typeof auth === 'object') check(ctx.access.requireAdmin(claims, auth.admin));
      const session = ctx.liveSession(name, claims);
      const base = { request, reply, params: request.params, claims, session };
      return after(precheck?.(base), () => handler({ ...base, ...parseInputs(spec, request) }));
    },
  };
}

/** The fastify response schema of a declared JSON response (its named definition, inlined). */
function serializerSchema(spec: RouteSpec): Record<number, unknown> | undefined {
  if (spec.serialize === undefined) return undefined;
  const json = spec.responses[String(spec.serialize)]?.json;
  if (!json) throw new Error(`route table: ${spec.method} ${spec.path} serialises an undeclared response`);
  const defs: Record<string, unknown> = {};
  const schema = jsonSchemaOf(json, 'output', defs);
  const ref = typeof schema['$ref'] === 'string' ? schema['$ref'].replace('#/$defs/', '') : undefined;
  return { [spec.serialize]: ref === undefined ? schema : defs[ref] };
}

/** Register every route of the table on fastify (an upgrade is the WebSocket server's, not fastify's). */
export function registerRoutes(api: FastifyInstance, ctx: RouteContext, table: readonly RouteSpec[]): void {
  for (const spec of table) {
    if (spec.upgrade) continue;
    const response = serializerSchema(spec);
    api.route<{ Params: Params }>({
      method: spec.method,
      url: spec.path,
      ...(spec.limit ? { onRequest: ctx.limit[spec.limit] } : {}),
      ...(response ? { schema: { response } } : {}),
      handler: (request, reply) => spec.run(ctx, request, reply),
    });
  }
}

/** A WebSocket upgrade served by io/ws-server.ts on the HTTP server: in the table for the document only. */
export function upgradeRoute(doc: RouteDoc & { upgrade: true }): RouteSpec {
  return {
    ...doc,
    run: () => {
      throw new Error(`${doc.path} is an upgrade, served by the WebSocket server`);
    },
  };
}
