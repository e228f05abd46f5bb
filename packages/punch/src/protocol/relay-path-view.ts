import type { RelayDirection } from './relay-bus.ts';

/**
 * How the relay's figures for one stream are shown (docs/relay.md "What the operator sees"): in the session
 * view, in `health_report` and on the console. Input: what the relay measured (src/domain/relay-path-meter.ts),
 * read in process or from the relay's report on the bus.
 */

/** A relay's figures for one allocation as the broker holds them: `at` is the wall-clock ms of the reading. */
export interface RelayPathReport {
  at: number;
  directions: readonly [RelayDirection, RelayDirection];
}

/** Figures older than this are shown grey with their age (a relay report every 2.5 s by default). */
export const RELAY_FIGURES_STALE_MS = 10_000;

const round2 = (x: number | null): number | null => (x === null ? null : Math.round(x * 100) / 100);
const seconds = (ms: number): number => Math.round(ms / 100) / 10;

function directionView(d: RelayDirection, sinceReadingMs: number): RelayDirectionView {
  return {
    packets: d.packets,
    lost_upstream: d.lost,
    retransmitted: d.retransmitted,
    rtt_ms: round2(d.rttMs),
    rtt_var_ms: round2(d.rttVarMs),
    sender_leg_ms: round2(d.senderLegMs),
    receiver_leg_ms: round2(d.receiverLegMs),
    rtt_age: d.rttAgeMs === null ? null : seconds(d.rttAgeMs + sinceReadingMs),
  };
}

/**
 * The figures as the session view and `health_report` show them (docs/relay.md "What the operator sees"):
 * per media direction (`a_to_b`: sent by slot a's peer), with `age` (seconds since the reading) and `stale`
 * past RELAY_FIGURES_STALE_MS, or when the newest RTT figure is that old (SRT stopped acknowledging).
 */
export function relayPathView(report: RelayPathReport, now: number): RelayPathView {
  const since = Math.max(0, now - report.at);
  const [a, b] = report.directions;
  const rttAges = [a.rttAgeMs, b.rttAgeMs].filter((x): x is number => x !== null);
  // No RTT figure yet (no full ACK seen) is not staleness: the counters are current.
  const freshest = rttAges.length > 0 ? Math.min(...rttAges) + since : since;
  return {
    at: new Date(report.at).toISOString(),
    age: seconds(since),
    stale: since > RELAY_FIGURES_STALE_MS || freshest > RELAY_FIGURES_STALE_MS,
    a_to_b: directionView(a, since),
    b_to_a: directionView(b, since),
  };
}
export interface RelayDirectionView {
  packets: number;
  lost_upstream: number;
  retransmitted: number;
  rtt_ms: number | null;
  rtt_var_ms: number | null;
  sender_leg_ms: number | null;
  receiver_leg_ms: number | null;
  rtt_age: number | null;
}
export interface RelayPathView {
  at: string;
  age: number;
  stale: boolean;
  a_to_b: RelayDirectionView;
  b_to_a: RelayDirectionView;
}
