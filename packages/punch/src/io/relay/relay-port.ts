import { Counter, Gauge, type Clock, type Registry } from '@broadcast-ops/core';
import type { PunchConfig } from '../../config.ts';
import type { RelayPort } from '../../domain/signalling.ts';
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
  };
  const registers = [options.registry];
  new Gauge({
    name: 'punch_relay_allocations',
    help: 'Relay allocations held now (two UDP ports each)',
    registers,
    collect() {
      this.set(relay.allocations.size);
    },
  });
  // The relay keeps its own totals (relay-allocations.ts); each scrape shows them as they are.
  new Counter({
    name: 'punch_relay_dropped_datagrams_total',
    help: 'Datagrams the relay dropped, by reason (docs/relay.md "Counters")',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      const drops: Record<string, number> = {
        ...relay.allocations.drops,
        send_queue: relay.sendQueueDrops,
      };
      for (const [reason, n] of Object.entries(drops)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: 'punch_relay_allocations_ended_total',
    help: 'Relay allocations ended, by reason (released, idle, expired)',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(relay.allocations.ended)) this.inc({ reason }, n);
    },
  });
  return { port, relay };
}
