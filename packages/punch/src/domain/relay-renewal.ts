/**
 * How long a relay allocation is asked to live, and when the owning broker renews it (docs/relay.md
 * "Renewal"). An allocation lives to the later of the relay's usual lifetime and the session's own
 * expiry, bounded by the relay's maximum; the broker renews it when three quarters of that have passed,
 * so a show longer than one lifetime keeps its relay, and a quarter of the lifetime is left for a renewal
 * that is late (a loaded host, a take-over on Redis). A session in overtime (past its expiry, media still
 * flowing: README "Lifetime") gets the usual lifetime at each renewal, for as long as it is live.
 */
export const RELAY_RENEW_FRACTION = 0.75;

export function relayLifetimeMs(o: {
  /** Unix epoch ms of the session's expiry, and now on the same clock. */
  sessionExpiresAt: number;
  now: number;
  /** The relay's usual lifetime (`PUNCH_RELAY_LIFETIME_MS`). */
  lifetimeMs: number;
  maxLifetimeMs: number;
}): number {
  return Math.min(o.maxLifetimeMs, Math.max(o.lifetimeMs, o.sessionExpiresAt - o.now));
}

/** When to renew an allocation that was given `lifetimeMs`. */
export function renewAfterMs(lifetimeMs: number): number {
  return Math.floor(lifetimeMs * RELAY_RENEW_FRACTION);
}
