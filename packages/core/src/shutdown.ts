import type { Logger } from 'pino';

/**
 * Graceful shutdown for a service process. Closers run in reverse order of registration (last opened,
 * first closed). On SIGINT/SIGTERM: stop accepting, let in-flight work finish, close sockets, exit 0.
 * If closing takes longer than `timeoutMs`, the process exits 1 so a supervisor sees the hang.
 */
export interface ShutdownOptions {
  logger: Logger;
  timeoutMs?: number;
  /** Injected for tests; default process.exit. */
  exit?: (code: number) => void;
  signals?: NodeJS.Signals[];
}

export class Shutdown {
  readonly #closers: { name: string; fn: () => Promise<void> | void }[] = [];
  readonly #logger: Logger;
  readonly #timeoutMs: number;
  readonly #exit: (code: number) => void;
  readonly #signals: NodeJS.Signals[];
  #running: Promise<number> | undefined;
  readonly #onSignal = (signal: NodeJS.Signals): void => {
    void this.run(signal);
  };

  constructor(options: ShutdownOptions) {
    this.#logger = options.logger;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#exit = options.exit ?? ((code) => process.exit(code));
    this.#signals = options.signals ?? ['SIGINT', 'SIGTERM'];
  }

  add(name: string, fn: () => Promise<void> | void): this {
    this.#closers.push({ name, fn });
    return this;
  }

  install(): this {
    for (const s of this.#signals) process.once(s, this.#onSignal);
    return this;
  }

  uninstall(): void {
    for (const s of this.#signals) process.removeListener(s, this.#onSignal);
  }

  /** Close everything; resolves with the exit code it passed to `exit`. A second call joins the first. */
  run(reason: string): Promise<number> {
    this.#running ??= this.#close(reason).then((code) => {
      this.#exit(code);
      return code;
    });
    return this.#running;
  }

  /**
   * Close everything without exiting (a service that failed to start: the caller sets the exit code);
   * resolves with the code `run` would have used. A later `run` or `abort` joins this one.
   */
  abort(reason: string): Promise<number> {
    this.#running ??= this.#close(reason);
    return this.#running;
  }

  async #close(reason: string): Promise<number> {
    this.#logger.info({ reason }, 'shutting down');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#timeoutMs);
    });
    const work = (async () => {
      let failed = false;
      for (const closer of [...this.#closers].reverse()) {
        try {
          await closer.fn();
        } catch (err) {
          failed = true;
          this.#logger.error({ err, closer: closer.name }, 'error while closing');
        }
      }
      return failed ? 1 : 0;
    })();
    const outcome = await Promise.race([work, timeout]);
    clearTimeout(timer);
    const code = outcome === 'timeout' ? 1 : outcome;
    if (outcome === 'timeout') this.#logger.error({ timeoutMs: this.#timeoutMs }, 'shutdown timed out');
    else this.#logger.info('stopped');
    this.uninstall();
    return code;
  }
}
