/**
 * The absolute locations the bridge subscribes to with ADD-SUB (docs/companion.md "Subscriptions across
 * sessions"): remembered across Companion sessions, each with the status `companion.subscriptions` shows.
 * The configured ones (`companion.locations`) are subscribed on every session and never dropped by `unwatch`.
 * Pure bookkeeping; the session decides when to send and publish.
 */
import { parseLocation } from './features.ts';

export interface SubLocation {
  path: string;
  page: number;
  row: number;
  column: number;
}

/** What `companion.subscriptions` says about one location. */
export type SubStatus = 'live' | 'restoring' | 'stale' | 'failed' | 'unavailable';

/** ADD-SUB locations remembered across sessions; beyond this a new location is refused (clients choose them). */
export const MAX_SUBSCRIPTIONS = 1024;

type Where = { page: number; row: number; column: number };

export const subIdOf = (l: Where): string => `tb-${l.page}-${l.row}-${l.column}`;
export const locationPath = (l: Where): string => `companion.page.${l.page}.row.${l.row}.column.${l.column}`;

export class Locations {
  readonly #subs = new Map<string, SubLocation>();
  readonly #status = new Map<string, { status: SubStatus; reason?: string }>();
  readonly #configured = new Set<string>();

  /** `configured`: `page/row/column` strings; malformed ones and those past the bound are skipped. */
  constructor(configured: readonly string[] = []) {
    for (const l of configured) {
      const loc = parseLocation(l);
      if (!loc || loc.page < 1 || this.#subs.size >= MAX_SUBSCRIPTIONS) continue;
      const id = subIdOf(loc);
      this.#subs.set(id, { path: locationPath(loc), ...loc });
      this.#configured.add(id);
      this.setStatus(id, 'restoring', 'configured: waiting for a Companion session');
    }
  }

  get size(): number {
    return this.#subs.size;
  }

  has(id: string): boolean {
    return this.#subs.has(id);
  }

  get(id: string): SubLocation | undefined {
    return this.#subs.get(id);
  }

  entries(): IterableIterator<[string, SubLocation]> {
    return this.#subs.entries();
  }

  isConfigured(id: string): boolean {
    return this.#configured.has(id);
  }

  /** Remember a location a client asked for (status `restoring` until Companion draws it). */
  add(id: string, loc: SubLocation, reason: string): void {
    this.#subs.set(id, loc);
    this.setStatus(id, 'restoring', reason);
  }

  remove(id: string): void {
    this.#subs.delete(id);
    this.#status.delete(id);
  }

  status(id: string): SubStatus | undefined {
    return this.#status.get(id)?.status;
  }

  setStatus(id: string, status: SubStatus, reason?: string): void {
    this.#status.set(id, reason === undefined ? { status } : { status, reason });
  }

  /** Every remembered location to `status`, with one reason. */
  setAll(status: SubStatus, reason: string): void {
    for (const id of this.#subs.keys()) this.setStatus(id, status, reason);
  }

  /** The value of `companion.subscriptions`: every remembered location, its status and why it is not live. */
  value(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [id, loc] of this.#subs) {
      const st = this.#status.get(id) ?? { status: 'restoring' };
      out[`${loc.page}/${loc.row}/${loc.column}`] = { path: loc.path, ...st };
    }
    return out;
  }

  /** A path of a remembered location that `fresh` (the ids drawn this session) does not hold. */
  unrestored(path: string, fresh: ReadonlySet<string>): boolean {
    if (!path.startsWith('companion.page.')) return false;
    for (const [id, loc] of this.#subs) if (loc.path === path) return !fresh.has(id);
    return false;
  }
}
