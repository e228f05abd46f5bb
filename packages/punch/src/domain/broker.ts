import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { fail } from '../errors.ts';
import { DEFAULT_STREAM } from '../protocol/schemas.ts';
import {
  deriveSessionState,
  generatePassphrase,
  isLive,
  peerCount,
  pooledRandomBytes,
  type CloseReason,
  type PeerClaim,
  type PeerSlot,
  type RandomBytes,
  type SessionRecord,
  type StreamRecord,
} from './session.ts';
import type { SessionStore } from './store.ts';

/**
 * Session broker: the single owner of session state. Commands in (create, close, claim, status), events out
 * (to the WebSocket layer of the next issue), time from the injected Clock. TTL expiry is a timer per
 * session (issue 3: "a timer, not a lazy check on read"), re-armed from the store after a restart.
 *
 * Ordering rule for the WebSocket layer (reference §1.2 "Message ordering"): every command applies its
 * change to memory and emits its events synchronously; persistence is awaited only afterwards.
 */
export type BrokerEvent =
  | { type: 'session_created'; session: SessionRecord }
  | { type: 'session_closed'; session: SessionRecord; reason: CloseReason }
  | { type: 'session_changed'; session: SessionRecord }
  | { type: 'peer_matched'; session: SessionRecord; stream: StreamRecord };

export interface CreateSessionInput {
  name: string;
  streams?: string[] | undefined;
  latency: number;
  ttl: number;
}

export interface BrokerOptions {
  store: SessionStore;
  clock: Clock;
  random?: RandomBytes;
  /** Live sessions at most (a bound on memory); 0 = unlimited. */
  maxSessions: number;
  /** How long a closed session stays as a tombstone so GET answers 410 (reference §1.2: 10 min). */
  tombstoneMs: number;
}

export type ClaimResult =
  | { ok: true; slot: PeerSlot; matched: boolean; stream: StreamRecord }
  | { ok: false; code: 'SESSION_EXPIRED' | 'STREAM_TAKEN' | 'INVALID_MESSAGE'; message: string };

export class SessionBroker {
  readonly #store: SessionStore;
  readonly #clock: Clock;
  readonly #random: RandomBytes | undefined;
  readonly #maxSessions: number;
  readonly #tombstoneMs: number;
  readonly #sessions = new Map<string, SessionRecord>();
  readonly #timers = new Map<string, TimerHandle>();
  readonly #listeners = new Set<(event: BrokerEvent) => void>();
  #live = 0;
  #stopped = false;

  constructor(options: BrokerOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#random = options.random;
    this.#maxSessions = options.maxSessions;
    this.#tombstoneMs = options.tombstoneMs;
  }

  /** Load the store: re-arm TTL timers, close sessions whose TTL passed while the server was down. */
  async start(): Promise<void> {
    const now = this.#clock.now();
    const expired: SessionRecord[] = [];
    // Writes are issued together, not awaited one by one: a store with group commit (SQLite) then commits
    // a restart's purges and TTL closes in one transaction instead of one per row.
    const purged: (void | Promise<void>)[] = [];
    for (const s of await this.#store.loadAll()) {
      if (!isLive(s) && (s.closedAt ?? 0) + this.#tombstoneMs <= now) {
        purged.push(this.#store.deleteSession(s.name));
        continue;
      }
      this.#sessions.set(s.name, s);
      if (!isLive(s)) {
        this.#armPurge(s);
        continue;
      }
      this.#live++;
      // A live session's state is a function of its streams; the stored row may predate the last claim.
      this.#refreshState(s);
      if (s.expiresAt <= now) expired.push(s);
      else this.#armExpiry(s);
    }
    await Promise.all([...purged, ...expired.map((s) => this.close(s.name, 'ttl_expired'))]);
  }

  /** Cancel timers; the store stays open (its owner closes it). */
  stop(): void {
    this.#stopped = true;
    for (const t of this.#timers.values()) t.cancel();
    this.#timers.clear();
  }

  subscribe(listener: (event: BrokerEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get liveSessions(): number {
    return this.#live;
  }

  get(name: string): SessionRecord | undefined {
    return this.#sessions.get(name);
  }

  async create(input: CreateSessionInput): Promise<SessionRecord> {
    const existing = this.#sessions.get(input.name);
    if (existing && isLive(existing)) throw fail('SESSION_EXISTS', `name: session "${input.name}" exists`);
    if (this.#maxSessions > 0 && this.#live >= this.#maxSessions) {
      throw fail('SESSION_LIMIT', `the server holds its maximum of ${this.#maxSessions} live sessions`, {
        headers: { 'retry-after': '60' },
      });
    }
    const now = this.#clock.now();
    // Whole seconds, so token `exp` (Unix seconds) equals the session expiry exactly.
    const expiresAt = Math.ceil((now + input.ttl * 1000) / 1000) * 1000;
    const session: SessionRecord = {
      name: input.name,
      id: (this.#random ?? pooledRandomBytes)(9).toString('base64url'),
      state: 'WAITING',
      passphrase: generatePassphrase(this.#random),
      latency: input.latency,
      ttl: input.ttl,
      createdAt: now,
      expiresAt,
      closedAt: null,
      closeReason: null,
      streams: (input.streams ?? [DEFAULT_STREAM]).map((name) => ({
        name,
        state: 'waiting',
        peerA: null,
        peerB: null,
        health: null,
      })),
    };
    // A new POST replaces a tombstone of the same name (reference §1.2 "Closed names").
    if (existing) this.#timers.get(existing.name)?.cancel();
    this.#sessions.set(session.name, session);
    this.#live++;
    this.#armExpiry(session);
    try {
      await this.#store.putSession(session);
    } catch (err) {
      // Not durable: undo, so the client's retry can succeed and nothing half-exists.
      this.#timers.get(session.name)?.cancel();
      this.#timers.delete(session.name);
      if (this.#sessions.get(session.name) === session) this.#sessions.delete(session.name);
      this.#live--;
      throw err;
    }
    this.#emit({ type: 'session_created', session });
    return session;
  }

  /** Close a live session (DELETE or TTL). Returns false when it was not live. */
  async close(name: string, reason: CloseReason): Promise<boolean> {
    const session = this.#sessions.get(name);
    if (!session || !isLive(session)) return false;
    session.state = 'CLOSED';
    session.closedAt = this.#clock.now();
    session.closeReason = reason;
    this.#live--;
    this.#timers.get(name)?.cancel();
    this.#armPurge(session);
    this.#emit({ type: 'session_closed', session, reason });
    await this.#store.updateSessionState(name, {
      state: 'CLOSED',
      closedAt: session.closedAt,
      closeReason: reason,
    });
    return true;
  }

  /**
   * Claim a peer slot of a stream (the WebSocket `register` of the next issue). The first claim takes slot
   * A, the second slot B and matches the stream (`waiting` → `ready`, session → READY).
   */
  async claim(
    name: string,
    streamName: string | undefined,
    claim: Omit<PeerClaim, 'claimedAt'>,
  ): Promise<ClaimResult> {
    const session = this.#sessions.get(name);
    if (!session || !isLive(session))
      return { ok: false, code: 'SESSION_EXPIRED', message: 'session is closed' };
    let stream: StreamRecord | undefined;
    if (streamName === undefined) {
      if (session.streams.length !== 1) {
        return { ok: false, code: 'INVALID_MESSAGE', message: 'stream: required in a multi-stream session' };
      }
      stream = session.streams[0];
    } else stream = session.streams.find((s) => s.name === streamName);
    if (!stream) return { ok: false, code: 'INVALID_MESSAGE', message: `stream: no stream "${streamName}"` };
    const full: PeerClaim = { ...claim, claimedAt: this.#clock.now() };
    let slot: PeerSlot;
    if (!stream.peerA) {
      stream.peerA = full;
      slot = 'a';
    } else if (!stream.peerB) {
      stream.peerB = full;
      slot = 'b';
    } else return { ok: false, code: 'STREAM_TAKEN', message: `stream "${stream.name}" has two peers` };
    const matched = peerCount(stream) === 2;
    if (matched) stream.state = 'ready';
    this.#refreshState(session);
    if (matched) this.#emit({ type: 'peer_matched', session, stream });
    this.#emit({ type: 'session_changed', session });
    await this.#store.putStreams(session.name, session.streams);
    return { ok: true, slot, matched, stream };
  }

  /** Free a peer slot (the stream goes back to `waiting`). */
  async release(name: string, streamName: string, slot: PeerSlot): Promise<void> {
    const session = this.#sessions.get(name);
    const stream = session?.streams.find((s) => s.name === streamName);
    if (!session || !stream || !isLive(session)) return;
    if (slot === 'a') stream.peerA = null;
    else stream.peerB = null;
    stream.state = 'waiting';
    this.#refreshState(session);
    this.#emit({ type: 'session_changed', session });
    await this.#store.putStreams(session.name, session.streams);
  }

  /** A peer's SRT status report: `connected` moves a matched stream to `connected`; others back to `ready`. */
  async reportStatus(
    name: string,
    streamName: string,
    srt: 'connecting' | 'connected' | 'disconnected' | 'error',
  ): Promise<void> {
    const session = this.#sessions.get(name);
    const stream = session?.streams.find((s) => s.name === streamName);
    if (!session || !stream || !isLive(session) || stream.state === 'waiting') return;
    const next = srt === 'connected' ? 'connected' : srt === 'connecting' ? stream.state : 'ready';
    if (next === stream.state) return;
    stream.state = next;
    this.#refreshState(session);
    this.#emit({ type: 'session_changed', session });
    await this.#store.putStreams(session.name, session.streams);
  }

  #refreshState(session: SessionRecord): void {
    // RELAYING is never entered (spec: future); CLOSED is final.
    if (isLive(session)) session.state = deriveSessionState(session.streams);
  }

  #armExpiry(session: SessionRecord): void {
    if (this.#stopped) return;
    const handle = this.#clock.setTimer(Math.max(0, session.expiresAt - this.#clock.now()), () => {
      this.#timers.delete(session.name);
      if (this.#sessions.get(session.name) !== session) return;
      void this.close(session.name, 'ttl_expired').catch(() => {
        /* the store failed; the session is closed in memory and the next start closes it again */
      });
    });
    this.#timers.set(session.name, handle);
  }

  #armPurge(session: SessionRecord): void {
    if (this.#stopped) return;
    const due = (session.closedAt ?? this.#clock.now()) + this.#tombstoneMs;
    const handle = this.#clock.setTimer(Math.max(0, due - this.#clock.now()), () => {
      this.#timers.delete(session.name);
      if (this.#sessions.get(session.name) !== session) return;
      this.#sessions.delete(session.name);
      void Promise.resolve(this.#store.deleteSession(session.name)).catch(() => {
        /* purged again at the next start */
      });
    });
    this.#timers.set(session.name, handle);
  }

  #emit(event: BrokerEvent): void {
    for (const l of this.#listeners) {
      try {
        l(event);
      } catch {
        // A failing subscriber must not break the command or the other subscribers.
      }
    }
  }
}
