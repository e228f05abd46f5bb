/**
 * Reconnect backoff: min × 2ⁿ, capped at max, with ±20 %
 * jitter so several monitors restarted together do not hit a deck in lockstep. Never above max.
 */
export function reconnectDelayMs(
  attempt: number,
  minMs: number,
  maxMs: number,
  random: () => number,
): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(Math.max(0, attempt), 30));
  const jitter = 0.8 + 0.4 * Math.min(1, Math.max(0, random()));
  return Math.round(Math.min(maxMs, base * jitter));
}
