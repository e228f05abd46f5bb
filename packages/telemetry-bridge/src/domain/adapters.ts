/**
 * Adapter host: the registry of device adapters (Companion Satellite, buttons, test fakes), command targets,
 * link state, and the context each adapter gets. This is the surface an adapter plugs into; the hub passes
 * in how state is written and events are published so ownership rules stay in one place.
 */
import type { Clock, Logger } from '@broadcast-ops/core';
import type { Adapter, AdapterContext } from './adapter.ts';
import type { HubMetrics } from './metrics.ts';

export interface AdapterHostOptions {
  clock: Clock;
  logger: Logger;
  /** The logger without bindings, for the adapters' own `component`. */
  rootLogger: Logger;
  metrics: HubMetrics;
  claim(prefix: string, owner: string): void;
  ownerOf(path: string): string | undefined;
  writeState(
    writer: string,
    path: string,
    value: unknown,
    correlationId: string | undefined,
  ): { kind: 'conflict'; owner: string | undefined } | { kind: 'changed' | 'unchanged' };
  publishEvent(source: string, path: string, event: string, data: unknown, correlationId?: string): number;
  markStale(owner: string, stale: boolean, except?: (path: string) => boolean): void;
  markPathStale(owner: string, path: string, stale: boolean): void;
  read(path: string): unknown;
  /** Write the event log's records of this job to the file (journal.ts `writePending`). */
  writeLog(): void;
}

export class AdapterHost {
  readonly #o: AdapterHostOptions;
  readonly #adapters = new Map<string, Adapter>();
  readonly #targets = new Map<string, Adapter>();
  readonly #up = new Map<string, boolean>();

  constructor(options: AdapterHostOptions) {
    this.#o = options;
  }

  register(adapter: Adapter): void {
    if (this.#adapters.has(adapter.name)) throw new Error(`adapter ${adapter.name} is already registered`);
    this.#adapters.set(adapter.name, adapter);
    for (const t of [adapter.name, ...adapter.targets]) this.#targets.set(t, adapter);
    for (const prefix of adapter.owns) this.#o.claim(prefix, adapter.name);
    this.#up.set(adapter.name, false);
    this.#o.metrics.adapterState(adapter.name, false);
  }

  target(name: string): Adapter | undefined {
    return this.#targets.get(name);
  }

  list(): { name: string; connected: boolean; capabilities: Record<string, unknown> }[] {
    return [...this.#adapters.values()].map((a) => ({
      name: a.name,
      connected: this.#up.get(a.name) ?? false,
      capabilities: a.capabilities(),
    }));
  }

  async start(): Promise<void> {
    for (const a of this.#adapters.values()) await a.start(this.#contextFor(a));
  }

  async stop(): Promise<void> {
    for (const a of this.#adapters.values()) {
      try {
        await a.stop();
      } catch (err) {
        this.#o.logger.error({ err, adapter: a.name }, 'adapter stop failed');
      }
    }
  }

  #contextFor(adapter: Adapter): AdapterContext {
    const o = this.#o;
    return {
      clock: o.clock,
      // A child of the root logger: a child of a child would print `component` twice (pino keeps both).
      logger: o.rootLogger.child({ component: `adapter:${adapter.name}` }),
      setState: (path, value, options) => {
        const outcome = o.writeState(adapter.name, path, value, options?.correlationId);
        if (outcome.kind === 'conflict') {
          throw new Error(`adapter ${adapter.name} may not write ${path} (owner ${outcome.owner ?? 'none'})`);
        }
        // On file before setState returns, so before the adapter's next line to its device: a record such
        // as a key about to be pressed (companion.held) survives a crash right after that line went out.
        if (outcome.kind === 'changed') o.writeLog();
      },
      emitEvent: (path, event, data, options) => {
        if (o.ownerOf(path) !== adapter.name) {
          throw new Error(`adapter ${adapter.name} may not emit events on ${path}`);
        }
        o.publishEvent(adapter.name, path, event, data, options?.correlationId);
      },
      setConnected: (connected, except) => {
        if (this.#up.get(adapter.name) === connected) return;
        this.#up.set(adapter.name, connected);
        o.metrics.adapterState(adapter.name, connected);
        o.markStale(adapter.name, !connected, except);
      },
      markStale: (stale, except) => o.markStale(adapter.name, stale, except),
      setPathStale: (path, stale) => o.markPathStale(adapter.name, path, stale),
      reportReconnect: () => o.metrics.adapterReconnect(adapter.name),
      reportLatency: (s) => o.metrics.adapterLatency(adapter.name, s),
      read: (path) => (o.ownerOf(path) === adapter.name ? o.read(path) : undefined),
      reportHeldReleased: () => o.metrics.heldKeyReleased(adapter.name),
    };
  }
}
