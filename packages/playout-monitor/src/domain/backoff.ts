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

/**
 * The instant an absent device is tried again at rest: retries whose delay has reached the cap share one
 * grid of instants every `periodMs` (from a phase drawn once per process), so the monitor's absent devices
 * are tried in one wake instead of one each (docs/performance.md "At rest"). Returns `undefined` below
 * 0.8 × `periodMs` (the early, shorter steps of a backoff keep their own delay). Otherwise the first grid
 * instant after `nowMs + max(0, delayMs − periodMs)`: never later than `max(delayMs, periodMs)` from now,
 * so a device retried every 4-5 s is now retried every `periodMs` (5 s) and still seen within 5 s of its
 * return; the jitter between monitors is the phase (several monitors started together draw different ones).
 * Always after `lastRunMs`, the last instant run.
 */
export function retryInstantMs(
  nowMs: number,
  delayMs: number,
  periodMs: number,
  phaseMs: number,
  lastRunMs = -Infinity,
): number | undefined {
  if (!(periodMs > 0) || delayMs < 0.8 * periodMs) return undefined;
  // Never the instant that has just run again: a timer may fire a little before its instant by the
  // monotonic clock (Node's timers count whole milliseconds of the event loop's cached time).
  const after = Math.max(nowMs + Math.max(0, delayMs - periodMs), lastRunMs);
  const k = Math.floor((after - phaseMs) / periodMs) + 1;
  return phaseMs + k * periodMs;
}
