import { NAME_PARAM, errorResponse } from '../../protocol/openapi.ts';
import { healthQuery } from '../../protocol/schemas.ts';
import { fail, forbidden } from '../http-errors.ts';
import type { RouteContext } from './context.ts';
import { sessionRoute, type RouteSpec } from './route-table.ts';

/**
 * `GET /api/session/:name/health?stream=`: one link's health (docs/health.md): the verdict, advice and
 * alarm state, both ends' figures over 10 s and 60 s labelled sender/receiver, and the last 10 minutes of
 * reports per end for the console's graph. An admin token, or a peer token of that stream (spec "View own
 * stream health"). Read bucket.
 */
export function healthRoutes(ctx: RouteContext): RouteSpec[] {
  return [
    sessionRoute({
      method: 'GET',
      path: '/api/session/:name/health',
      operationId: 'streamHealth',
      summary:
        "One stream's health (docs/health.md): verdict, advice, alarms, each end's figures over 10 s and 60 s by role, and 10 minutes of reports per end",
      auth: 'token',
      limit: 'read',
      parameters: [NAME_PARAM],
      query: healthQuery,
      responses: {
        '200': {
          description:
            '{session, latency, stream, assessment (null before any report), history: {sender?, receiver?}}',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
        '400': errorResponse('INVALID_REQUEST (code INVALID_MESSAGE): unknown stream'),
      },
      handler: ({ claims, session, query }) => {
        const stream = query.stream ?? claims.stream ?? session.streams[0]?.name ?? '';
        if (claims.stream !== null && claims.stream !== stream) {
          throw forbidden(`this token is for stream "${claims.stream}" only`);
        }
        const view = ctx.deps.healthView?.(session.name, stream);
        if (!view) throw fail('INVALID_MESSAGE', `stream: no stream "${stream}" in this session`);
        return { session: session.name, latency: session.latency, ...view };
      },
    }),
  ];
}
