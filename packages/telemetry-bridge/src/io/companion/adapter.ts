/**
 * Companion adapter (namespace `companion`, source `companion.satellite`; docs/companion.md): the thin owner
 * of the Satellite links and of the session's wake-up. Every decision (handshake, keepalive, replies,
 * reconnect backoff, hot-standby failover, held keys, subscriptions) is the pure `CompanionSession`
 * (domain/companion/session.ts); this file opens and closes the links it asks for, feeds it their lines and
 * ends, and calls `tick()` at the time it asks for, on the context's Clock.
 */
import type { TimerHandle } from '@broadcast-ops/core';
import type { Adapter, AdapterCommand, AdapterContext, AdapterResult } from '../../domain/adapter.ts';
import { CompanionSession } from '../../domain/companion/session.ts';
import type {
  CompanionConnectionState,
  CompanionHost,
  CompanionSessionOptions,
  SessionLinks,
} from '../../domain/companion/types.ts';
import { openLink, type SatelliteLink, type SatelliteTransport } from './link.ts';

export { backoffDelay } from '../../domain/companion/types.ts';
export { MAX_SUBSCRIPTIONS } from '../../domain/companion/locations.ts';
export type {
  CompanionConnectionState,
  CompanionDevice,
  CompanionHost,
  CompanionVariable,
} from '../../domain/companion/types.ts';

export interface CompanionAdapterOptions extends CompanionSessionOptions {
  transport: SatelliteTransport;
  maxLineLength: number;
}

/** Lines that arrived before the connect promise settled, held until the session hears `opened`. */
interface Opening {
  early: string[];
  link: SatelliteLink | undefined;
  /** The session let go of this link before it opened: close it once it does. */
  dropped: boolean;
}

export class CompanionAdapter implements Adapter {
  readonly name = 'companion.satellite';
  readonly targets = ['companion'];
  readonly owns = ['companion'];
  readonly #o: CompanionAdapterOptions;
  readonly #session: CompanionSession;
  readonly #links = new Map<number, Opening>();
  #ctx: AdapterContext | undefined;
  #wake: TimerHandle | undefined;

  constructor(options: CompanionAdapterOptions) {
    this.#o = options;
    this.#session = new CompanionSession(options);
  }

  get state(): CompanionConnectionState {
    return this.#session.state;
  }

  capabilities(): Record<string, boolean | string | number> {
    return { transport: this.#o.transport, ...this.#session.capabilities() };
  }

  /** The configured hosts in order and the one in use (for the console and the state API). */
  get hosts(): { host: string; port: number; active: boolean }[] {
    return this.#session.hosts;
  }

  start(ctx: AdapterContext): void {
    this.#ctx = ctx;
    this.#session.start(ctx, this.#sessionLinks());
  }

  stop(): void {
    this.#session.stop();
    this.#wake?.cancel();
    this.#wake = undefined;
  }

  execute(cmd: AdapterCommand, signal: AbortSignal): Promise<AdapterResult> {
    // One I/O poll phase before a silent link is judged: Companion's lines may be waiting in the socket.
    return this.#session.execute(cmd, signal, () => new Promise<void>((r) => setImmediate(r)));
  }

  #sessionLinks(): SessionLinks {
    return {
      open: (id, host) => this.#open(id, host),
      send: (id, line) => this.#links.get(id)?.link?.send(line),
      close: (id, reason) => {
        const l = this.#links.get(id);
        if (!l) return;
        if (!l.link) {
          l.dropped = true;
          return;
        }
        this.#links.delete(id);
        l.link.close(reason);
      },
      wake: (at) => {
        this.#wake?.cancel();
        this.#wake = undefined;
        const clock = this.#ctx?.clock;
        if (at === undefined || !clock) return;
        this.#wake = clock.setTimer(Math.max(0, at - clock.monotonicMs()), () => {
          this.#wake = undefined;
          this.#session.tick(at);
        });
      },
    };
  }

  #open(id: number, host: CompanionHost): void {
    const entry: Opening = { early: [], link: undefined, dropped: false };
    this.#links.set(id, entry);
    openLink(
      {
        transport: this.#o.transport,
        host: host.host,
        port: host.port,
        connectTimeoutMs: this.#o.connectionTimeout,
        maxLineLength: this.#o.maxLineLength,
      },
      {
        // Lines can arrive before the connect promise settles: held until the session knows the link is open.
        line: (l) => (entry.link ? this.#session.line(id, l) : entry.early.push(l)),
        closed: (r) => {
          this.#links.delete(id);
          this.#session.closed(id, r);
        },
      },
    ).then(
      (link) => {
        entry.link = link;
        if (entry.dropped) {
          this.#links.delete(id);
          link.close();
          return;
        }
        this.#session.opened(id);
        for (const l of entry.early.splice(0)) this.#session.line(id, l);
      },
      (err: unknown) => {
        this.#links.delete(id);
        if (!entry.dropped) this.#session.openFailed(id, (err as Error).message);
      },
    );
  }
}
