import { Counter, Gauge, Histogram, type Registry } from '@broadcast-ops/core';
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

/** Media directions by the slot that sends: side 0 is slot a's peer (docs/relay.md "Counters"). */
const DIRECTIONS = ['a_to_b', 'b_to_a'] as const;

/**
 * docs/relay.md "Counters": bytes forwarded, and what the path meter saw, per direction, summed over the
 * relay's allocations; the relay's RTT figures as histograms sampled once per sweep (1 s) per allocation.
 * Per-stream gauges are left out on purpose: a label per session would grow without bound; the view and
 * `health_report` carry the per-stream figures.
 */
export function registerRelayPathMetrics(
  registry: Registry,
  relay: Pick<UdpRelay, 'allocations' | 'pathTotals' | 'onSweep'>,
): void {
  const registers = [registry];
  const perDirection = (name: string, help: string, read: () => readonly [number, number]): void => {
    new Counter({
      name,
      help,
      labelNames: ['direction'],
      registers,
      collect() {
        this.reset();
        const v = read();
        DIRECTIONS.forEach((direction, side) => this.inc({ direction }, v[side] ?? 0));
      },
    });
  };
  perDirection(
    'punch_relay_bytes_total',
    'Bytes the relay forwarded, by direction (a_to_b: sent by the peer in slot a)',
    () => relay.allocations.forwardedTotals.bytes,
  );
  perDirection(
    'punch_relay_packets_total',
    'Datagrams the relay forwarded, by direction',
    () => relay.allocations.forwardedTotals.packets,
  );
  perDirection(
    'punch_relay_srt_data_packets_total',
    'SRT data packets that reached the relay from their sender, by direction (retransmissions included)',
    () => relay.pathTotals.packets,
  );
  perDirection(
    'punch_relay_upstream_lost_packets_total',
    'SRT data packets lost between the sender and the relay (sequence gaps), by direction',
    () => relay.pathTotals.lost,
  );
  perDirection(
    'punch_relay_srt_retransmitted_packets_total',
    'SRT data packets flagged as retransmissions that reached the relay, by direction',
    () => relay.pathTotals.retransmitted,
  );
  const rtt = new Histogram({
    name: 'punch_relay_rtt_seconds',
    help: 'RTT on relayed streams, sampled once a second per stream: leg="end_to_end" (SRT\'s own, from full ACKs), "sender" (relay to sender and back)',
    labelNames: ['leg'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  // Only figures from the last sweep interval: a link that stopped acknowledging is not sampled again.
  relay.onSweep = (all) => {
    for (const directions of all)
      for (const d of directions) {
        if (d.rttAgeMs === null || d.rttAgeMs > 2_000) continue;
        if (d.rttMs !== null) rtt.observe({ leg: 'end_to_end' }, d.rttMs / 1000);
        if (d.senderLegMs !== null) rtt.observe({ leg: 'sender' }, d.senderLegMs / 1000);
      }
  };
}
