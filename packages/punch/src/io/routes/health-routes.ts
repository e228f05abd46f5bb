import type { FastifyInstance } from 'fastify';
import { fail, forbidden } from '../http-errors.ts';
import type { RouteContext } from './context.ts';
import { NAME_PATTERN } from '../../protocol/schemas.ts';

/**
 * `GET /api/session/:name/health?stream=`: one link's health (docs/health.md): the verdict, advice and
 * alarm state, both ends' figures over 10 s and 60 s labelled sender/receiver, and the last 10 minutes of
 * reports per end for the console's graph. An admin token, or a peer token of that stream (spec "View own
 * stream health"). Read bucket.
 */
export function registerHealthRoutes(api: FastifyInstance, ctx: RouteContext): void {
  api.get<{ Params: { name: string }; Querystring: Record<string, unknown> }>(
    '/api/session/:name/health',
    { onRequest: ctx.limit.read },
    (request) => {
      const claims = ctx.authorize(request, request.params.name);
      const session = ctx.liveSession(request.params.name, claims);
      const asked = request.query['stream'];
      if (asked !== undefined && (typeof asked !== 'string' || !NAME_PATTERN.test(asked))) {
        throw fail('INVALID_MESSAGE', 'stream: must be a stream name');
      }
      const stream = asked ?? claims.stream ?? session.streams[0]?.name ?? '';
      if (claims.stream !== null && claims.stream !== stream) {
        throw forbidden(`this token is for stream "${claims.stream}" only`);
      }
      const view = ctx.deps.healthView?.(session.name, stream);
      if (!view) throw fail('INVALID_MESSAGE', `stream: no stream "${stream}" in this session`);
      return { session: session.name, latency: session.latency, ...view };
    },
  );
}
