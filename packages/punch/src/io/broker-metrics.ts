import { Counter, Gauge, Histogram, type Clock, type Registry } from '@broadcast-ops/core';
import type { SessionBroker } from '../domain/broker.ts';

/**
 * The broker's own metrics (README "Metrics"; sessions are counted in http-api.ts, the relay's in
 * relay/relay-wiring.ts): present peers, matches and their latency, signalling refusals, relay fallbacks,
 * connected streams by path, refused and open WebSocket connections. app.ts hands the counters to the
 * parts that count.
 */
export interface BrokerMetrics {
  refused: (code: string) => void;
  relayFallback: (outcome: string, reason: string | null) => void;
  streamConnected: (path: string) => void;
  wsRejected: (reason: string) => void;
}

export function brokerMetrics(
  registry: Registry,
  broker: SessionBroker,
  clock: Clock,
  /** Open signalling connections, read at each scrape. */
  connections: () => number,
): BrokerMetrics {
  const refusals = new Counter({
    name: 'punch_signalling_refusals_total',
    help: 'register messages refused, by code (SESSION_FULL, STREAM_TAKEN, ADDRESS_FAMILY, STORE_FAILED, ...)',
    labelNames: ['code'],
    registers: [registry],
  });
  const matches = new Counter({
    name: 'punch_matches_total',
    help: 'Streams matched (both peers present with their coordinates exchanged), re-matches included',
    registers: [registry],
  });
  const matchLatency = new Histogram({
    name: 'punch_match_latency_seconds',
    help: 'Time from the earlier of the two claims of a stream to its match',
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 1800],
    registers: [registry],
  });
  broker.subscribe((e) => {
    if (e.type !== 'peer_matched' || !e.stream.peerA || !e.stream.peerB) return;
    matches.inc();
    const first = Math.min(e.stream.peerA.claimedAt, e.stream.peerB.claimedAt);
    matchLatency.observe(Math.max(0, clock.now() - first) / 1000);
  });
  new Gauge({
    name: 'punch_peers',
    help: 'Claimed peer slots, by presence (present: holder connected; absent: within the grace period)',
    labelNames: ['presence'],
    registers: [registry],
    collect() {
      const n = broker.peerCounts();
      this.set({ presence: 'present' }, n.present);
      this.set({ presence: 'absent' }, n.absent);
    },
  });
  // docs/relay.md "Running inside the broker": the relay a stream falls back to when rendezvous fails.
  const relayFallbacks = new Counter({
    name: 'punch_relay_fallbacks_total',
    help: 'Streams moved to the relay after direct rendezvous failed, by outcome (allocated, refused) and reason',
    labelNames: ['outcome', 'reason'],
    registers: [registry],
  });
  const sessionsByPath = new Counter({
    name: 'punch_sessions_total',
    help: 'Streams that got connected, once per session, stream and path (direct or relayed)',
    labelNames: ['path'],
    registers: [registry],
  });
  for (const path of ['direct', 'relayed']) sessionsByPath.inc({ path }, 0);
  const wsRejected = new Counter({
    name: 'punch_ws_rejected_total',
    help: 'WebSocket connections refused before joining a session, by reason',
    labelNames: ['reason'],
    registers: [registry],
  });
  new Gauge({
    name: 'punch_ws_connections',
    help: 'Open signalling WebSocket connections (peers and observers)',
    registers: [registry],
    collect() {
      this.set(connections());
    },
  });
  return {
    refused: (code) => refusals.inc({ code }),
    relayFallback: (outcome, reason) => relayFallbacks.inc({ outcome, reason: reason ?? '' }),
    streamConnected: (path) => sessionsByPath.inc({ path }),
    wsRejected: (reason) => wsRejected.inc({ reason }),
  };
}
