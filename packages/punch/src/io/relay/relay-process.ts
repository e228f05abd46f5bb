import { createMetricsRegistry, listeningUrl, systemClock, type Logger } from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import type { PunchConfig } from '../../config.ts';
import { buildRelayHttpApp } from './relay-http.ts';
import { registerRelayPathMetrics } from './relay-metrics.ts';
import { RelayService } from './relay-service.ts';
import { UdpRelay } from './udp-relay.ts';

/**
 * `punch relay` (docs/relay.md "Deploying a separate relay"): the opaque UDP relay on its own, reached by
 * the brokers through Redis. It reads the `relay` and `redis` settings only: no secret, no store, no
 * passphrase. Its registration expires `PUNCH_REDIS_LEASE_MS` after it stops renewing it (a crash, a cut).
 * With `PUNCH_RELAY_HTTP_PORT` it also serves `/health` and `/metrics` (relay-http.ts).
 */
export interface RelayProcess {
  id: string;
  /** The URL of its `/health` and `/metrics`, when its HTTP port is on. */
  http: string | undefined;
  close(): Promise<void>;
}

export async function startRelayProcess(config: PunchConfig, logger: Logger): Promise<RelayProcess> {
  const url = config.redis.url;
  const address = config.relay.publicAddress;
  if (url === undefined)
    throw new Error('PUNCH_REDIS_URL is not set: a separate relay is reached through Redis');
  if (address === undefined)
    throw new Error('PUNCH_RELAY_PUBLIC_ADDRESS is not set: the address the peers send their SRT to');
  const [lo, hi] = config.relay.ports.split('-').map(Number) as [number, number];
  const relay = new UdpRelay({
    host: config.relay.host,
    portRange: [lo, hi],
    limits: {
      allow: config.relay.allow,
      maxAllocations: config.relay.maxAllocations,
      defaultBytesPerSecond: config.relay.bytesPerSecond,
      defaultLifetimeMs: config.relay.lifetimeMs,
    },
  });
  const service = new RelayService({
    relay,
    url,
    prefix: config.redis.prefix,
    address,
    ports: config.relay.ports,
    capacity: config.relay.maxAllocations,
    ttlMs: Math.max(3_000, config.redis.leaseMs),
    kind: 'process',
    logger,
  });
  let app: FastifyInstance | undefined;
  try {
    await service.start();
    const { host, port } = config.relay.http;
    if (port !== undefined) {
      const registry = createMetricsRegistry();
      // What the relay measured on its streams (docs/relay.md "What the relay measures"), beside the counters.
      registerRelayPathMetrics(registry, relay);
      app = buildRelayHttpApp({
        logger,
        registry,
        relay,
        service,
        capacity: config.relay.maxAllocations,
        allowedHosts: [address, host],
        now: () => systemClock.now(),
        monotonicMs: () => systemClock.monotonicMs(),
      });
      await app.listen({ host, port });
    }
  } catch (err) {
    await app?.close();
    await relay.close();
    service.halt();
    throw err;
  }
  const http = app ? listeningUrl(app) : undefined;
  return {
    id: service.id,
    http,
    async close() {
      await app?.close();
      await service.stop();
      await relay.close();
    },
  };
}
