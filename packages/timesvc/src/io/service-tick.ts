import type { Clock, Logger, TimerHandle } from '@broadcast-ops/core';

/**
 * The service's once-a-second work on one timer (docs/performance.md "At rest"): the host clock's step
 * check, the reference's sampling, the clock manager's tick, the native threads' reply-field check and the
 * web layer's chart point, events and source statistics run one after the other in the order they were
 * added, on one wake-up instead of one timer each. The timer is the injected clock's (app.ts: the
 * context's, on the served clock's monotonic base), re-armed after each round as the clock manager's own
 * loop was (domain/clock-manager.ts start), so a manual clock drives it in tests.
 *
 * Each component keeps its own timer when no tick is given (its unit tests), and takes the tick's when one
 * is (io/service.ts).
 */
export interface Ticker {
  /** Run `fn` on every tick from now on; returns its removal. */
  every(fn: () => void): () => void;
}

export class ServiceTick implements Ticker {
  readonly #clock: Clock;
  readonly #periodMs: number;
  readonly #logger: Logger | undefined;
  readonly #tasks: (() => void)[] = [];
  #timer: TimerHandle | undefined;

  constructor(options: { clock: Clock; periodMs?: number; logger?: Logger | undefined }) {
    this.#clock = options.clock;
    this.#periodMs = options.periodMs ?? 1000;
    this.#logger = options.logger;
  }

  every(fn: () => void): () => void {
    this.#tasks.push(fn);
    return () => {
      const i = this.#tasks.indexOf(fn);
      if (i >= 0) this.#tasks.splice(i, 1);
    };
  }

  /**
   * One round: every task in turn; one that throws is logged and does not stop the others. Read by index,
   * not copied (an array a second, docs/performance.md "Fifth pass"): a task removed during the round
   * (`every`'s removal) may make the round skip the task after it, which runs at the next round.
   */
  run(): void {
    const tasks = this.#tasks;
    for (let i = 0; i < tasks.length; i++) {
      try {
        tasks[i]?.();
      } catch (err) {
        this.#logger?.error({ err }, 'once-a-second task failed');
      }
    }
  }

  start(): void {
    if (this.#timer) return;
    const loop = (): void => {
      this.run();
      this.#timer = this.#clock.setTimer(this.#periodMs, loop);
    };
    this.#timer = this.#clock.setTimer(this.#periodMs, loop);
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }
}
