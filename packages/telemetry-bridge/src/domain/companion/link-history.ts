/**
 * One outage of the Companion link as one event (docs/companion.md "Hot standby", docs/console.md "Link
 * events"): the first loss opens an outage, every further failed attempt (the backup refusing, a round over
 * all hosts) only counts in it, and the next registration closes it as a single `failover` (on another
 * host) or `reconnected` (on the same host) record with the first reason and the time without Companion.
 * Pure: the caller passes the time; no sockets, no timers.
 */

export interface LinkHost {
  host: string;
  port: number;
  role: 'primary' | 'backup';
}

export interface LinkEvent {
  kind: 'failover' | 'reconnected';
  from: LinkHost;
  to: LinkHost;
  /** Why the link to `from` was lost (the first reason of the outage). */
  reason: string;
  lostAt: number;
  at: number;
  /** `at - lostAt`: how long no Companion was registered. */
  durationMs: number;
  /** Connection attempts that failed before the one that registered. */
  failedAttempts: number;
}

/** Events kept (the state key `companion.connection.events`). */
export const LINK_EVENTS_KEPT = 20;

export class LinkHistory {
  #outage: { from: LinkHost; reason: string; lostAt: number; failed: number } | undefined;
  readonly #events: LinkEvent[];

  /** `restored`: the list as the event log kept it, so a restart does not forget earlier outages. */
  constructor(restored: unknown = []) {
    this.#events = Array.isArray(restored) ? (restored as LinkEvent[]).slice(-LINK_EVENTS_KEPT) : [];
  }

  /** The link to `from` failed (a live session lost, or a connection attempt that did not register). */
  lost(from: LinkHost, reason: string, at: number): void {
    if (this.#outage) this.#outage.failed++;
    else this.#outage = { from, reason, lostAt: at, failed: 0 };
  }

  /** The outage still open: where it started, why, since when (for a row that says "failing over"). */
  get open(): { from: LinkHost; reason: string; lostAt: number; failedAttempts: number } | undefined {
    const o = this.#outage;
    return o ? { from: o.from, reason: o.reason, lostAt: o.lostAt, failedAttempts: o.failed } : undefined;
  }

  /** Registered on `to`: closes the open outage as one event (undefined when there was none: a first start). */
  registered(to: LinkHost, at: number): LinkEvent | undefined {
    const o = this.#outage;
    if (!o) return undefined;
    this.#outage = undefined;
    const same = o.from.host === to.host && o.from.port === to.port;
    const e: LinkEvent = {
      kind: same ? 'reconnected' : 'failover',
      from: o.from,
      to,
      reason: o.reason,
      lostAt: o.lostAt,
      at,
      durationMs: Math.max(0, at - o.lostAt),
      failedAttempts: o.failed,
    };
    this.#events.push(e);
    if (this.#events.length > LINK_EVENTS_KEPT)
      this.#events.splice(0, this.#events.length - LINK_EVENTS_KEPT);
    return e;
  }

  /** Oldest first, at most LINK_EVENTS_KEPT. */
  list(): LinkEvent[] {
    return [...this.#events];
  }
}
