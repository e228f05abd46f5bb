import type { Clock, Registry } from '@broadcast-ops/core';
import type { PunchConfig } from '../../config.ts';
import type { RelayPort } from '../../domain/signalling.ts';
import { registerRelayMetrics, registerRelayPathMetrics } from './relay-metrics.ts';
import { UdpRelay } from './udp-relay.ts';

/**
 * The broker's in-process relay (docs/relay.md "Running inside the broker"): a UdpRelay from the `relay`
 * config, offered to the signalling hub as its RelayPort, with its counters on `/metrics`.
 */
export interface InProcessRelay {
  port: RelayPort;
  relay: UdpRelay;
}

/**
 * The address the peers are told to send to: `relay.publicAddress`, else the base URL's host unless that
 * is a loopback name (a peer elsewhere would send to itself); undefined when neither is usable.
 */
export function relayPublicAddress(config: PunchConfig['relay'], baseUrl: string): string | undefined {
  if (config.publicAddress) return config.publicAddress;
  let host: string;
  try {
    host = new URL(baseUrl).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
  if (host === 'localhost' || host === '::1' || /^127\./.test(host) || host === '') return undefined;
  return host;
}

export function createInProcessRelay(options: {
  config: PunchConfig['relay'];
  baseUrl: () => string;
  clock: Clock;
  registry: Registry;
  onEnd: (id: string, reason: string) => void;
}): InProcessRelay {
  const { config } = options;
  const [lo, hi] = config.ports.split('-').map(Number) as [number, number];
  const relay = new UdpRelay({
    host: config.host,
    portRange: [lo, hi],
    clock: options.clock,
    limits: {
      allow: config.allow,
      maxAllocations: config.maxAllocations,
      defaultBytesPerSecond: config.bytesPerSecond,
      defaultLifetimeMs: config.lifetimeMs,
    },
  });
  relay.onEnd = options.onEnd;
  const port: RelayPort = {
    async allocate(req) {
      const address = relayPublicAddress(config, options.baseUrl());
      if (address === undefined) return { ok: false, reason: 'no_public_address' };
      const r = await relay.allocate(req);
      return r.ok ? { ok: true, id: r.id, address, ports: r.ports } : { ok: false, reason: r.reason };
    },
    release(id) {
      relay.release(id);
    },
    renew(id, lifetimeMs) {
      relay.renew(id, lifetimeMs);
    },
    figures(id) {
      const directions = relay.pathFigures(id);
      return directions ? { at: options.clock.now(), directions } : undefined;
    },
  };
  registerRelayMetrics(options.registry, relay);
  registerRelayPathMetrics(options.registry, relay);
  return { port, relay };
}
