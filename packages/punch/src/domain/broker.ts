import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { DEFAULT_STREAM } from '../protocol/schemas.ts';
import { refuse, type Outcome, type Refusal } from './outcome.ts';
import {
  deriveSessionState,
  generatePassphrase,
  isLive,
  peerCount,
  pooledRandomBytes,
  MAX_INVITES,
  type CloseReason,
  type InviteRecord,
  type PeerClaim,
  type PeerSlot,
  type RandomBytes,
  type SessionRecord,
  type StreamHealth,
  type StreamRelay,
  type StreamRecord,
  type StreamState,
} from './session.ts';
import type { SessionStore } from './store.ts';

/**
 * Session broker: the single owner of session state. Commands in (create, close, claim, release, status),
 * typed outcomes and events out, time from the injected Clock. TTL expiry is a timer per session, re-armed
 * from the store after a restart.
 *
 * Durability rule, the same for every command: the change is applied to memory synchronously (so a
 * concurrent command sees it: a claimed slot is taken at once), then saved; only after the save succeeded
 * are the events emitted and the outcome `ok` returned. When the save fails, the command's own change is
 * undone in memory and the outcome is `STORE_FAILED`: nothing is acknowledged that a restart would undo,
 * and memory and disk agree. Events of one command are emitted together in one synchronous block.
 */
export type BrokerEvent =
  | { type: 'session_created'; session: SessionRecord }
  | { type: 'session_closed'; session: SessionRecord; reason: CloseReason }
  | { type: 'session_changed'; session: SessionRecord }
  | { type: 'peer_matched'; session: SessionRecord; stream: StreamRecord }
  /** An invite was revoked: connections holding its token are ended (README "Invites"). */
  | { type: 'invite_revoked'; session: SessionRecord; invite: InviteRecord }
  /** A claimed slot's holder came (back) or left; memory only (README "Presence"). */
  | { type: 'peer_presence'; session: SessionRecord; stream: StreamRecord; slot: PeerSlot; present: boolean };

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
  /** How long a closed session stays as a tombstone so GET answers 410 (10 min by default). */
  tombstoneMs: number;
  /** Tombstones kept at most; the oldest is forgotten first. Default 10,000. */
  maxTombstones?: number;
  /** Delay before a TTL close whose save failed is tried again. Default 5 s. */
  retryMs?: number;
  /**
   * Past its TTL, a session whose media has stopped closes after this long with nobody present (README
   * "Lifetime"). Default 5 s.
   */
  overtimeSettleMs?: number;
  /**
   * Past its TTL, a session with a peer present but no media reported closes after this long; also the
   * time a restarted broker gives the peers of a session past its TTL to come back. Default 30 s.
   */
  overtimeIdleMs?: number;
  /** Past its TTL, how often the store's copy is kept from expiring (Redis key expiry). Default 10 min. */
  overtimeLeaseMs?: number;
}

/** The store's state as `/api/health` reports it. */
export type StoreHealth = { state: 'ok' } | { state: 'failing'; error: string; since: number };

export type CreateOutcome = Outcome<
  { session: SessionRecord },
  'SESSION_EXISTS' | 'SESSION_LIMIT' | 'STORE_FAILED'
>;
export type CloseOutcome = Outcome<{ session: SessionRecord }, 'SESSION_EXPIRED' | 'STORE_FAILED'>;
export type ExtendOutcome = Outcome<{ session: SessionRecord }, 'SESSION_EXPIRED' | 'STORE_FAILED'>;
export type InviteOutcome = Outcome<
  { session: SessionRecord; invite: InviteRecord },
  'SESSION_EXPIRED' | 'INVALID_MESSAGE' | 'STORE_FAILED'
>;
export type SrtReport = 'connecting' | 'connected' | 'disconnected' | 'error';
export type ClaimResult = Outcome<
  { slot: PeerSlot; matched: boolean; stream: StreamRecord },
  'SESSION_EXPIRED' | 'STREAM_TAKEN' | 'INVALID_MESSAGE' | 'STORE_FAILED'
>;
/**
 * Called once a claim is saved, synchronously before the broker's events: the WebSocket layer sends its
 * `peer` messages here, so no `await` separates a saved claim from its messages and `peer` precedes the
 * `peer_match` and `session` that the events produce.
 */
export interface ClaimHooks {
  onCommitted?: (result: { slot: PeerSlot; matched: boolean; stream: StreamRecord }) => void;
}
export type StreamChangeOutcome = Outcome<
  { changed: boolean },
  'SESSION_EXPIRED' | 'INVALID_MESSAGE' | 'STORE_FAILED'
>;

const SLOT_NAMES: readonly PeerSlot[] = ['a', 'b'];

/** A matched stream whose link is not up: `relaying` when it was moved to the relay, else `ready`. */
function matchedState(stream: StreamRecord): StreamState {
  return stream.relay?.state === 'allocated' ? 'relaying' : 'ready';
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class SessionBroker {
  readonly #store: SessionStore;
  readonly #clock: Clock;
  readonly #random: RandomBytes | undefined;
  readonly #maxSessions: number;
  readonly #tombstoneMs: number;
  readonly #maxTombstones: number;
  readonly #retryMs: number;
  readonly #sessions = new Map<string, SessionRecord>();
  /** Lower-cased name → name of the live session, for the case-insensitive uniqueness rule. */
  readonly #folded = new Map<string, string>();
  /** Closed sessions in the order they closed: the first is the oldest tombstone. */
  readonly #tombstones = new Map<string, SessionRecord>();
  readonly #timers = new Map<string, TimerHandle>();
  readonly #listeners = new Set<(event: BrokerEvent) => void>();
  /**
   * Per session, the stream changes whose save is still in flight, oldest first. A group commit rejects
   * every writer of its batch in the order they wrote; undoing each change as its rejection arrives would
   * run the undos oldest first, and an older undo sees a slot a newer change has taken (a release then a
   * claim of the same slot would end with the slot empty in memory and held on disk). So a failed save undoes
   * the newer unsaved changes first, then its own: memory returns to what is saved.
   */
  readonly #unsaved = new Map<SessionRecord, { undo: () => void; undone: boolean }[]>();
  /**
   * Sessions whose close is being saved, with the close's outcome. Such a session is still live (state,
   * name, tombstone-free) until the save succeeds: nothing may report it closed before a restart would.
   */
  readonly #closing = new Map<SessionRecord, Promise<CloseOutcome>>();
  /**
   * Presence: which claimed slots have a connected holder (README "Presence"). Memory only: after a restart
   * no peer is connected, so every loaded claim is absent until its peer registers again. A stream is
   * `ready` or `connected` only while both of its claims are present; otherwise it shows `waiting`.
   */
  readonly #present = new Map<StreamRecord, Set<PeerSlot>>();
  /** Each present slot's last SRT status report (memory only), for the TTL rule (README "Lifetime"). */
  readonly #srt = new Map<StreamRecord, Map<PeerSlot, SrtReport>>();
  /** Live sessions past their TTL, kept open while media flows (README "Lifetime"). */
  readonly #overtime = new Set<SessionRecord>();
  /** The one timer of a session in overtime: its kind and when it fires (#armOvertimeCheck). */
  readonly #overtimeTimer = new Map<SessionRecord, { kind: 'lease' | 'idle' | 'settle'; at: number }>();
  readonly #overtimeSettleMs: number;
  readonly #overtimeIdleMs: number;
  readonly #overtimeLeaseMs: number;
  #storeHealth: StoreHealth = { state: 'ok' };
  #lastProbe = Number.NEGATIVE_INFINITY;
  #live = 0;
  #stopped = false;

  constructor(options: BrokerOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#random = options.random;
    this.#maxSessions = options.maxSessions;
    this.#tombstoneMs = options.tombstoneMs;
    this.#maxTombstones = options.maxTombstones ?? 10_000;
    this.#retryMs = options.retryMs ?? 5_000;
    this.#overtimeSettleMs = options.overtimeSettleMs ?? 5_000;
    this.#overtimeIdleMs = options.overtimeIdleMs ?? 30_000;
    this.#overtimeLeaseMs = options.overtimeLeaseMs ?? 600_000;
  }

  /** Load the store: re-arm TTL timers, close sessions whose TTL passed while the server was down. */
  async start(): Promise<void> {
    const now = this.#clock.now();
    const expired: SessionRecord[] = [];
    // Writes are issued together, not awaited one by one: a store with group commit (SQLite) then commits
    // a restart's purges and TTL closes in one transaction instead of one per row.
    const purged: (void | Promise<void>)[] = [];
    const closed: SessionRecord[] = [];
    for (const s of await this.#store.loadAll()) {
      if (!isLive(s) && (s.closedAt ?? 0) + this.#tombstoneMs <= now) {
        purged.push(this.#store.deleteSession(s.name));
        continue;
      }
      this.#sessions.set(s.name, s);
      if (!isLive(s)) {
        closed.push(s);
        continue;
      }
      this.#live++;
      this.#folded.set(s.name.toLowerCase(), s.name);
      // Nobody is connected to a broker that just started: claims are kept (their holders get them back,
      // README "Reconnection") but no stream is matched until both of its peers are present again.
      for (const st of s.streams) st.state = 'waiting';
      // A live session's state is a function of its streams; the stored row may predate the last claim.
      this.#refreshState(s);
      // Past its TTL while the broker was down: closed at once if nobody holds a slot; otherwise its peers
      // get `overtimeIdleMs` to come back and report media (README "Lifetime").
      if (s.expiresAt > now) this.#armExpiry(s);
      else if (s.streams.some((st) => peerCount(st) > 0)) {
        this.#overtime.add(s);
        this.#armOvertimeCheck(s, this.#overtimeIdleMs, 'idle');
      } else expired.push(s);
    }
    closed.sort((a, b) => (a.closedAt ?? 0) - (b.closedAt ?? 0));
    for (const s of closed) this.#addTombstone(s);
    // A purge that fails is harmless: the row is an old tombstone and is purged again at the next start.
    await Promise.all(purged.map(async (p) => p).map(async (p) => p.catch(() => undefined)));
    const results = await Promise.all(expired.map((s) => this.close(s.name, 'ttl_expired')));
    // A close that could not be saved is retried by its timer; the session stays live in memory and on disk.
    results.forEach((r, i) => {
      const s = expired[i];
      if (!r.ok && s) this.#armRetry(s);
    });
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

  get tombstones(): number {
    return this.#tombstones.size;
  }

  /** The live sessions (not the tombstones), e.g. to find the streams on a relay that was lost. */
  liveSessionRecords(): SessionRecord[] {
    return [...this.#sessions.values()].filter(isLive);
  }

  get(name: string): SessionRecord | undefined {
    return this.#sessions.get(name);
  }

  /** The store's state as of the last save, without probing. */
  get storeState(): StoreHealth {
    return this.#storeHealth;
  }

  /**
   * The store's state: `failing` from the first failed save until the next successful one. While failing,
   * a call tries a probe write (at most every `retryMs`), so the state recovers without client traffic.
   */
  async storeHealth(): Promise<StoreHealth> {
    const probe = this.#store.probe?.bind(this.#store);
    if (this.#storeHealth.state === 'failing' && probe) {
      const now = this.#clock.monotonicMs();
      if (now - this.#lastProbe >= this.#retryMs) {
        this.#lastProbe = now;
        await this.#save(probe);
      }
    }
    return this.#storeHealth;
  }

  /** Run one store write; record the store's health; a failure becomes a STORE_FAILED refusal. */
  async #save(write: () => void | Promise<void>): Promise<Refusal<'STORE_FAILED'> | undefined> {
    try {
      await write();
      if (this.#storeHealth.state !== 'ok') this.#storeHealth = { state: 'ok' };
      return undefined;
    } catch (err) {
      if (this.#storeHealth.state === 'ok') {
        this.#storeHealth = { state: 'failing', error: describe(err), since: this.#clock.now() };
      }
      // The client learns only that nothing changed; the cause goes to storeHealth (and the io layer's log).
      return refuse('STORE_FAILED', 'the session store could not save the change; nothing was changed');
    }
  }

  /** The live session whose name equals `name` ignoring case, if any. */
  #liveNamesake(name: string): SessionRecord | undefined {
    const s = this.#sessions.get(this.#folded.get(name.toLowerCase()) ?? '');
    return s && isLive(s) ? s : undefined;
  }

  /**
   * Names are unique ignoring case: `CAM1` is refused while `cam1` is live (operators read names aloud and
   * type them on phones). Lookups stay exact: a token names its session exactly.
   */
  async create(input: CreateSessionInput): Promise<CreateOutcome> {
    const existing = this.#sessions.get(input.name);
    if (existing && isLive(existing)) return refuse('SESSION_EXISTS', `name: session "${input.name}" exists`);
    const namesake = this.#liveNamesake(input.name);
    if (namesake) {
      return refuse('SESSION_EXISTS', `name: differs only in case from the live session "${namesake.name}"`);
    }
    if (this.#maxSessions > 0 && this.#live >= this.#maxSessions) {
      return refuse('SESSION_LIMIT', `the server holds its maximum of ${this.#maxSessions} live sessions`);
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
      invites: [],
      streams: (input.streams ?? [DEFAULT_STREAM]).map((name) => ({
        name,
        state: 'waiting',
        peerA: null,
        peerB: null,
        health: null,
      })),
    };
    // A new POST replaces a tombstone of the same name.
    if (existing) {
      this.#timers.get(existing.name)?.cancel();
      this.#tombstones.delete(existing.name);
    }
    this.#sessions.set(session.name, session);
    this.#folded.set(session.name.toLowerCase(), session.name);
    this.#live++;
    this.#armExpiry(session);
    const failed = await this.#save(() => this.#store.putSession(session));
    if (failed) {
      // Not durable: undo, so the client's retry can succeed and nothing half-exists.
      this.#timers.get(session.name)?.cancel();
      this.#timers.delete(session.name);
      this.#live--;
      if (this.#folded.get(session.name.toLowerCase()) === session.name)
        this.#folded.delete(session.name.toLowerCase());
      if (this.#sessions.get(session.name) === session) {
        this.#sessions.delete(session.name);
        if (existing) {
          this.#sessions.set(existing.name, existing);
          this.#addTombstone(existing);
        }
      }
      return failed;
    }
    this.#emit({ type: 'session_created', session });
    return { ok: true, session };
  }

  /**
   * Close a live session (DELETE or TTL). Nothing shows the session closed before the close is saved:
   * while the save is in flight the session stays live in memory (GET answers 200, its name stays taken,
   * the `session_closed` event waits), and commands on its streams wait for the close to settle. A saved
   * close then refuses them with SESSION_EXPIRED; a failed one leaves them to run on the live session.
   */
  async close(name: string, reason: CloseReason): Promise<CloseOutcome> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const session = this.#sessions.get(name);
    if (!session || !isLive(session))
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    const closing = this.#saveClose(session, reason);
    this.#closing.set(session, closing);
    return closing;
  }

  async #saveClose(session: SessionRecord, reason: CloseReason): Promise<CloseOutcome> {
    const { name } = session;
    const closedAt = this.#clock.now();
    this.#timers.get(name)?.cancel();
    this.#timers.delete(name);
    const failed = await this.#save(() =>
      this.#store.updateSessionState(name, { state: 'CLOSED', closedAt, closeReason: reason }),
    );
    this.#closing.delete(session);
    if (failed) {
      this.#armExpiry(session);
      return failed;
    }
    session.state = 'CLOSED';
    session.closedAt = closedAt;
    session.closeReason = reason;
    this.#overtime.delete(session);
    this.#overtimeTimer.delete(session);
    this.#live--;
    if (this.#folded.get(name.toLowerCase()) === name) this.#folded.delete(name.toLowerCase());
    this.#addTombstone(session);
    this.#emit({ type: 'session_closed', session, reason });
    return { ok: true, session };
  }

  /** Wait while the session of this name has a close being saved (no await at all when it has none). */
  async #closeSettled(name: string): Promise<void> {
    for (;;) {
      const session = this.#sessions.get(name);
      const pending = session && this.#closing.get(session);
      if (!pending) return;
      await pending;
    }
  }

  #closePending(name: string): boolean {
    const session = this.#sessions.get(name);
    return session !== undefined && this.#closing.has(session);
  }

  #stream(
    name: string,
    streamName: string | undefined,
  ): { session: SessionRecord; stream: StreamRecord } | Refusal<'SESSION_EXPIRED' | 'INVALID_MESSAGE'> {
    const session = this.#sessions.get(name);
    if (!session || !isLive(session)) return refuse('SESSION_EXPIRED', 'session is closed');
    let stream: StreamRecord | undefined;
    if (streamName === undefined) {
      if (session.streams.length !== 1) {
        return refuse('INVALID_MESSAGE', 'stream: required in a multi-stream session');
      }
      stream = session.streams[0];
    } else stream = session.streams.find((s) => s.name === streamName);
    if (!stream) return refuse('INVALID_MESSAGE', `stream: no stream "${streamName}"`);
    return { session, stream };
  }

  /**
   * Claim a peer slot of a stream (the WebSocket `register`). The first claim takes slot A, the second
   * slot B and matches the stream (`waiting` → `ready`, session → READY). The slot is taken in memory at
   * once (a concurrent third claim gets STREAM_TAKEN); the outcome and the events follow the save.
   */
  async claim(
    name: string,
    streamName: string | undefined,
    claim: Omit<PeerClaim, 'claimedAt'>,
    hooks: ClaimHooks = {},
  ): Promise<ClaimResult> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const found = this.#stream(name, streamName);
    if ('ok' in found) return found;
    const { session, stream } = found;
    const full: PeerClaim = { ...claim, claimedAt: this.#clock.now() };
    let slot: PeerSlot;
    if (!stream.peerA) {
      stream.peerA = full;
      slot = 'a';
    } else if (!stream.peerB) {
      stream.peerB = full;
      slot = 'b';
    } else return refuse('STREAM_TAKEN', `stream "${stream.name}" has two peers`);
    const previousState = stream.state;
    const wasMatched = this.#bothPresent(stream);
    const wasPresent = this.#setPresent(stream, slot, true);
    if (peerCount(stream) === 2 && this.#bothPresent(stream)) stream.state = matchedState(stream);
    // A first claim is announced by `session` alone; `peer_presence` is for a claim's holder coming back.
    return this.#commitClaim(
      session,
      stream,
      slot,
      hooks,
      { wasMatched, wasPresent: true, moved: true },
      () => {
        if (slot === 'a' && stream.peerA === full) stream.peerA = null;
        if (slot === 'b' && stream.peerB === full) stream.peerB = null;
        this.#setPresent(stream, slot, wasPresent);
        if (peerCount(stream) < 2) stream.state = previousState;
      },
    );
  }

  /**
   * Save a claim change; on failure undo it, otherwise run the hook and emit (one synchronous block).
   * `peer_matched` follows only a change the observers must learn: the stream became matched with both
   * peers present, or a matched claim moved to another address or port.
   */
  async #commitClaim(
    session: SessionRecord,
    stream: StreamRecord,
    slot: PeerSlot,
    hooks: ClaimHooks,
    before: { wasMatched: boolean; wasPresent: boolean; moved: boolean },
    undo: () => void,
  ): Promise<ClaimResult> {
    this.#refreshState(session);
    const matched = peerCount(stream) === 2 && this.#bothPresent(stream);
    const failed = await this.#saveStreams(session, undo);
    if (failed) return failed;
    hooks.onCommitted?.({ slot, matched, stream });
    // A new pair, or the same peer back: its SRT status is unknown until it reports again.
    this.#srt.get(stream)?.delete(slot);
    this.#overtimeChanged(session);
    if (!before.wasPresent) this.#emit({ type: 'peer_presence', session, stream, slot, present: true });
    if (matched && (!before.wasMatched || before.moved))
      this.#emit({ type: 'peer_matched', session, stream });
    this.#emit({ type: 'session_changed', session });
    return { ok: true, slot, matched, stream };
  }

  #presentSet(stream: StreamRecord): Set<PeerSlot> {
    let set = this.#present.get(stream);
    if (!set) {
      set = new Set();
      this.#present.set(stream, set);
    }
    return set;
  }

  /** Set a slot's presence; returns whether it was present before. */
  #setPresent(stream: StreamRecord, slot: PeerSlot, present: boolean): boolean {
    const set = this.#presentSet(stream);
    const was = set.has(slot);
    if (present) set.add(slot);
    else set.delete(slot);
    return was;
  }

  #bothPresent(stream: StreamRecord): boolean {
    const set = this.#present.get(stream);
    return set !== undefined && set.has('a') && set.has('b');
  }

  /** Whether the holder of a claimed slot is connected (README "Presence"). */
  isPresent(stream: StreamRecord, slot: PeerSlot): boolean {
    const claimed = slot === 'a' ? stream.peerA : stream.peerB;
    return claimed !== null && (this.#present.get(stream)?.has(slot) ?? false);
  }

  /** Claimed slots of live sessions, present and absent (for the metrics). */
  peerCounts(): { present: number; absent: number } {
    let present = 0;
    let absent = 0;
    for (const s of this.#sessions.values()) {
      if (!isLive(s)) continue;
      for (const st of s.streams) {
        const p = this.presentPeers(st);
        present += p;
        absent += peerCount(st) - p;
      }
    }
    return { present, absent };
  }

  /** Claimed slots whose holder is connected: the `peers` count of the `session` message. */
  presentPeers(stream: StreamRecord): number {
    return (this.isPresent(stream, 'a') ? 1 : 0) + (this.isPresent(stream, 'b') ? 1 : 0);
  }

  /**
   * The holder of a claimed slot left (its connection closed or failed the liveness probe). Memory only,
   * nothing to save: the claim stays (its holder may take it back), the stream shows `waiting` (it has no
   * live pair) and its health is dropped; unless the other end is present, reported `connected` and has
   * fresh health (`otherEndFresh`, the hub knows the samples): then the stream stays `connected`
   * (README "State from media"). Emits `peer_presence` then `session_changed`. The slot itself is
   * freed later with `release` (the signalling layer's grace timer).
   */
  markAbsent(name: string, streamName: string, slot: PeerSlot, otherEndFresh = false): boolean {
    const found = this.#stream(name, streamName);
    if ('ok' in found) return false;
    const { session, stream } = found;
    if (!this.#setPresent(stream, slot, false)) return false;
    this.#srt.get(stream)?.delete(slot);
    // README "State from media": a link whose other end is present and reports `connected` stays
    // `connected` (a lost signalling connection is not a lost link); otherwise the stream waits.
    if (stream.state !== 'connected' || !otherEndFresh || !this.#mediaOn(stream)) {
      stream.state = 'waiting';
      stream.health = null;
    }
    this.#refreshState(session);
    this.#emit({ type: 'peer_presence', session, stream, slot, present: false });
    this.#emit({ type: 'session_changed', session });
    this.#overtimeChanged(session);
    return true;
  }

  /**
   * Put a new claim into a slot that is already claimed: a peer that reconnected takes its slot back (same
   * token), or a new peer takes over a slot whose holder has been gone too long (the WebSocket layer decides
   * which). Saved like every change: on a failed save the previous claim is restored. A takeover by another
   * holder ends the old pair's SRT connection, so a `connected` stream goes back to `ready`.
   */
  async replaceClaim(
    name: string,
    streamName: string,
    slot: PeerSlot,
    claim: Omit<PeerClaim, 'claimedAt'>,
    hooks: ClaimHooks = {},
  ): Promise<ClaimResult> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const found = this.#stream(name, streamName);
    if ('ok' in found) return found;
    const { session, stream } = found;
    const previous = slot === 'a' ? stream.peerA : stream.peerB;
    if (!previous) return refuse('INVALID_MESSAGE', `stream "${stream.name}": slot ${slot} is not claimed`);
    const full: PeerClaim = { ...claim, claimedAt: this.#clock.now() };
    const previousState = stream.state;
    const wasMatched = this.#bothPresent(stream);
    if (slot === 'a') stream.peerA = full;
    else stream.peerB = full;
    const wasPresent = this.#setPresent(stream, slot, true);
    // docs/relay.md "Allocation": the relay is pinned to the address the claim came from; a claim from
    // another address cannot use it, so the stream leaves it (the signalling hub releases the allocation).
    const relayBefore = stream.relay;
    if (relayBefore?.state === 'allocated' && previous.ip !== full.ip) {
      stream.relay = null;
      if (stream.state === 'relaying' || stream.state === 'connected') stream.state = matchedState(stream);
    }
    if (stream.state === 'connected' && (previous.holder ?? null) !== (full.holder ?? null)) {
      stream.state = matchedState(stream);
    }
    if (stream.state === 'waiting' && peerCount(stream) === 2 && this.#bothPresent(stream)) {
      stream.state = matchedState(stream);
    }
    const moved = previous.ip !== full.ip || previous.port !== full.port;
    return this.#commitClaim(session, stream, slot, hooks, { wasMatched, wasPresent, moved }, () => {
      if (slot === 'a' && stream.peerA === full) stream.peerA = previous;
      if (slot === 'b' && stream.peerB === full) stream.peerB = previous;
      this.#setPresent(stream, slot, wasPresent);
      stream.state = previousState;
      if (stream.relay === null) stream.relay = relayBefore;
    });
  }

  /**
   * The latest health of a stream, shown in the session view. Memory only: health is not persisted (it is
   * stale after a restart anyway), so nothing is saved and nothing can be lost.
   */
  setHealth(name: string, streamName: string, health: StreamHealth | null): boolean {
    const found = this.#stream(name, streamName);
    if ('ok' in found) return false;
    found.stream.health = health;
    return true;
  }

  /** Free a peer slot (the stream goes back to `waiting`). */
  async release(name: string, streamName: string, slot: PeerSlot): Promise<StreamChangeOutcome> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const found = this.#stream(name, streamName);
    if ('ok' in found) return found;
    const { session, stream } = found;
    const held = slot === 'a' ? stream.peerA : stream.peerB;
    if (!held) return { ok: true, changed: false };
    const previousState = stream.state;
    if (slot === 'a') stream.peerA = null;
    else stream.peerB = null;
    const wasPresent = this.#setPresent(stream, slot, false);
    stream.state = 'waiting';
    this.#refreshState(session);
    return this.#commitStreamChange(session, () => {
      if (slot === 'a' && stream.peerA === null) stream.peerA = held;
      if (slot === 'b' && stream.peerB === null) stream.peerB = held;
      this.#setPresent(stream, slot, wasPresent);
      if (peerCount(stream) === 2) stream.state = previousState;
    });
  }

  /** A peer's SRT status report: `connected` moves a matched stream to `connected`; others back to `ready`. */
  async reportStatus(
    name: string,
    streamName: string,
    srt: SrtReport,
    slot?: PeerSlot,
  ): Promise<StreamChangeOutcome> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const found = this.#stream(name, streamName);
    if ('ok' in found) return found;
    const { session, stream } = found;
    if (slot !== undefined && this.isPresent(stream, slot)) {
      let reports = this.#srt.get(stream);
      if (!reports) {
        reports = new Map();
        this.#srt.set(stream, reports);
      }
      reports.set(slot, srt);
      this.#overtimeChanged(session);
    }
    if (stream.state === 'waiting') return { ok: true, changed: false };
    const previous = stream.state;
    // Over the relay (docs/relay.md "States"), a link that is not up is `relaying`, not `ready`.
    const next: StreamState =
      srt === 'connected' ? 'connected' : srt === 'connecting' ? previous : matchedState(stream);
    if (next === previous) return { ok: true, changed: false };
    stream.state = next;
    this.#refreshState(session);
    return this.#commitStreamChange(session, () => {
      if (stream.state === next) stream.state = previous;
    });
  }

  /**
   * The stream's relay changed (docs/relay.md "Detection"): `allocated` moves a matched stream that is not
   * connected to `relaying` (saved like any state change); `refused` and `ended` are shown in the view and
   * leave or put the stream back in `ready` (a relay that ended carries nothing). `null` forgets the relay.
   */
  async setRelay(name: string, streamName: string, relay: StreamRelay | null): Promise<StreamChangeOutcome> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const found = this.#stream(name, streamName);
    if ('ok' in found) return found;
    const { session, stream } = found;
    const previousRelay = stream.relay ?? null;
    const previous = stream.state;
    stream.relay = relay;
    if (previous === 'ready' || previous === 'relaying') stream.state = matchedState(stream);
    this.#refreshState(session);
    if (stream.state === previous) {
      this.#emit({ type: 'session_changed', session });
      return { ok: true, changed: true };
    }
    return this.#commitStreamChange(session, () => {
      if (stream.relay === relay) stream.relay = previousRelay;
      stream.state = previous;
    });
  }

  async #commitStreamChange(session: SessionRecord, undo: () => void): Promise<StreamChangeOutcome> {
    const failed = await this.#saveStreams(session, undo);
    if (failed) return failed;
    this.#emit({ type: 'session_changed', session });
    return { ok: true, changed: true };
  }

  /** Save a session's streams after a change; on failure undo it and every newer unsaved change, newest first. */
  async #saveStreams(session: SessionRecord, undo: () => void): Promise<Refusal<'STORE_FAILED'> | undefined> {
    const entry = { undo, undone: false };
    const stack = this.#unsaved.get(session) ?? [];
    stack.push(entry);
    this.#unsaved.set(session, stack);
    const failed = await this.#save(() => this.#store.putStreams(session.name, session.streams));
    const at = stack.indexOf(entry);
    if (failed && !entry.undone) {
      for (const e of stack.splice(at).reverse()) {
        e.undone = true;
        e.undo();
      }
      this.#refreshState(session);
    } else if (at >= 0) stack.splice(at, 1);
    if (stack.length === 0 && this.#unsaved.get(session) === stack) this.#unsaved.delete(session);
    return failed;
  }

  #refreshState(session: SessionRecord): void {
    // RELAYING while a stream is on the relay and not yet connected (docs/relay.md "States"); CLOSED is final.
    if (isLive(session)) session.state = deriveSessionState(session.streams);
  }

  #armExpiry(session: SessionRecord): void {
    if (this.#stopped) return;
    this.#timers.get(session.name)?.cancel();
    const handle = this.#clock.setTimer(Math.max(0, session.expiresAt - this.#clock.now()), () => {
      this.#timers.delete(session.name);
      if (this.#sessions.get(session.name) !== session) return;
      if (this.#mediaFlowing(session)) {
        // README "Lifetime": the TTL ends admission, never a link that carries media.
        this.#overtime.add(session);
        this.#emit({ type: 'session_changed', session });
        this.#keepStored(session);
        return;
      }
      this.#closeExpired(session);
    });
    this.#timers.set(session.name, handle);
  }

  #closeExpired(session: SessionRecord): void {
    void this.close(session.name, 'ttl_expired').then((r) => {
      if (!r.ok && r.code === 'STORE_FAILED') this.#armRetry(session);
    });
  }

  /**
   * Whether a stream of the session carries media: a present peer whose last SRT status is `connected`
   * (README "Lifetime" and "State from media").
   */
  #mediaFlowing(session: SessionRecord): boolean {
    return session.streams.some((st) => this.#mediaOn(st));
  }

  #mediaOn(stream: StreamRecord): boolean {
    const reports = this.#srt.get(stream);
    return (
      reports !== undefined &&
      SLOT_NAMES.some((slot) => this.isPresent(stream, slot) && reports.get(slot) === 'connected')
    );
  }

  /**
   * Whether a stream is `connected` on the word of one end only: its other claim's holder is absent
   * (README "State from media").
   */
  mediaWithoutSignalling(stream: StreamRecord, slot: PeerSlot): boolean {
    const claimed = slot === 'a' ? stream.peerA : stream.peerB;
    return stream.state === 'connected' && claimed !== null && !this.isPresent(stream, slot);
  }

  /**
   * The present end stopped confirming media (its health went stale while its partner is absent): the
   * stream falls back to `waiting` (README "State from media"). Memory only, like presence.
   */
  mediaStale(name: string, streamName: string): boolean {
    const found = this.#stream(name, streamName);
    if ('ok' in found) return false;
    const { session, stream } = found;
    if (stream.state !== 'connected' || this.#bothPresent(stream)) return false;
    stream.state = 'waiting';
    stream.health = null;
    this.#srt.get(stream)?.clear();
    this.#refreshState(session);
    this.#emit({ type: 'session_changed', session });
    this.#overtimeChanged(session);
    return true;
  }

  /** A present slot's last SRT status report since it (re)registered, or null. */
  srtReport(stream: StreamRecord, slot: PeerSlot): SrtReport | null {
    return this.#srt.get(stream)?.get(slot) ?? null;
  }

  /** Whether the session is past its TTL and kept open by its media (README "Lifetime"). */
  isOvertime(session: SessionRecord): boolean {
    return this.#overtime.has(session);
  }

  /** Whether the session admits new peers and invites: live and before its TTL (README "Lifetime"). */
  admits(session: SessionRecord): boolean {
    return isLive(session) && !this.#overtime.has(session) && this.#clock.now() < session.expiresAt;
  }

  /**
   * Past the TTL, media flowing: the store's copy is kept from expiring (`keepFrom` now), and checked
   * again after `overtimeLeaseMs`. A save that fails is tried again at the next check.
   */
  #keepStored(session: SessionRecord): void {
    if (this.#stopped) return;
    this.#timers.get(session.name)?.cancel();
    void this.#save(() => this.#store.putExpiry(session.name, session.expiresAt, this.#clock.now()));
    this.#armOvertimeCheck(session, this.#overtimeLeaseMs, 'lease');
  }

  /**
   * The one timer of a session in overtime: a lease renewal while media flows, else the close (`idle`: a
   * peer is present without media; `settle`: nobody is present).
   */
  #armOvertimeCheck(session: SessionRecord, delayMs: number, kind: 'lease' | 'idle' | 'settle'): void {
    if (this.#stopped) return;
    this.#timers.get(session.name)?.cancel();
    this.#overtimeTimer.set(session, { kind, at: this.#clock.now() + delayMs });
    const handle = this.#clock.setTimer(delayMs, () => {
      this.#timers.delete(session.name);
      this.#overtimeTimer.delete(session);
      if (this.#sessions.get(session.name) !== session || !this.#overtime.has(session)) return;
      if (this.#mediaFlowing(session)) this.#keepStored(session);
      else this.#closeExpired(session);
    });
    this.#timers.set(session.name, handle);
  }

  /**
   * A presence or status change of a session in overtime: media still flowing keeps the lease timer;
   * media gone arms the close, `overtimeSettleMs` when nobody is present, `overtimeIdleMs` otherwise. A
   * close already armed stays, except that the last peer leaving brings an idle close forward to the
   * settle time: peers that stopped their media and then left close the session 5 s after they left, not
   * 30 s after the media stopped (README "Lifetime").
   */
  #overtimeChanged(session: SessionRecord): void {
    if (!this.#overtime.has(session) || !isLive(session)) return;
    const armed = this.#overtimeTimer.get(session);
    if (this.#mediaFlowing(session)) {
      if (armed?.kind !== 'lease') this.#keepStored(session);
      return;
    }
    const anyPresent = session.streams.some((st) => this.presentPeers(st) > 0);
    const closing = armed !== undefined && armed.kind !== 'lease';
    if (anyPresent) {
      if (!closing) this.#armOvertimeCheck(session, this.#overtimeIdleMs, 'idle');
      return;
    }
    if (closing && armed.at <= this.#clock.now() + this.#overtimeSettleMs) return;
    this.#armOvertimeCheck(session, this.#overtimeSettleMs, 'settle');
  }

  /**
   * Extend a live session (PATCH, README "Lifetime"): its expiry becomes `expiresAt` (Unix ms, a whole
   * second); a session past its TTL admits peers again. Saved before it is acknowledged; tokens issued
   * before stay valid (they are checked against the session's incarnation, not their `exp`).
   */
  async extend(name: string, expiresAt: number): Promise<ExtendOutcome> {
    if (this.#closePending(name)) await this.#closeSettled(name);
    const session = this.#sessions.get(name);
    if (!session || !isLive(session))
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    const failed = await this.#save(() => this.#store.putExpiry(name, expiresAt, this.#clock.now()));
    if (failed) return failed;
    if (this.#sessions.get(name) !== session || !isLive(session)) {
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    }
    session.expiresAt = expiresAt;
    this.#overtime.delete(session);
    this.#overtimeTimer.delete(session);
    this.#armExpiry(session);
    this.#emit({ type: 'session_changed', session });
    return { ok: true, session };
  }

  /**
   * Record a new invite (README "Invites"): saved before it is returned, so a token handed out is always
   * one the broker can list and revoke. Refused past the TTL (no new invites) and beyond MAX_INVITES.
   */
  async issueInvite(name: string, stream: string | null, label: string | null): Promise<InviteOutcome> {
    const session = this.#sessions.get(name);
    if (!session || !isLive(session) || !this.admits(session)) {
      return refuse('SESSION_EXPIRED', `session "${name}" is closed, unknown or past its lifetime`);
    }
    const invites = session.invites ?? [];
    if (invites.length >= MAX_INVITES) {
      return refuse('INVALID_MESSAGE', `invites: at most ${MAX_INVITES} per session; revoked ones count`);
    }
    const invite: InviteRecord = {
      id: (this.#random ?? pooledRandomBytes)(9).toString('base64url'),
      stream,
      label,
      issuedAt: this.#clock.now(),
      revokedAt: null,
    };
    const next = [...invites, invite];
    const failed = await this.#save(() => this.#store.putInvites(name, next));
    if (failed) return failed;
    if (this.#sessions.get(name) !== session || !isLive(session)) {
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    }
    // Another invite may have been saved meanwhile: append to what memory holds now.
    session.invites = [...(session.invites ?? []), invite];
    return { ok: true, session, invite };
  }

  /** Revoke an invite: saved first, then its token is refused and its connections are ended (event). */
  async revokeInvite(name: string, id: string): Promise<InviteOutcome> {
    const session = this.#sessions.get(name);
    if (!session || !isLive(session))
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    const invite = session.invites?.find((i) => i.id === id);
    if (!invite) return refuse('INVALID_MESSAGE', `invite: no invite "${id}" in this session`);
    if (invite.revokedAt !== null) return { ok: true, session, invite };
    const revoked: InviteRecord = { ...invite, revokedAt: this.#clock.now() };
    const next = (session.invites ?? []).map((i) => (i.id === id ? revoked : i));
    const failed = await this.#save(() => this.#store.putInvites(name, next));
    if (failed) return failed;
    if (this.#sessions.get(name) !== session || !isLive(session)) {
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    }
    session.invites = (session.invites ?? []).map((i) => (i.id === id ? revoked : i));
    this.#emit({ type: 'invite_revoked', session, invite: revoked });
    return { ok: true, session, invite: revoked };
  }

  /**
   * A TTL close that could not be saved: the session stays live in memory and on disk (its tokens have
   * expired with it, so nobody can use it) and the close is tried again after `retryMs`.
   */
  #armRetry(session: SessionRecord): void {
    if (this.#stopped) return;
    this.#timers.get(session.name)?.cancel();
    const handle = this.#clock.setTimer(this.#retryMs, () => {
      this.#timers.delete(session.name);
      if (this.#sessions.get(session.name) !== session || !isLive(session)) return;
      void this.close(session.name, 'ttl_expired').then((r) => {
        if (!r.ok && r.code === 'STORE_FAILED') this.#armRetry(session);
      });
    });
    this.#timers.set(session.name, handle);
  }

  /** Keep a closed session as a tombstone until it is `tombstoneMs` old or the oldest of too many. */
  #addTombstone(session: SessionRecord): void {
    this.#tombstones.delete(session.name);
    this.#tombstones.set(session.name, session);
    while (this.#tombstones.size > this.#maxTombstones) {
      const oldest = this.#tombstones.values().next().value;
      if (!oldest) break;
      this.#purge(oldest);
    }
    if (this.#stopped || !this.#tombstones.has(session.name)) return;
    const due = (session.closedAt ?? this.#clock.now()) + this.#tombstoneMs;
    const handle = this.#clock.setTimer(Math.max(0, due - this.#clock.now()), () => {
      this.#timers.delete(session.name);
      if (this.#sessions.get(session.name) === session) this.#purge(session);
    });
    this.#timers.set(session.name, handle);
  }

  /**
   * Forget a tombstone. Its row is deleted without waiting: if that delete fails, the row is loaded as a
   * tombstone again at the next start and purged then (a closed session either way).
   */
  #purge(session: SessionRecord): void {
    this.#tombstones.delete(session.name);
    if (this.#sessions.get(session.name) !== session) return;
    this.#sessions.delete(session.name);
    this.#timers.get(session.name)?.cancel();
    this.#timers.delete(session.name);
    void Promise.resolve()
      .then(() => this.#store.deleteSession(session.name))
      .catch(() => {
        /* purged again at the next start */
      });
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
