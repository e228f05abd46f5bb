/**
 * Injectable clock: domain code asks a Clock for time instead of calling Date.now(), so tests drive time by hand.
 * Wall time is for timestamps shown to people and peers; monotonic time is for durations and timeouts,
 * because the wall clock may be stepped by NTP while a service runs.
 */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Wall-clock time, Unix epoch milliseconds. */
  now(): number;
  /** Monotonic time in nanoseconds from an arbitrary origin; never goes backwards. */
  monotonicNs(): bigint;
  /** Monotonic time in milliseconds (fractional), for durations. */
  monotonicMs(): number;
  /** Run `fn` once after `ms` milliseconds of monotonic time. */
  setTimer(ms: number, fn: () => void): TimerHandle;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonicNs: () => process.hrtime.bigint(),
  monotonicMs: () => Number(process.hrtime.bigint()) / 1e6,
  setTimer(ms, fn) {
    // Node caps setTimeout at 2^31-1 ms; longer timers are chained so a 30-day TTL still fires on time.
    const MAX = 2_147_483_647;
    let handle: NodeJS.Timeout;
    const arm = (remaining: number): void => {
      handle = setTimeout(
        () => {
          if (remaining > MAX) arm(remaining - MAX);
          else fn();
        },
        Math.min(Math.max(0, remaining), MAX),
      );
      handle.unref?.();
    };
    arm(ms);
    return {
      cancel: () => {
        clearTimeout(handle);
      },
    };
  },
};

interface PendingTimer {
  due: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that only moves when told to. `advance()` fires due timers in order of their due time,
 * each seeing `now()` equal to its own due time.
 */
export class ManualClock implements Clock {
  #wallMs: number;
  #monoMs = 0;
  #timers: PendingTimer[] = [];
  #seq = 0;

  constructor(startWallMs = Date.UTC(2026, 0, 1)) {
    this.#wallMs = startWallMs;
  }

  now(): number {
    return this.#wallMs;
  }

  monotonicMs(): number {
    return this.#monoMs;
  }

  monotonicNs(): bigint {
    return BigInt(Math.round(this.#monoMs * 1e6));
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    const timer: PendingTimer = {
      due: this.#monoMs + Math.max(0, ms),
      seq: this.#seq++,
      fn,
      cancelled: false,
    };
    this.#timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  /** Pending (not cancelled, not fired) timers. */
  get pendingTimers(): number {
    return this.#timers.filter((t) => !t.cancelled).length;
  }

  /** Step the wall clock alone, as an NTP step would; monotonic time and timers are unaffected. */
  stepWall(deltaMs: number): void {
    this.#wallMs += deltaMs;
  }

  advance(ms: number): void {
    const target = this.#monoMs + ms;
    for (;;) {
      const next = this.#timers
        .filter((t) => !t.cancelled && t.due <= target)
        .sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.#moveTo(next.due);
      next.cancelled = true;
      next.fn();
    }
    this.#moveTo(target);
    this.#timers = this.#timers.filter((t) => !t.cancelled);
  }

  #moveTo(mono: number): void {
    const delta = mono - this.#monoMs;
    if (delta > 0) {
      this.#monoMs = mono;
      this.#wallMs += delta;
    }
  }
}
