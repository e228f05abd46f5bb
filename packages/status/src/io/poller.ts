/**
 * Polls every service on its own timer: each poll fetches the health URL (and metrics and devices when
 * configured) in parallel with a deadline below the interval, so a slow or stopped service costs one timeout
 * and never delays the others. A poll still running when the next is due is not doubled.
 */
import type { Clock, Logger } from '@broadcast-ops/core';
import type { ServiceConfig, StatusConfig } from '../config.ts';
import type { Fleet } from '../domain/fleet.ts';
import { verdict, type Fetched } from '../domain/verdict.ts';
import { fetchText } from './fetch-text.ts';

export interface PollerDeps {
  config: StatusConfig;
  fleet: Fleet;
  clock: Clock;
  logger: Logger;
  env: NodeJS.ProcessEnv;
  /** Called after each poll (metrics). */
  onPoll?: (service: ServiceConfig, answered: boolean, ms: number) => void;
}

export class Poller {
  readonly #d: PollerDeps;
  readonly #busy = new Set<string>();
  readonly #timers = new Map<string, { cancel(): void }>();
  #stopped = false;

  constructor(deps: PollerDeps) {
    this.#d = deps;
  }

  start(): void {
    for (const s of this.#d.config.services) this.#loop(s);
  }

  stop(): void {
    this.#stopped = true;
    for (const t of this.#timers.values()) t.cancel();
    this.#timers.clear();
  }

  /** One poll of one service (also used by tests). */
  async pollOnce(s: ServiceConfig): Promise<void> {
    if (this.#busy.has(s.name)) return;
    this.#busy.add(s.name);
    const started = this.#d.clock.monotonicMs();
    try {
      const token = s.tokenEnv ? this.#d.env[s.tokenEnv] : undefined;
      const opts = {
        timeoutMs: this.#d.config.timeoutMs,
        maxBytes: this.#d.config.maxBodyBytes,
        ...(token ? { token } : {}),
      };
      const skip = Promise.resolve(undefined);
      const [health, metrics, devices] = await Promise.all([
        fetchText(s.health, opts),
        s.metrics ? fetchText(s.metrics, opts) : skip,
        s.devices ? fetchText(s.devices, opts) : skip,
      ]);
      const input: { health: Fetched; metrics?: Fetched; devices?: Fetched } = { health };
      if (metrics) input.metrics = metrics;
      if (devices) input.devices = devices;
      const before = this.#d.fleet.list().find((x) => x.name === s.name)?.level;
      const after = this.#d.fleet.record(s.name, verdict(s.kind, input), health.ok, this.#d.clock.now());
      if (after.level !== before)
        this.#d.logger.info(
          { target: s.name, verdict: after.level, reason: after.reason },
          'service level changed',
        );
      this.#d.onPoll?.(s, health.ok, this.#d.clock.monotonicMs() - started);
    } finally {
      this.#busy.delete(s.name);
    }
  }

  #loop(s: ServiceConfig): void {
    if (this.#stopped) return;
    void this.pollOnce(s).catch((err: unknown) =>
      this.#d.logger.error({ err, target: s.name }, 'poll failed'),
    );
    this.#timers.set(
      s.name,
      this.#d.clock.setTimer(this.#d.config.pollIntervalMs, () => this.#loop(s)),
    );
  }
}
