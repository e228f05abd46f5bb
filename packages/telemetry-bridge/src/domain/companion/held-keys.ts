/**
 * Keys the bridge may have left held on a Companion (docs/companion.md "No key left held"): a `PRESSED=1`
 * line was sent (or was about to be) and its release was not confirmed by Companion's `OK`. Companion keeps
 * a key of a departed surface pressed, so each such key is released on the Companion that holds it the
 * next time the adapter is registered there. The list is published as the state key `companion.held`, so the
 * event log carries it across a restart (written before the line is sent). Pure bookkeeping, no I/O.
 */

export type HeldTarget =
  { kind: 'key'; keyIndex: number } | { kind: 'sub'; page: number; row: number; column: number };

export type HeldKey = HeldTarget & {
  /** The Companion that got the press (`host`, `port`). */
  host: string;
  port: number;
  deviceId: string;
  /** Wall time the press was sent (Unix ms), and the command's correlation id. */
  since: number;
  correlationId: string;
};

function targetId(t: HeldTarget): string {
  return t.kind === 'key' ? `key/${t.keyIndex}` : `sub/${t.page}/${t.row}/${t.column}`;
}

function idOf(h: { host: string; port: number } & HeldTarget): string {
  return `${h.host}:${h.port}|${targetId(h)}`;
}

const int = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** One entry of a restored `companion.held` value, or undefined when it is not one. */
export function heldKeyOf(raw: unknown): HeldKey | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  const base = {
    host: r['host'],
    port: r['port'],
    deviceId: r['deviceId'],
    since: r['since'],
    correlationId: r['correlationId'],
  };
  if (
    typeof base.host !== 'string' ||
    !int(base.port) ||
    typeof base.deviceId !== 'string' ||
    typeof base.since !== 'number' ||
    typeof base.correlationId !== 'string'
  )
    return undefined;
  const common = {
    host: base.host,
    port: base.port,
    deviceId: base.deviceId,
    since: base.since,
    correlationId: base.correlationId,
  };
  if (r['kind'] === 'key' && int(r['keyIndex'])) return { kind: 'key', keyIndex: r['keyIndex'], ...common };
  if (r['kind'] === 'sub' && int(r['page']) && int(r['row']) && int(r['column']))
    return { kind: 'sub', page: r['page'], row: r['row'], column: r['column'], ...common };
  return undefined;
}

/** Bound of the list (each entry is a key a client pressed; the surface has at most 2000 keys). */
export const MAX_HELD_KEYS = 4096;

export class HeldKeys {
  readonly #held = new Map<string, HeldKey>();
  /** Keys released by the bridge itself since: a client's `up` for one is answered without a second release. */
  readonly #released = new Set<string>();

  /** Entries from a restored `companion.held` value (invalid entries are skipped). */
  restore(value: unknown): number {
    if (!Array.isArray(value)) return 0;
    let n = 0;
    for (const raw of value.slice(0, MAX_HELD_KEYS)) {
      const h = heldKeyOf(raw);
      if (h) {
        this.#held.set(idOf(h), h);
        n++;
      }
    }
    return n;
  }

  get size(): number {
    return this.#held.size;
  }

  /** A press is about to be sent; false when the list is full (the press is refused, nothing is sent). */
  hold(h: HeldKey): boolean {
    const id = idOf(h);
    if (!this.#held.has(id) && this.#held.size >= MAX_HELD_KEYS) return false;
    this.#held.set(id, h);
    this.#released.delete(id);
    return true;
  }

  /** Companion confirmed the release. */
  release(host: { host: string; port: number }, t: HeldTarget): boolean {
    return this.#held.delete(idOf({ ...host, ...t }));
  }

  /** The bridge released it on its own (link back); remembered for the client's own `up`. */
  releasedByBridge(h: HeldKey): void {
    const id = idOf(h);
    this.#held.delete(id);
    this.#released.add(id);
    if (this.#released.size > MAX_HELD_KEYS)
      this.#released.delete(this.#released.values().next().value as string);
  }

  /** A client's `up` for a key the bridge already released: consumes the mark. */
  takeReleased(host: { host: string; port: number }, t: HeldTarget): boolean {
    return this.#released.delete(idOf({ ...host, ...t }));
  }

  /** Keys held on this Companion. */
  on(host: { host: string; port: number }): HeldKey[] {
    return [...this.#held.values()].filter((h) => h.host === host.host && h.port === host.port);
  }

  /** The value of `companion.held`. */
  value(): HeldKey[] {
    return [...this.#held.values()];
  }
}
