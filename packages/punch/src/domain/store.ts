import type { CloseReason, InviteRecord, SessionRecord, SessionState, StreamRecord } from './session.ts';

/**
 * Durable session store. The broker keeps the working set in memory (one owner per session, like the
 * original's one Durable Object per session) and writes every change through to the store, so sessions,
 * their streams and peer claims survive a restart.
 *
 * Methods may be synchronous or return promises (the SQLite store commits in groups; a shared store for
 * several instances would be remote), so callers always `await` them. A write that throws or rejects was
 * not saved. Health is not persisted: it is stale after a restart.
 */
export interface SessionStore {
  /** Every stored session, closed tombstones included. */
  loadAll(): SessionRecord[] | Promise<SessionRecord[]>;
  /** Insert a session with its streams and claims, replacing any stored session of the same name. */
  putSession(session: SessionRecord): void | Promise<void>;
  updateSessionState(
    name: string,
    change: { state: SessionState; closedAt: number | null; closeReason: CloseReason | null },
  ): void | Promise<void>;
  /**
   * Persist a session's expiry (an extension, README "Lifetime"). `keepFrom` (Unix ms) is when a session
   * past its TTL last had media: a store whose records expire on their own (Redis) keeps it from then on.
   */
  putExpiry(name: string, expiresAt: number, keepFrom: number): void | Promise<void>;
  /** Persist a session's invites (README "Invites"): issued and revoked peer tokens. */
  putInvites(name: string, invites: readonly InviteRecord[]): void | Promise<void>;
  /** Persist the streams of a session: their states and peer claims. */
  putStreams(session: string, streams: readonly StreamRecord[]): void | Promise<void>;
  deleteSession(name: string): void | Promise<void>;
  /** A harmless write that proves the store can save again (used while `/api/health` reports failing). */
  probe?(): void | Promise<void>;
  close(): void | Promise<void>;
}

function copy(session: SessionRecord): SessionRecord {
  return structuredClone(session);
}

/** Deep copies without health (not persisted), so stored claims never alias the broker's live records. */
function storedStreams(streams: readonly StreamRecord[]): StreamRecord[] {
  return streams.map((s) => ({ ...structuredClone(s), health: null }));
}

/** In-memory store for tests and `PUNCH_DB=:memory:`-like setups; keeps deep copies, like a real store. */
export class MemoryStore implements SessionStore {
  readonly #sessions = new Map<string, SessionRecord>();

  loadAll(): SessionRecord[] {
    return [...this.#sessions.values()].map(copy);
  }

  putSession(session: SessionRecord): void {
    this.#sessions.set(session.name, { ...copy(session), streams: storedStreams(session.streams) });
  }

  updateSessionState(
    name: string,
    change: { state: SessionState; closedAt: number | null; closeReason: CloseReason | null },
  ): void {
    const s = this.#sessions.get(name);
    if (s) Object.assign(s, change);
  }

  putExpiry(name: string, expiresAt: number): void {
    const s = this.#sessions.get(name);
    if (s) s.expiresAt = expiresAt;
  }

  putInvites(name: string, invites: readonly InviteRecord[]): void {
    const s = this.#sessions.get(name);
    if (s) s.invites = structuredClone([...invites]);
  }

  putStreams(session: string, streams: readonly StreamRecord[]): void {
    const s = this.#sessions.get(session);
    if (s) s.streams = storedStreams(streams);
  }

  deleteSession(name: string): void {
    this.#sessions.delete(name);
  }

  close(): void {
    /* nothing to release */
  }
}
