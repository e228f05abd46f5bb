import { buildOpenApi, type RouteDoc, VERSION_HEADER } from '../../protocol/openapi.ts';
import { PUNCH_VERSION, healthResponse } from '../../protocol/schemas.ts';
import { iso, type RouteContext } from './context.ts';
import { publicRoute, type RouteSpec } from './route-table.ts';

/**
 * Operations routes, public (no token): health (GET and HEAD, for monitors), the OpenAPI document and the
 * Prometheus metrics. Health is 200 `ok` while the store saves, 503 `degraded` from the first failed save
 * until a save (or the health check's own probe write) succeeds again. The document is generated from the
 * whole route table, `table()`, this group included.
 */
export function opsRoutes(ctx: RouteContext, table: () => readonly RouteDoc[]): RouteSpec[] {
  const { clock, broker, registry } = ctx.deps;
  const startedAt = clock.monotonicMs();
  let openapi: unknown;
  return [
    // fastify answers HEAD from the GET route, with the same status.
    publicRoute({
      method: 'GET',
      path: '/api/health',
      operationId: 'health',
      auth: 'public',
      responses: {
        '200': { description: 'Up, store saving', headers: VERSION_HEADER, json: healthResponse },
        '503': { description: 'Degraded: the store cannot save changes', json: healthResponse },
      },
      head: {
        operationId: 'healthHead',
        responses: { '200': { description: 'Up' }, '503': { description: 'Degraded' } },
      },
      handler: async ({ reply }) => {
        const info = ctx.deps.storeInfo ? await ctx.deps.storeInfo() : { kind: 'sqlite' as const };
        // An instance that relays to the owner has no saves of its own: its store is as good as Redis answers.
        const store = info.role === 'relay' ? { state: 'ok' as const } : await broker.storeHealth();
        const lost = info.kind === 'redis' && (info.reachable !== true || info.owner === null);
        const degraded = store.state !== 'ok' || lost;
        return reply.status(degraded ? 503 : 200).send({
          status: degraded ? 'degraded' : 'ok',
          version: PUNCH_VERSION,
          uptime: Math.floor((clock.monotonicMs() - startedAt) / 1000),
          store: {
            kind: info.kind,
            ...(store.state === 'ok'
              ? { state: 'ok' }
              : { state: 'failing', error: store.error, since: iso(store.since) }),
            ...(info.kind === 'redis'
              ? { reachable: info.reachable, instance: info.instance, role: info.role, owner: info.owner }
              : {}),
          },
        });
      },
    }),

    publicRoute({
      method: 'GET',
      path: '/api/openapi.json',
      operationId: 'openapi',
      auth: 'public',
      responses: { '200': { description: 'This document' } },
      handler: () => (openapi ??= buildOpenApi(table(), { serverUrl: ctx.deps.baseUrl() })),
    }),

    publicRoute({
      method: 'GET',
      path: '/metrics',
      operationId: 'metrics',
      summary: 'Prometheus metrics (text exposition format 0.0.4)',
      auth: 'public',
      responses: {
        '200': { description: 'Metrics', content: { 'text/plain': { schema: { type: 'string' } } } },
      },
      handler: async ({ reply }) => reply.type(registry.contentType).send(await registry.metrics()),
    }),
  ];
}
