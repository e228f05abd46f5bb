import { Gauge, createHttpApp, installHostGuard, type Logger, type Registry } from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import { PUNCH_VERSION } from '../../protocol/schemas.ts';
import { registerRelayMetrics } from './relay-metrics.ts';
import type { RelayService } from './relay-service.ts';
import type { UdpRelay } from './udp-relay.ts';

/**
 * `punch relay`'s own HTTP port (docs/relay.md "Deploying a separate relay"): `GET /health` and
 * `GET /metrics`, read-only, so no credential; core's app (error bodies, 404) with core's Host guard (421
 * for a name this host does not answer to). `/metrics` carries the relay's counters under the names the
 * broker uses for its in-process relay (relay-metrics.ts), plus its registration in Redis.
 */
export interface RelayHttpDeps {
  logger: Logger;
  registry: Registry;
  relay: Pick<UdpRelay, 'allocations' | 'sendQueueDrops'>;
  service: Pick<RelayService, 'id' | 'registeredAt' | 'reachable' | 'ttlMs'>;
  capacity: number;
  /** Names besides IP literals, localhost and this machine's name (the relay's public address). */
  allowedHosts: readonly string[];
  /** Wall-clock ms (the registration's `at` is wall-clock). */
  now: () => number;
  /** Monotonic ms, for the uptime. */
  monotonicMs: () => number;
}

/** The registration as `/health` and `/metrics` see it: current while younger than its expiry. */
export function registrationState(
  service: RelayHttpDeps['service'],
  now: number,
): { current: boolean; ageMs: number | undefined } {
  const ageMs = service.registeredAt === undefined ? undefined : Math.max(0, now - service.registeredAt);
  return { current: ageMs !== undefined && ageMs < service.ttlMs, ageMs };
}

export function buildRelayHttpApp(d: RelayHttpDeps): FastifyInstance {
  const app = createHttpApp({ logger: d.logger });
  installHostGuard(app, () => d.allowedHosts);
  registerRelayMetrics(d.registry, d.relay);
  const registers = [d.registry];
  new Gauge({
    name: 'punch_relay_redis_up',
    help: "1 while this relay's connection to Redis is up",
    registers,
    collect() {
      this.set(d.service.reachable ? 1 : 0);
    },
  });
  new Gauge({
    name: 'punch_relay_registered',
    help: "1 while this relay's registration in Redis is current (the brokers can allocate on it)",
    registers,
    collect() {
      this.set(registrationState(d.service, d.now()).current ? 1 : 0);
    },
  });
  new Gauge({
    name: 'punch_relay_registration_age_seconds',
    help: 'Seconds since Redis last took this relay registration (NaN before the first)',
    registers,
    collect() {
      const { ageMs } = registrationState(d.service, d.now());
      this.set(ageMs === undefined ? NaN : ageMs / 1000);
    },
  });
  new Gauge({
    name: 'punch_relay_capacity',
    help: 'Allocations this relay takes at once (PUNCH_RELAY_MAX_ALLOCATIONS)',
    registers,
    collect() {
      this.set(d.capacity);
    },
  });
  const startedAt = d.monotonicMs();
  // fastify answers HEAD from the GET route, with the same status.
  app.get('/health', (_request, reply) => {
    const { current, ageMs } = registrationState(d.service, d.now());
    const reachable = d.service.reachable;
    const degraded = !current || !reachable;
    return reply.status(degraded ? 503 : 200).send({
      status: degraded ? 'degraded' : 'ok',
      version: PUNCH_VERSION,
      relay: d.service.id,
      uptime: Math.floor((d.monotonicMs() - startedAt) / 1000),
      redis: { reachable },
      registration: {
        state: ageMs === undefined ? 'never' : current ? 'current' : 'expired',
        at: d.service.registeredAt === undefined ? null : new Date(d.service.registeredAt).toISOString(),
        ageSeconds: ageMs === undefined ? null : Math.round(ageMs / 100) / 10,
        expiresAfterMs: d.service.ttlMs,
      },
      allocations: { held: d.relay.allocations.size, capacity: d.capacity },
    });
  });
  app.get('/metrics', async (_request, reply) =>
    reply.type(d.registry.contentType).send(await d.registry.metrics()),
  );
  return app;
}
