/**
 * Builds the status service from its configuration and the process's context (docs/ARCHITECTURE.md "One
 * skeleton"): the fleet, its metrics, the poller and the HTTP app, all on the context's `Clock`. Nothing
 * listens before `start`.
 */
import {
  listeningUrl,
  packageVersion,
  type Service,
  type ServiceContext,
  type ServiceHealth,
} from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import type { StatusConfig } from './config.ts';
import { Fleet } from './domain/fleet.ts';
import { buildStatusApp } from './io/http-app.ts';
import { statusMetrics } from './io/metrics.ts';
import { Poller } from './io/poller.ts';

/** core's `Service`, with its HTTP app for `inject` (nothing listens before `start`). */
export interface StatusService extends Service {
  readonly app: FastifyInstance;
}

export function createStatusService(context: ServiceContext<StatusConfig>): StatusService {
  const { config, clock, logger, env } = context;
  const fleet = new Fleet(config.services);
  const { registry, onPoll } = statusMetrics(fleet);
  const poller = new Poller({ config, fleet, clock, logger, env, onPoll });
  const startedAtMs = clock.monotonicMs();
  const health = (): ServiceHealth => ({
    status: 'ok',
    uptime: Math.floor((clock.monotonicMs() - startedAtMs) / 1000),
    services: fleet.list().length,
    overall: fleet.overall(),
  });
  const app = buildStatusApp({
    fleet,
    registry,
    clock,
    logger,
    version: packageVersion() ?? '0.0.0',
    pollIntervalMs: config.pollIntervalMs,
    health,
    notes: config.notes,
  });
  return {
    app,
    async start() {
      await app.listen({ host: config.listen.host, port: config.listen.port });
      poller.start();
    },
    async close() {
      poller.stop();
      await app.close();
    },
    health,
    describe: () => ({
      url: listeningUrl(app),
      services: config.services.map((s) => s.name),
      pollIntervalMs: config.pollIntervalMs,
    }),
  };
}
