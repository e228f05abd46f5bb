/**
 * A warning that may recur many times a second (a TSL destination refusing every datagram) is logged at
 * most once per interval: the first occurrence at once, then one line per interval carrying how many
 * occurrences it stands for. Pure: the caller passes the time.
 */
export class LogThrottle {
  #pending = 0;
  #lastAt: number | undefined;

  constructor(readonly intervalMs: number) {}

  /** One occurrence at `now`; returns the count to log (occurrences since the last line) or undefined. */
  note(now: number): number | undefined {
    this.#pending++;
    if (this.#lastAt !== undefined && now - this.#lastAt < this.intervalMs) return undefined;
    const count = this.#pending;
    this.#pending = 0;
    this.#lastAt = now;
    return count;
  }

  /** Occurrences not yet logged. */
  get pending(): number {
    return this.#pending;
  }
}
