import type { HealthStatus } from '../protocol/ws-messages.ts';
import type { StreamHealth } from './session.ts';

/**
 * A health report is current for three times the slowest recommended reporting interval (spec: 1-5 s), so
 * one or two lost reports do not blank the display but a peer that stopped reporting is not shown as live.
 */
export const HEALTH_MAX_AGE_MS = 15_000;

/** The stream's health if it is current at `now` (Unix epoch ms), otherwise null. */
export function liveHealth(h: StreamHealth | null, now: number): StreamHealth | null {
  return h && now - h.at <= HEALTH_MAX_AGE_MS ? h : null;
}

/**
 * Stream health classification (spec "Health status thresholds"): healthy below 100 ms RTT and below 1 %
 * retransmit, warning at 100-200 ms or 1-5 %, critical above 200 ms or above 5 %. The boundaries 100 ms,
 * 200 ms, 1 % and 5 % are warning. When RTT and retransmit fall in different bands the worse band wins
 * (README "Health"): a link with a fine RTT that retransmits 10 % is critical.
 */
const STATUSES: readonly HealthStatus[] = ['healthy', 'warning', 'critical'];

export function rttBand(rttMs: number): number {
  return rttMs < 100 ? 0 : rttMs <= 200 ? 1 : 2;
}

export function retransmitBand(percent: number): number {
  return percent < 1 ? 0 : percent <= 5 ? 1 : 2;
}

export function classifyHealth(rttMs: number, retransmitPercent: number): HealthStatus {
  return STATUSES[Math.max(rttBand(rttMs), retransmitBand(retransmitPercent))] ?? 'critical';
}

/**
 * Latency advice beside the status (an extra `health_report` field): 4 × RTT, the Haivision SRT Hub default
 * and the srt-live-transmit documentation's "3 to 4 times higher than RTT", clamped to the spec's 20-8000 ms.
 * Advice only: the broker never changes the latency of a live connection.
 */
export function suggestedLatency(rttMs: number): number {
  return Math.min(8000, Math.max(20, Math.ceil(4 * rttMs)));
}
