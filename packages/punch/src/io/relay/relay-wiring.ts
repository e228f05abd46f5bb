import type { Clock, Logger, Registry } from '@broadcast-ops/core';
import type { PunchConfig } from '../../config.ts';
import type { RelayPort, SignallingHub } from '../../domain/signalling.ts';
import type { RedisCluster } from '../redis-cluster.ts';
import { RedisRelays } from './redis-relays.ts';
import { createInProcessRelay, relayPublicAddress, type InProcessRelay } from './relay-port.ts';
import { RelayService } from './relay-service.ts';

/**
 * The broker's relays (docs/relay.md "Deploying"). Without Redis: the in-process relay, if on. On Redis:
 * every relay registered there (`punch relay` processes, and this instance's own relay, registered under
 * the instance id when on and given a public address), reached through Redis, so any instance can allocate
 * on any relay and a relay's death is noticed by the owner.
 */
export interface BrokerRelays {
  /** What the signalling hub allocates on; undefined: no relay (streams stay direct). */
  port: RelayPort | undefined;
  /** Whether allocations outlive this instance (on Redis). */
  outlive: boolean;
  /** Connect the hub: allocation ends and relay losses reach it. */
  bind(hub: SignallingHub): void;
  /** Once listening (Redis: registers this instance's relay and starts reading the registrations). */
  start(): Promise<void>;
  /** This instance took over the sessions: adopt their allocations, re-allocate those on dead relays. */
  adopt(hub: SignallingHub): Promise<void>;
  close(): Promise<void>;
}

export function createBrokerRelays(options: {
  config: PunchConfig;
  cluster: RedisCluster | undefined;
  baseUrl: () => string;
  clock: Clock;
  registry: Registry;
  logger: Logger;
}): BrokerRelays {
  const { config, cluster, logger } = options;
  let hub: SignallingHub | undefined;
  const inProcess: InProcessRelay | undefined = config.relay.enabled
    ? createInProcessRelay({
        config: config.relay,
        baseUrl: options.baseUrl,
        clock: options.clock,
        registry: options.registry,
        // Without Redis the hub hears of ends directly; on Redis through the owner's bus (RelayService).
        onEnd: (id, reason) => {
          if (!cluster) hub?.relayEnded(id, reason);
        },
      })
    : undefined;
  if (!cluster) {
    return {
      port: inProcess?.port,
      outlive: false,
      bind: (h) => {
        hub = h;
      },
      start: () => Promise.resolve(),
      adopt: () => Promise.resolve(),
      close: async () => {
        await inProcess?.relay.close();
      },
    };
  }
  const relays = new RedisRelays({
    cluster,
    logger,
    registry: options.registry,
    onLost: (relay) => {
      if (cluster.isOwner) hub?.relayLost(relay);
    },
    onEnded: (id, reason) => hub?.relayEnded(id, reason),
  });
  let service: RelayService | undefined;
  return {
    port: relays,
    outlive: true,
    bind: (h) => {
      hub = h;
    },
    async start() {
      const address = relayPublicAddress(config.relay, options.baseUrl());
      if (inProcess && address !== undefined) {
        service = new RelayService({
          relay: inProcess.relay,
          url: config.redis.url ?? '',
          prefix: config.redis.prefix,
          address,
          ports: config.relay.ports,
          capacity: config.relay.maxAllocations,
          ttlMs: cluster.heartbeatTtlMs,
          kind: 'broker',
          logger,
          id: cluster.id,
        });
        await service.start();
      } else if (inProcess) {
        logger.warn(
          { setting: 'PUNCH_RELAY_PUBLIC_ADDRESS' },
          "this instance's relay has no public address; it is not offered to the other instances",
        );
      }
      await relays.poll();
      relays.start();
    },
    async adopt(h) {
      await relays.poll();
      h.adoptRelays((id) => relays.isUp(id));
    },
    async close() {
      relays.stop();
      await service?.stop();
      await inProcess?.relay.close();
    },
  };
}
