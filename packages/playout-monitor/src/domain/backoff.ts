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

/** The longest wait between two polls of a polled device declared offline (README "vMix"). */
export const OFFLINE_POLL_MAX_MS = 5000;

/**
 * The wait before the next poll of a polled device (vMix) after `failedPolls` failures in a row: its poll
 * period while it answers and through the `offlineAfter` failures that declare it offline (so it is declared
 * offline exactly as before); from then on the period doubled per further failure, ±20 % jitter, at most
 * `capMs` (`OFFLINE_POLL_MAX_MS`, never below the period), so an absent mixer is asked every 4-5 seconds
 * instead of four times a second, and one that comes back is seen within 5 s (the HyperDeck's reconnect cap).
 */
export function pollDelayMs(
  failedPolls: number,
  offlineAfter: number,
  pollMs: number,
  capMs: number,
  random: () => number,
): number {
  if (failedPolls < offlineAfter) return pollMs;
  return reconnectDelayMs(failedPolls - offlineAfter + 1, pollMs, Math.max(pollMs, capMs), random);
}
