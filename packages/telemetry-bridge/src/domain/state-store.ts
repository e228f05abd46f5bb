/**
 * Canonical state store (docs/protocol.md "Ownership, stale and expiry"): one value per path, one owner per path, a version per key and the
 * hub-wide offset of the key's last change. Ownership is by namespace prefix (docs/protocol.md "Ownership"):
 * a write from anyone but the owner is refused; an unchanged value produces no delta; `null` clears the key.
 * Keys are also indexed by segment (PathIndex) so snapshots match patterns without a full scan.
 */
import { PathIndex } from './path-index.ts';

export interface StateEntry {
  path: string;
  value: unknown;
  /** JSON text of `value`, kept so "unchanged" is one string compare and snapshots need no re-serialising. */
  valueJson: string;
  owner: string;
  version: number;
  stale: boolean;
  offset: number;
  updatedAt: number;
}

export type WriteOutcome =
  | { kind: 'changed'; entry: StateEntry; deleted: boolean }
  | { kind: 'unchanged'; entry: StateEntry | undefined }
  | { kind: 'conflict'; owner: string | undefined };

export class StateStore {
  readonly #entries = new Map<string, StateEntry>();
  /** Prefix → owner. Lookup walks the path's own prefixes, longest first: O(segments), not O(rules). */
  readonly #rules = new Map<string, string>();
  readonly #byOwner = new Map<string, Set<string>>();
  readonly #index = new PathIndex();

  /** `prefix` is a dotted namespace (`companion`, `app.cam.custom`); it owns that key and everything below. */
  claim(prefix: string, owner: string): void {
    this.#rules.set(prefix, owner);
  }

  unclaim(prefix: string): void {
    this.#rules.delete(prefix);
  }

  /** The owner of the longest claimed prefix of `path` (so `buttons.device.x` can be carved out of `buttons`). */
  ownerOf(path: string): string | undefined {
    let end = path.length;
    for (;;) {
      const owner = this.#rules.get(end === path.length ? path : path.slice(0, end));
      if (owner !== undefined) return owner;
      end = path.lastIndexOf('.', end - 1);
      if (end <= 0) return undefined;
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  get(path: string): StateEntry | undefined {
    return this.#entries.get(path);
  }

  entries(): IterableIterator<StateEntry> {
    return this.#entries.values();
  }

  pathsOf(owner: string): ReadonlySet<string> {
    return this.#byOwner.get(owner) ?? new Set();
  }

  /** Number of keys an owner holds (per-client key cap). */
  countOf(owner: string): number {
    return this.#byOwner.get(owner)?.size ?? 0;
  }

  /** The stored keys matching any of `patterns`, each once, found through the segment index. */
  matching(patterns: Iterable<string>): string[] {
    const out = new Set<string>();
    for (const p of patterns) this.#index.match(p, out);
    return [...out];
  }

  /** Check a write without applying it; the caller needs the offset of the delta before applying. */
  check(path: string, writer: string, valueJson: string): WriteOutcome {
    const owner = this.ownerOf(path);
    if (owner !== writer) return { kind: 'conflict', owner };
    const existing = this.#entries.get(path);
    if (existing && !existing.stale && existing.valueJson === valueJson)
      return { kind: 'unchanged', entry: existing };
    if (!existing && valueJson === 'null') return { kind: 'unchanged', entry: undefined };
    return { kind: 'changed', entry: existing as StateEntry, deleted: valueJson === 'null' };
  }

  /** Apply a checked write. Writing the same value to a stale key clears `stale`. */
  apply(
    path: string,
    owner: string,
    value: unknown,
    valueJson: string,
    offset: number,
    now: number,
  ): StateEntry {
    const existing = this.#entries.get(path);
    const entry: StateEntry = {
      path,
      value,
      valueJson,
      owner,
      version: (existing?.version ?? 0) + 1,
      stale: false,
      offset,
      updatedAt: now,
    };
    if (valueJson === 'null') this.#delete(path, owner);
    else this.#put(entry);
    return entry;
  }

  #delete(path: string, owner: string): void {
    if (!this.#entries.delete(path)) return;
    this.#index.remove(path);
    const set = this.#byOwner.get(owner);
    set?.delete(path);
    if (set?.size === 0) this.#byOwner.delete(owner);
  }

  #put(entry: StateEntry): void {
    const prev = this.#entries.get(entry.path);
    if (prev && prev.owner !== entry.owner) this.#byOwner.get(prev.owner)?.delete(entry.path);
    if (!prev) this.#index.add(entry.path);
    this.#entries.set(entry.path, entry);
    let set = this.#byOwner.get(entry.owner);
    if (!set) this.#byOwner.set(entry.owner, (set = new Set()));
    set.add(entry.path);
  }

  /** Restore an entry read back from the event log (no ownership check: the log is the authority). */
  restore(entry: StateEntry): void {
    if (entry.valueJson === 'null') {
      const prev = this.#entries.get(entry.path);
      if (prev) this.#delete(entry.path, prev.owner);
      return;
    }
    this.#put(entry);
  }

  /** Every entry as one JSON object (the event log's compaction checkpoint); the value is spliced in. */
  *checkpoint(): Generator<string> {
    for (const e of this.#entries.values()) {
      yield (
        `{"path":${JSON.stringify(e.path)},"value":${e.valueJson},"owner":${JSON.stringify(e.owner)},` +
        `"version":${e.version},"stale":${e.stale},"offset":${e.offset},"updatedAt":${e.updatedAt}}`
      );
    }
  }

  /** Set the stale flag; returns the entry if it changed (the caller publishes one delta per changed key). */
  setStale(path: string, stale: boolean, offset: number, now: number): StateEntry | undefined {
    const e = this.#entries.get(path);
    if (!e || e.stale === stale) return undefined;
    const next: StateEntry = { ...e, stale, version: e.version + 1, offset, updatedAt: now };
    this.#entries.set(path, next);
    return next;
  }

  countByOwner(): Map<string, number> {
    const m = new Map<string, number>();
    for (const [owner, set] of this.#byOwner) m.set(owner, set.size);
    return m;
  }
}
