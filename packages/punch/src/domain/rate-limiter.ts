/**
 * Per-key fixed-window counter (spec "Limits": N per minute per IP). The window of a key starts at its first
 * request, so "the 11th create within a minute" is refused whatever the wall-clock alignment.
 *
 * Bounded memory: at most `maxKeys` keys are tracked. Keys are kept in least-recently-used order; when a
 * new key arrives at a full table, the least recently seen key is forgotten (its count restarts if it comes
 * back), so a flood of distinct addresses never locks new clients out. Expired windows are swept once per
 * window length. Time comes from the caller (monotonic milliseconds), so tests drive it by hand.
 */
export interface RateLimitDecision {
  allowed: boolean;
  /** Seconds until the key's window ends (for `Retry-After`), at least 1. */
  retryAfterS: number;
}

interface Window {
  start: number;
  count: number;
}

export class FixedWindowLimiter {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #maxKeys: number;
  readonly #windows = new Map<string, Window>();
  #lastSweep = Number.NEGATIVE_INFINITY;
  #evicted = 0;

  constructor(options: { limit: number; windowMs: number; maxKeys?: number }) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#maxKeys = options.maxKeys ?? 100_000;
  }

  get size(): number {
    return this.#windows.size;
  }

  /** Keys forgotten to make room for new ones (a sign of a flood of distinct addresses). */
  get evicted(): number {
    return this.#evicted;
  }

  hit(key: string, nowMs: number): RateLimitDecision {
    if (nowMs - this.#lastSweep >= this.#windowMs) this.#sweep(nowMs);
    let w = this.#windows.get(key);
    if (w) {
      // Move to the most recently used end.
      this.#windows.delete(key);
      this.#windows.set(key, w);
      if (nowMs - w.start >= this.#windowMs) {
        w.start = nowMs;
        w.count = 0;
      }
    } else {
      if (this.#windows.size >= this.#maxKeys) {
        const oldest = this.#windows.keys().next().value;
        if (oldest !== undefined) {
          this.#windows.delete(oldest);
          this.#evicted++;
        }
      }
      w = { start: nowMs, count: 0 };
      this.#windows.set(key, w);
    }
    if (w.count >= this.#limit) {
      return {
        allowed: false,
        retryAfterS: Math.max(1, Math.ceil((w.start + this.#windowMs - nowMs) / 1000)),
      };
    }
    w.count++;
    return { allowed: true, retryAfterS: 0 };
  }

  #sweep(nowMs: number): void {
    this.#lastSweep = nowMs;
    for (const [k, w] of this.#windows) if (nowMs - w.start >= this.#windowMs) this.#windows.delete(k);
  }
}

/** The separate per-client buckets of the broker (spec "Limits" plus the README's additions). */
export type LimitGroup = 'create' | 'read' | 'admin' | 'page' | 'wsConnect';
