import type { FastifyInstance } from 'fastify';
import { buildOpenApi } from '../../protocol/openapi.ts';
import { PUNCH_VERSION } from '../../protocol/schemas.ts';
import { iso, type RouteContext } from './context.ts';

/**
 * Operations routes, public (no token): health (GET and HEAD, for monitors), the OpenAPI document and the
 * Prometheus metrics. Health is 200 `ok` while the store saves, 503 `degraded` from the first failed save
 * until a save (or the health check's own probe write) succeeds again.
 */
export function registerOpsRoutes(api: FastifyInstance, ctx: RouteContext): void {
  const { clock, broker, registry } = ctx.deps;
  const startedAt = clock.monotonicMs();
  // fastify answers HEAD from the GET route, with the same status.
  api.get('/api/health', async (_request, reply) => {
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
  });

  let openapi: unknown;
  api.get('/api/openapi.json', () => {
    openapi ??= buildOpenApi(ctx.schemas, {
      serverUrl: ctx.deps.baseUrl(),
      maxBodyBytes: ctx.deps.config.limits.bodyLimit,
    });
    return openapi;
  });

  api.get('/metrics', async (_request, reply) => {
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}
