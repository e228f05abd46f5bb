/**
 * Per-key fixed-window counter (spec "Limits": N per minute per IP). The window of a key starts at its first
 * request, so "the 11th create within a minute" is refused whatever the wall-clock alignment.
 *
 * Bounded memory: expired windows are swept once per window length, and at most `maxKeys` keys are tracked;
 * when a flood of distinct keys fills the table, new keys are refused (fail closed) until the next sweep.
 * Time comes from the caller (monotonic milliseconds), so tests drive it by hand.
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

  constructor(options: { limit: number; windowMs: number; maxKeys?: number }) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#maxKeys = options.maxKeys ?? 100_000;
  }

  get size(): number {
    return this.#windows.size;
  }

  hit(key: string, nowMs: number): RateLimitDecision {
    if (nowMs - this.#lastSweep >= this.#windowMs) this.#sweep(nowMs);
    let w = this.#windows.get(key);
    if (w && nowMs - w.start >= this.#windowMs) {
      w.start = nowMs;
      w.count = 0;
    }
    if (!w) {
      if (this.#windows.size >= this.#maxKeys) this.#sweep(nowMs);
      if (this.#windows.size >= this.#maxKeys)
        return { allowed: false, retryAfterS: Math.ceil(this.#windowMs / 1000) };
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
