import { Counter, Gauge, type Registry } from '@broadcast-ops/core';
import type { UdpRelay } from './udp-relay.ts';

/**
 * A relay's counters on a `/metrics` registry (docs/relay.md "Counters"), the same names wherever the relay
 * runs: inside the broker (relay-port.ts) or as `punch relay` (relay-http.ts). The relay keeps its own totals
 * (relay-allocations.ts); each scrape shows them as they are.
 */
export function registerRelayMetrics(
  registry: Registry,
  relay: Pick<UdpRelay, 'allocations' | 'sendQueueDrops'>,
): void {
  const registers = [registry];
  new Gauge({
    name: 'punch_relay_allocations',
    help: 'Relay allocations held now (two UDP ports each)',
    registers,
    collect() {
      this.set(relay.allocations.size);
    },
  });
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
}
