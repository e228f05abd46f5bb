/**
 * One timer per retry instant for every absent device of the monitor (domain/backoff.ts retryInstantMs):
 * a HyperDeck's reconnect, a vMix's offline poll and its TCP API link, once their backoff has reached the
 * 5 s cap, are run together at the same instant, in one wake of the process. Shorter delays (the first
 * steps of a backoff) run on their own timer, as before. The TSL refresh at rest uses the same instants
 * (`within`) when its round is 5 s or longer.
 */
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { OFFLINE_POLL_MAX_MS, retryInstantMs } from '../domain/backoff.ts';

interface Slot {
  timer: TimerHandle;
  fns: Set<() => void>;
}

export class RetryGrid {
  readonly #clock: Clock;
  readonly #periodMs: number;
  readonly #phaseMs: number;
  readonly #slots = new Map<number, Slot>();
  /** The last instant run: a retry scheduled from it goes to a later one even if its timer fired early. */
  #lastRun = -Infinity;

  constructor(clock: Clock, periodMs = OFFLINE_POLL_MAX_MS, phaseMs = Math.random() * periodMs) {
    this.#clock = clock;
    this.#periodMs = periodMs;
    this.#phaseMs = phaseMs;
  }

  /** Run `fn` after `delayMs`, or at the grid instant that stands for it once the backoff is at its cap. */
  schedule(delayMs: number, fn: () => void): TimerHandle {
    const now = this.#clock.monotonicMs();
    const at = retryInstantMs(now, delayMs, this.#periodMs, this.#phaseMs, this.#lastRun);
    if (at === undefined) return this.#clock.setTimer(delayMs, fn);
    let slot = this.#slots.get(at);
    if (!slot) {
      const fns = new Set<() => void>();
      const timer = this.#clock.setTimer(at - now, () => {
        this.#slots.delete(at);
        this.#lastRun = Math.max(this.#lastRun, at);
        for (const f of fns) f();
      });
      slot = { timer, fns };
      this.#slots.set(at, slot);
    }
    const s = slot;
    const entry = (): void => fn();
    s.fns.add(entry);
    return {
      cancel: () => {
        if (!s.fns.delete(entry) || s.fns.size > 0) return;
        s.timer.cancel();
        if (this.#slots.get(at) === s) this.#slots.delete(at);
      },
    };
  }

  /**
   * Run `fn` no later than `maxDelayMs` from now: at a grid instant when `maxDelayMs` is at least the
   * grid's period (so it shares that wake), else after exactly `maxDelayMs`. For periodic work with an
   * upper bound (the TSL refresh at rest), never for retries, which `schedule` places.
   */
  within(maxDelayMs: number, fn: () => void): TimerHandle {
    if (maxDelayMs < this.#periodMs) return this.#clock.setTimer(maxDelayMs, fn);
    return this.schedule(maxDelayMs, fn);
  }

  /** Grid instants with a retry waiting (tests). */
  get pendingInstants(): number {
    return this.#slots.size;
  }
}

/**
 * A retry after `delayMs`: on `grid` when the caller has one (the monitor's inputs), else a plain timer of
 * `clock` (an input built alone, as in its own tests).
 */
export function scheduleRetry(
  o: { clock: Clock; retryGrid?: RetryGrid | undefined },
  delayMs: number,
  fn: () => void,
): TimerHandle {
  return o.retryGrid ? o.retryGrid.schedule(delayMs, fn) : o.clock.setTimer(delayMs, fn);
}
