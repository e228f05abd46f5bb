import { isIP } from 'node:net';
import type { Clock, Logger, TimerHandle } from '@broadcast-ops/core';
import { relayOfAllocation } from '../protocol/relay-bus.ts';
import { relayPathView, type RelayPathReport, type RelayPathView } from '../protocol/relay-path-view.ts';
import type { TokenClaims } from '../protocol/token.ts';
import {
  encode,
  type ClientMessage,
  type EndHealth,
  type HealthMessage,
  type RegisterMessage,
  type ServerMessage,
  type TallyState,
  type WsErrorCode,
} from '../protocol/ws-messages.ts';
import type { BrokerEvent, ClaimResult, SessionBroker } from './broker.ts';
import { HEALTH_MAX_AGE_MS, classifyHealth, liveHealth, suggestedLatency } from './health.ts';
import { HealthMonitor, type HealthAlarm, type LinkHealthView } from './health-monitor.ts';
import { refuse, type Refusal } from './outcome.ts';
import { DEFAULT_RELAY_LIMITS } from './relay-allocations.ts';
import { declaredBitrate, relayByteCap } from './relay-cap.ts';
import { relayLifetimeMs, renewAfterMs } from './relay-renewal.ts';
import {
  isLive,
  pathOf,
  type PeerClaim,
  type PeerSlot,
  type SessionRecord,
  type StreamRecord,
  type StreamRelay,
} from './session.ts';

/**
 * The signalling hub: which connection holds which peer slot, and the messages that follow from the
 * broker's state (README "WebSocket signalling"). Transport-free: a connection is a `PeerLink` that can
 * send a text and be ended for a reason; the io layer (src/io/ws-server.ts) owns sockets, close codes,
 * limits and parsing. Slots themselves (claims) are the broker's and are saved before they are
 * acknowledged; what lives only here is presence (which socket is attached), `ready` flags, tally and the
 * latest health reports.
 *
 * Message order (fixed, README "Message order"): after a claim that matches a stream, in one synchronous
 * block after the save: `peer` to the registering peer, `peer` to the waiting peer, `peer_match` to every
 * admin connection, then the `session` broadcast. No `await` separates the save from these messages.
 */
export interface PeerLink {
  /** Public IP of the connection (the one client-address function), sent to the other peer. */
  readonly ip: string;
  readonly claims: TokenClaims;
  /** Fingerprint of the connection's token: a reconnect with the same token gets its slot back. */
  readonly holder: string;
  send(text: string): void;
  /**
   * Close the connection: `replaced` by a newer connection of the same peer, its session closed, or its
   * token's invite revoked (README "Invites").
   */
  end(reason: EndReason): void;
  /** Ping the connection: true when it answers within `timeoutMs`. */
  probe(timeoutMs: number): Promise<boolean>;
}

export type EndReason = 'replaced' | 'session_closed' | 'revoked';

/** The log the hub writes to (a pino logger in production). */
export interface SignallingLog {
  info: Logger['info'];
  warn: Logger['warn'];
  error: Logger['error'];
}

type Pick = { slot: PeerSlot; replace: boolean } | { probe: PeerLink } | undefined;

export interface SignallingOptions {
  broker: SessionBroker;
  clock: Clock;
  /** A slot whose holder has been disconnected this long may be taken by another peer. Default 30 s. */
  detachedGraceMs?: number;
  /** How long a register waits for the old socket of the same token to answer a ping. Default 2 s. */
  probeMs?: number;
  /** `health_report` to admins at most once per this interval per session (coalesced). Default 1 s. */
  healthReportMs?: number;
  /** Connections per session at most (peers and observers). Default 64. */
  maxConnections?: number;
  /** A receiver's report younger than this is preferred for the session view's `health`. Default 10 s. */
  healthFreshMs?: number;
  onError?: (err: unknown) => void;
  /**
   * The signalling log (README "Signalling log"): one info line per registration, match, reclaim,
   * takeover, departure and release, an error line per registration whose save failed. Fields: session,
   * stream, slot, ip, outcome; never a token or a passphrase.
   */
  log?: SignallingLog;
  /** A `register` refused (for the metrics): the error code, or ADDRESS_FAMILY / STORE_FAILED. */
  onRefused?: (code: string) => void;
  /** A health alarm raised or cleared (README "Health"): the webhook's feed; admins get `health_alarm`. */
  onAlarm?: (alarm: HealthAlarm) => void;
  /** The relay the broker falls back to (docs/relay.md "Detection"); none: streams stay direct. */
  relay?: RelayPort;
  /**
   * How long after `start` a stream whose both ends report their SRT state, neither `connected`, is moved
   * to the relay (docs/relay.md "Detection"). Default 8 s.
   */
  relayAfterMs?: number;
  /** A fallback to the relay was tried (for the metrics): allocated, or refused with the relay's reason. */
  onRelayFallback?: (outcome: 'allocated' | 'refused', reason: string | null) => void;
  /**
   * A stream got connected (for `punch_sessions_total{path}`, docs/relay.md "What the operator sees"):
   * once per stream of a session and path it connected on.
   */
  onStreamConnected?: (path: 'direct' | 'relayed') => void;
  /**
   * The allocations outlive this hub (relays on Redis, docs/relay.md "Relays on Redis"): `stop` leaves them
   * for the next owner instead of releasing them. Default false (the in-process relay closes with the hub).
   */
  relaysOutlive?: boolean;
  /** The lifetime an allocation is asked for and renewed to (docs/relay.md "Renewal"). Default 6 h. */
  relayLifetimeMs?: number;
}

/**
 * The relay as the hub sees it (docs/relay.md): an allocation of two ports pinned to the two peers' public
 * IPs, side 0 for slot a and side 1 for slot b; the io layer binds it to the in-process UdpRelay and names
 * the address the peers are to send to.
 */
export interface RelayPort {
  allocate(req: {
    sessionId: string;
    peers: readonly [string, string];
    /** Byte rate per direction (relay-cap.ts); absent: the relay's default. */
    bytesPerSecond?: number;
    /** How long the allocation lives unless renewed (relay-renewal.ts). */
    lifetimeMs?: number;
  }): Promise<
    | { ok: true; id: string; address: string; ports: readonly [number, number] }
    | { ok: false; reason: string }
  >;
  release(id: string): void;
  /** Extend an allocation to `lifetimeMs` from now (docs/relay.md "Renewal"); a relay without it is not renewed. */
  renew?(id: string, lifetimeMs: number): void;
  /** What the relay measured on allocation `id` (docs/relay.md "What the relay measures"), if known. */
  figures?(id: string): RelayPathReport | undefined;
}

/** Default detection window (docs/relay.md "Detection": why 8 s). */
export const RELAY_AFTER_MS = 8_000;

interface HealthSample {
  rtt: number;
  retransmit: number;
  bitrate: number;
  /** Monotonic ms (freshness) and Unix epoch ms (shown) of arrival. */
  at: number;
  wall: number;
  receiver: boolean;
  dropped: number | undefined;
  buffer: number | undefined;
  /** The end's role (its claim's, else the one its report names); null when neither says. */
  role: 'sender' | 'receiver' | null;
  /** Whether it carried the interval counters (a `punch agent`; docs/health.md). */
  counted: boolean;
}

/** How a saved claim came about, for the log: a first claim, the same token back, or another holder. */
type ClaimKind = 'claim' | 'reclaim' | 'takeover';

/** One session's live signalling state. */
interface Room {
  links: Set<PeerLink>;
  /** stream → [link holding slot a, link holding slot b]; null while detached or unclaimed. */
  holders: Map<string, [PeerLink | null, PeerLink | null]>;
  /** `${stream}/${slot}` → monotonic ms when its holder disconnected. */
  detachedSince: Map<string, number>;
  /** `${stream}/${slot}` of claims in flight (a save pending). */
  pending: Set<string>;
  ready: Map<string, Set<PeerSlot>>;
  started: Set<string>;
  /** stream → its last tally; `since` (monotonic ms) is when it became stale, null while known. */
  tally: Map<string, { state: TallyState; staleSince: number | null }>;
  /** Connections following one stream's tally without a slot (`watch`, README "Tally"). */
  watchers: Map<PeerLink, string>;
  health: Map<string, Partial<Record<PeerSlot, HealthSample | undefined>>>;
  healthTimer: TimerHandle | null;
  lastHealthReport: number;
  /** `${stream}/${slot}` → the timer that releases a detached slot once the grace period is over. */
  graceTimers: Map<string, TimerHandle>;
}

const SLOTS: readonly PeerSlot[] = ['a', 'b'];
const slotIndex = (slot: PeerSlot): 0 | 1 => (slot === 'a' ? 0 : 1);
const claimOf = (stream: StreamRecord, slot: PeerSlot): PeerClaim | null =>
  slot === 'a' ? stream.peerA : stream.peerB;
const other = (slot: PeerSlot): PeerSlot => (slot === 'a' ? 'b' : 'a');

function errorText(code: WsErrorCode, message: string): string {
  return encode({ type: 'error', code, message });
}

/** The broker's refusal as a WebSocket error code (a failed save is the server's error; nothing changed). */
function wsCode(r: Refusal): WsErrorCode {
  switch (r.code) {
    case 'STORE_FAILED':
    case 'SESSION_LIMIT':
    case 'SESSION_EXISTS':
      return 'SERVER_ERROR';
    default:
      return r.code;
  }
}

export class SignallingHub {
  readonly #broker: SessionBroker;
  readonly #clock: Clock;
  readonly #graceMs: number;
  readonly #healthReportMs: number;
  readonly #probeMs: number;
  readonly #maxConnections: number;
  readonly #healthFreshMs: number;
  readonly #onError: (err: unknown) => void;
  readonly #log: SignallingLog | undefined;
  readonly #onRefused: (code: string) => void;
  readonly #onAlarm: (alarm: HealthAlarm) => void;
  readonly #monitor = new HealthMonitor();
  readonly #relay: RelayPort | undefined;
  readonly #relayAfterMs: number;
  readonly #onRelayFallback: (outcome: 'allocated' | 'refused', reason: string | null) => void;
  readonly #onStreamConnected: (path: 'direct' | 'relayed') => void;
  readonly #relaysOutlive: boolean;
  /** Per session, the `stream\npath` pairs already counted as connected. */
  readonly #countedConnected = new WeakMap<SessionRecord, Set<string>>();
  /** Allocation id → its session and stream, to release it with the session and to report its end. */
  readonly #allocations = new Map<string, { session: string; stream: string }>();
  /** Each held allocation's next renewal. */
  readonly #renewals = new Map<string, TimerHandle>();
  readonly #relayLifetimeMs: number;
  /** Per connection and stream, the coordinates of the last `peer` it was sent (README "When `peer` is sent"). */
  readonly #lastPeer = new WeakMap<PeerLink, Map<string, string>>();
  /** Connections whose `register` waits for a liveness probe, with the latest `register` they sent. */
  readonly #probing = new WeakMap<PeerLink, RegisterMessage>();
  readonly #rooms = new Map<string, Room>();
  /** link → its session name. */
  readonly #sessionOf = new Map<PeerLink, string>();
  /** Claims loaded at start have no socket: they count as detached since the hub started. */
  readonly #startedAt: number;
  readonly #unsubscribe: () => void;

  constructor(options: SignallingOptions) {
    this.#broker = options.broker;
    this.#clock = options.clock;
    this.#graceMs = options.detachedGraceMs ?? 30_000;
    this.#healthReportMs = options.healthReportMs ?? 1_000;
    this.#probeMs = options.probeMs ?? 2_000;
    this.#maxConnections = options.maxConnections ?? 64;
    this.#healthFreshMs = options.healthFreshMs ?? 10_000;
    this.#relayLifetimeMs = options.relayLifetimeMs ?? DEFAULT_RELAY_LIMITS.defaultLifetimeMs;
    this.#onError = options.onError ?? (() => undefined);
    this.#log = options.log;
    this.#onRefused = options.onRefused ?? (() => undefined);
    this.#onAlarm = options.onAlarm ?? (() => undefined);
    this.#relay = options.relay;
    this.#relayAfterMs = options.relayAfterMs ?? RELAY_AFTER_MS;
    this.#onRelayFallback = options.onRelayFallback ?? (() => undefined);
    this.#onStreamConnected = options.onStreamConnected ?? (() => undefined);
    this.#relaysOutlive = options.relaysOutlive ?? false;
    this.#startedAt = this.#clock.monotonicMs();
    this.#unsubscribe = this.#broker.subscribe((e) => this.#onBrokerEvent(e));
  }

  get connections(): number {
    return this.#sessionOf.size;
  }

  stop(): void {
    this.#unsubscribe();
    if (!this.#relaysOutlive) for (const id of this.#allocations.keys()) this.#relay?.release(id);
    this.#allocations.clear();
    for (const t of this.#renewals.values()) t.cancel();
    this.#renewals.clear();
    for (const room of this.#rooms.values()) {
      room.healthTimer?.cancel();
      for (const t of room.graceTimers.values()) t.cancel();
    }
    this.#rooms.clear();
    this.#sessionOf.clear();
  }

  #room(name: string): Room {
    let room = this.#rooms.get(name);
    if (!room) {
      room = {
        links: new Set(),
        holders: new Map(),
        detachedSince: new Map(),
        pending: new Set(),
        ready: new Map(),
        started: new Set(),
        tally: new Map(),
        watchers: new Map(),
        health: new Map(),
        healthTimer: null,
        lastHealthReport: Number.NEGATIVE_INFINITY,
        graceTimers: new Map(),
      };
      this.#rooms.set(name, room);
    }
    return room;
  }

  #holders(room: Room, stream: string): [PeerLink | null, PeerLink | null] {
    let h = room.holders.get(stream);
    if (!h) {
      h = [null, null];
      room.holders.set(stream, h);
    }
    return h;
  }

  /**
   * An authenticated connection joins its session; it receives the current `session` state. Refused with
   * SESSION_FULL when the session already has `maxConnections` connections (a bound on fan-out and memory).
   */
  attach(link: PeerLink, sessionName: string): { ok: true } | Refusal<'SESSION_FULL' | 'SESSION_EXPIRED'> {
    const session = this.#broker.get(sessionName);
    if (!session || !isLive(session)) return refuse('SESSION_EXPIRED', `session "${sessionName}" is closed`);
    const room = this.#room(sessionName);
    if (this.#counted(room) >= this.#maxConnections) {
      return refuse('SESSION_FULL', `the session has its maximum of ${this.#maxConnections} connections`);
    }
    room.links.add(link);
    this.#sessionOf.set(link, sessionName);
    link.send(encode(this.#sessionMessage(session)));
    return { ok: true };
  }

  /**
   * Connections counted against `maxConnections`: admin observers and connections holding a slot. A peer
   * connection that has not registered yet is bounded by the registration deadline (io layer) instead, so
   * sockets that never register cannot lock the session's peers out.
   */
  #counted(room: Room): number {
    let n = 0;
    for (const l of room.links) {
      if (l.claims.role === 'admin' || this.#holdsSlot(room, l) || room.watchers.has(l)) n++;
    }
    return n;
  }

  #holdsSlot(room: Room, link: PeerLink): boolean {
    for (const h of room.holders.values()) if (h[0] === link || h[1] === link) return true;
    return false;
  }

  /** Whether the connection watches a stream's tally (`watch`): exempt from the registration deadline. */
  watches(link: PeerLink): boolean {
    const name = this.#sessionOf.get(link);
    return name !== undefined && (this.#rooms.get(name)?.watchers.has(link) ?? false);
  }

  /** Whether the connection holds a peer slot (the io layer's registration deadline asks). */
  holdsSlot(link: PeerLink): boolean {
    const name = this.#sessionOf.get(link);
    const room = name === undefined ? undefined : this.#rooms.get(name);
    return room !== undefined && this.#holdsSlot(room, link);
  }

  #sessionMessage(session: SessionRecord): ServerMessage {
    return sessionMessage(session, (s) => this.#broker.presentPeers(s));
  }

  /**
   * The connection is gone (closed, or terminated by the liveness check): its slots stay claimed
   * (detached) so that the peer can come back within the grace period, but its absence is reported at once
   * (README "Presence"): the broker marks the slot absent (stream `waiting`, `presence` and `session`
   * messages), its health sample is dropped, and a timer releases the slot when the grace period ends.
   */
  detach(link: PeerLink, why = 'closed'): void {
    const name = this.#sessionOf.get(link);
    if (name === undefined) return;
    this.#sessionOf.delete(link);
    this.#probing.delete(link);
    const room = this.#rooms.get(name);
    if (!room) return;
    room.links.delete(link);
    room.watchers.delete(link);
    const now = this.#clock.monotonicMs();
    for (const [stream, h] of room.holders) {
      for (const slot of SLOTS) {
        if (h[slotIndex(slot)] !== link) continue;
        h[slotIndex(slot)] = null;
        const key = `${stream}/${slot}`;
        room.detachedSince.set(key, now);
        room.ready.get(stream)?.delete(slot);
        room.started.delete(stream);
        const samples = room.health.get(stream);
        if (samples) samples[slot] = undefined;
        this.#log?.info(
          { session: name, stream, slot, ip: link.ip, outcome: why, graceMs: this.#graceMs },
          'peer left; slot kept for its holder during the grace period',
        );
        const theirs = samples?.[other(slot)];
        const fresh = theirs !== undefined && now - theirs.at <= this.#healthFreshMs;
        this.#broker.markAbsent(name, stream, slot, fresh);
        this.#armGrace(name, room, stream, slot, link.ip);
        this.#watchMedia(name, room, stream, slot);
      }
    }
  }

  /**
   * README "State from media": while a stream stays `connected` on the word of the end that is still
   * present, that end's health must stay fresh (younger than `healthFreshMs`); checked every half of it,
   * until the absent holder is back or the stream is no longer `connected`.
   */
  #watchMedia(name: string, room: Room, stream: string, slot: PeerSlot): void {
    const key = `${stream}/${slot}/media`;
    room.graceTimers.get(key)?.cancel();
    const check = (): void => {
      room.graceTimers.delete(key);
      const session = this.#broker.get(name);
      const record = session?.streams.find((st) => st.name === stream);
      if (this.#rooms.get(name) !== room || !record) return;
      if (!this.#broker.mediaWithoutSignalling(record, slot)) return;
      const sample = room.health.get(stream)?.[other(slot)];
      if (!sample || this.#clock.monotonicMs() - sample.at > this.#healthFreshMs) {
        this.#log?.info(
          { session: name, stream, slot: other(slot), outcome: 'media_stale' },
          'the present end stopped confirming media; stream waits',
        );
        this.#broker.mediaStale(name, stream);
        return;
      }
      room.graceTimers.set(key, this.#clock.setTimer(this.#healthFreshMs / 2, check));
    };
    room.graceTimers.set(key, this.#clock.setTimer(this.#healthFreshMs / 2, check));
  }

  /**
   * Release a detached slot once its holder has been gone for the grace period (README "Presence").
   * `ip` is the departed holder's address, for the log lines.
   */
  #armGrace(name: string, room: Room, stream: string, slot: PeerSlot, ip: string): void {
    const key = `${stream}/${slot}`;
    room.graceTimers.get(key)?.cancel();
    const since = room.detachedSince.get(key);
    room.graceTimers.set(
      key,
      this.#clock.setTimer(this.#graceMs, () => {
        room.graceTimers.delete(key);
        if (this.#rooms.get(name) !== room || room.detachedSince.get(key) !== since) return;
        if (this.#holders(room, stream)[slotIndex(slot)] !== null || room.pending.has(key)) return;
        const record = this.#broker.get(name)?.streams.find((st) => st.name === stream);
        if (record && this.#broker.mediaWithoutSignalling(record, slot)) {
          // The other end still reports media over this claim (README "State from media"): kept.
          this.#armGrace(name, room, stream, slot, ip);
          return;
        }
        void this.#broker.release(name, stream, slot).then((r) => {
          if (r.ok && r.changed) {
            room.detachedSince.delete(key);
            // docs/relay.md "Lifetime": an allocation exists only for the stream's two peers.
            const released = this.#broker.get(name)?.streams.find((st) => st.name === stream);
            if (released?.relay) {
              this.#releaseRelay(released);
              void this.#broker.setRelay(name, stream, null).catch(this.#onError);
            }
            this.#log?.info(
              { session: name, stream, slot, ip, outcome: 'released' },
              'slot released after the grace period',
            );
          } else if (!r.ok && r.code === 'STORE_FAILED') {
            this.#log?.error({ session: name, stream, slot, ip, outcome: r.code }, 'slot release not saved');
          }
        }, this.#onError);
      }),
    );
  }

  handle(link: PeerLink, message: ClientMessage): void {
    const name = this.#sessionOf.get(link);
    if (name === undefined) return;
    const session = this.#broker.get(name);
    if (!session || !isLive(session)) {
      link.send(errorText('SESSION_EXPIRED', `session "${name}" is closed`));
      return;
    }
    const room = this.#room(name);
    try {
      switch (message.type) {
        case 'register':
          this.#register(link, room, session, message);
          return;
        case 'ready':
          this.#ready(link, room, session, message.stream);
          return;
        case 'status': {
          const stream = this.#heldStream(link, room, session, message.stream);
          if (!stream) return;
          const slot = this.#heldSlot(link, room, stream);
          const wasUp = stream.state === 'connected';
          void this.#broker.reportStatus(session.name, stream.name, message.srt, slot).then((r) => {
            if (!r.ok) {
              link.send(errorText(wsCode(r), r.message));
              return;
            }
            // A direct link that was up and went down (docs/relay.md "Detection"): the same window as after
            // `start`, so a path that stops carrying (a NAT that rebinds its mapping) moves to the relay too.
            const now = this.#broker.get(session.name)?.streams.find((st) => st.name === stream.name);
            if (wasUp && r.changed && now?.state === 'ready')
              this.#armRelayFallback(session.name, room, stream.name, 'the direct link went down');
          }, this.#onError);
          return;
        }
        case 'health':
          this.#health(link, room, session, message);
          return;
        case 'tally':
          this.#tally(link, room, session, message.stream, message.state, message.stale);
          return;
        case 'watch': {
          // A peer token watches its own stream only (#resolveStream checks the scope).
          const stream = this.#resolveStream(link, room, session, message.stream);
          if (!stream) return;
          room.watchers.set(link, stream.name);
          this.#sendTally(link, room, stream.name);
          return;
        }
      }
    } catch (err) {
      this.#onError(err);
      link.send(errorText('SERVER_ERROR', 'the message could not be handled'));
    }
  }

  /** The stream a message names (or the only one it can mean), checked against the token's scope. */
  #resolveStream(
    link: PeerLink,
    room: Room,
    session: SessionRecord,
    requested: string | undefined,
  ): StreamRecord | undefined {
    const scope = link.claims.stream;
    let name = requested;
    if (name === undefined) {
      if (scope !== null) name = scope;
      else if (session.streams.length === 1) name = session.streams[0]?.name;
      else {
        // An unscoped token: the one stream this connection holds a slot on, if exactly one.
        const held = [...room.holders].filter(([, h]) => h[0] === link || h[1] === link);
        if (held.length === 1) name = held[0]?.[0];
      }
      if (name === undefined) {
        link.send(errorText('INVALID_MESSAGE', 'stream: required in a multi-stream session'));
        return undefined;
      }
    }
    const stream = session.streams.find((s) => s.name === name);
    if (!stream) {
      link.send(errorText('INVALID_MESSAGE', `stream: no stream "${name}" in this session`));
      return undefined;
    }
    if (scope !== null && scope !== stream.name) {
      link.send(errorText('AUTH_FAILED', `token: scoped to stream "${scope}"`));
      return undefined;
    }
    return stream;
  }

  /** The slot this connection holds on the message's stream, or an error to the sender. */
  #heldSlot(link: PeerLink, room: Room, stream: StreamRecord): PeerSlot | undefined {
    const h = room.holders.get(stream.name);
    if (h?.[0] === link) return 'a';
    if (h?.[1] === link) return 'b';
    return undefined;
  }

  #heldStream(
    link: PeerLink,
    room: Room,
    session: SessionRecord,
    requested: string | undefined,
  ): StreamRecord | undefined {
    const stream = this.#resolveStream(link, room, session, requested);
    if (!stream) return undefined;
    if (this.#heldSlot(link, room, stream) === undefined) {
      link.send(errorText('INVALID_MESSAGE', `stream "${stream.name}": register on it first`));
      return undefined;
    }
    return stream;
  }

  // --- register

  /**
   * Which slot a `register` gets (README "Reconnection"), in this order:
   * 1. a slot claimed with the same token whose socket is gone: taken back at once, whatever the
   *    `meta.clientId`; the same when its socket still looks alive but both carry the same `meta.clientId`
   *    (the new connection proves it is that peer; the old socket is closed as replaced);
   * 2. a slot claimed with the same token whose socket still looks alive, without that proof: the old socket
   *    is pinged first (`probe`); if it does not answer it is closed and its slot taken back, if it answers
   *    it is another live peer using the same token and the rules below apply;
   * 3. a free slot;
   * 4. a slot whose holder has been disconnected for longer than the grace period (any authorised peer);
   * otherwise STREAM_TAKEN (SESSION_FULL when the register named no stream).
   */
  #pickSlot(
    link: PeerLink,
    room: Room,
    stream: StreamRecord,
    clientId: string | null,
    probed: boolean,
  ): Pick {
    const h = this.#holders(room, stream.name);
    // Two devices sharing one token (an admin token on both ends) must each get their own slot back: the
    // slot last claimed from this connection's address is tried first, so the pair is never crossed.
    const order = [...SLOTS].sort(
      (x, y) => Number(claimOf(stream, y)?.ip === link.ip) - Number(claimOf(stream, x)?.ip === link.ip),
    );
    for (const slot of order) {
      const c = claimOf(stream, slot);
      // A claim whose save is pending has no holder link yet; it is not a detached slot.
      if (!c || c.holder !== link.holder || room.pending.has(`${stream.name}/${slot}`)) continue;
      // A slot whose socket is gone is the token's at once, whatever the clientId (a restarted device may
      // present another one); the clientId only decides between two live sockets.
      const current = h[slotIndex(slot)];
      if (current === null || current === link) return { slot, replace: true };
      if (clientId !== null && c.clientId === clientId) return { slot, replace: true };
      if (!probed) return { probe: current };
    }
    for (const slot of SLOTS) if (!claimOf(stream, slot)) return { slot, replace: false };
    const now = this.#clock.monotonicMs();
    for (const slot of SLOTS) {
      if (h[slotIndex(slot)] !== null || room.pending.has(`${stream.name}/${slot}`)) continue;
      // A claim the other end still carries media for is not free (README "State from media").
      if (this.#broker.mediaWithoutSignalling(stream, slot)) continue;
      const since = room.detachedSince.get(`${stream.name}/${slot}`) ?? this.#startedAt;
      if (now - since >= this.#graceMs) return { slot, replace: true };
    }
    return undefined;
  }

  #register(link: PeerLink, room: Room, session: SessionRecord, msg: RegisterMessage, probed = false): void {
    if (!probed && this.#probing.has(link)) {
      // A `register` sent again while the first waits for the old socket's probe: one answer, for the latest.
      this.#probing.set(link, msg);
      return;
    }
    const clientId = typeof msg.meta['clientId'] === 'string' ? msg.meta['clientId'] : null;
    let stream: StreamRecord | undefined;
    let pick: Pick;
    if (msg.stream === undefined && link.claims.stream === null && session.streams.length > 1) {
      // An unscoped token without `stream`: the first stream with a slot for this peer.
      for (const s of session.streams) {
        pick = this.#pickSlot(link, room, s, clientId, probed);
        if (pick) {
          stream = s;
          break;
        }
      }
      if (!stream || !pick) {
        this.#refused(link, session, undefined, 'SESSION_FULL');
        link.send(errorText('SESSION_FULL', 'every stream of this session has two peers'));
        return;
      }
    } else {
      stream = this.#resolveStream(link, room, session, msg.stream);
      if (!stream) return;
      pick = this.#pickSlot(link, room, stream, clientId, probed);
      if (!pick) {
        const full = msg.stream === undefined && session.streams.length === 1;
        this.#refused(link, session, stream.name, full ? 'SESSION_FULL' : 'STREAM_TAKEN');
        link.send(
          full
            ? errorText('SESSION_FULL', 'the session has two peers')
            : errorText('STREAM_TAKEN', `stream "${stream.name}" has two peers`),
        );
        return;
      }
    }
    if ('probe' in pick) {
      const old = pick.probe;
      this.#probing.set(link, msg);
      void old.probe(this.#probeMs).then((alive) => {
        const latest = this.#probing.get(link) ?? msg;
        this.#probing.delete(link);
        if (!alive && this.#sessionOf.has(old)) {
          this.detach(old, 'no answer to the liveness probe');
          old.end('replaced');
        }
        const now = this.#broker.get(session.name);
        if (!this.#sessionOf.has(link) || !now || !isLive(now)) return;
        this.#register(link, room, now, latest, true);
      }, this.#onError);
      return;
    }
    const { slot, replace } = pick;
    const key = `${stream.name}/${slot}`;
    if (room.pending.has(key)) {
      this.#refused(link, session, stream.name, 'STREAM_TAKEN');
      link.send(errorText('STREAM_TAKEN', `stream "${stream.name}": a registration is in progress`));
      return;
    }
    // Both peers of a stream bind the same local port (spec "peer": identical for both): the first
    // registration fixes it; a later one with another port is assigned the stream's port (README).
    const otherClaim = claimOf(stream, other(slot));
    // SRT rendezvous needs both ends in one address family (libsrt: both IPv4 or both IPv6).
    if (otherClaim && isIP(otherClaim.ip) !== isIP(link.ip)) {
      this.#refused(link, session, stream.name, 'ADDRESS_FAMILY');
      link.send(
        errorText(
          'INVALID_MESSAGE',
          'address family mismatch: the other peer uses IPv4 and this one IPv6, or the reverse',
        ),
      );
      return;
    }
    const label = typeof msg.meta['label'] === 'string' ? msg.meta['label'] : (link.claims.label ?? '');
    const claim: Omit<PeerClaim, 'claimedAt'> = {
      ip: link.ip,
      port: otherClaim ? otherClaim.port : msg.port,
      label,
      role: msg.role,
      meta: msg.meta,
      clientId,
      holder: link.holder,
    };
    const streamName = stream.name;
    const previousHolder = replace ? (claimOf(stream, slot)?.holder ?? null) : null;
    const kind: ClaimKind = !replace ? 'claim' : previousHolder === link.holder ? 'reclaim' : 'takeover';
    if (kind !== 'reclaim' && !this.#broker.admits(session)) {
      // README "Lifetime": past its TTL a session keeps its peers (they reconnect with their tokens) but
      // admits nobody new until it is extended.
      this.#refused(link, session, stream.name, 'SESSION_EXPIRED');
      link.send(
        errorText(
          'SESSION_EXPIRED',
          'the session is past its lifetime: it keeps its running links but admits no new peer; ' +
            'the operator can extend it',
        ),
      );
      return;
    }
    room.pending.add(key);
    const hooks = {
      onCommitted: (r: { slot: PeerSlot; stream: StreamRecord; matched: boolean }) => {
        this.#log?.info(
          {
            session: session.name,
            stream: streamName,
            slot: r.slot,
            ip: link.ip,
            port: claim.port,
            outcome: kind,
          },
          kind === 'claim'
            ? 'peer registered'
            : kind === 'reclaim'
              ? 'peer reclaimed its slot'
              : 'peer took over a slot whose holder was gone past the grace period',
        );
        this.#claimed(link, room, session, r.stream, r.slot);
      },
    };
    const result: Promise<ClaimResult> = replace
      ? this.#broker.replaceClaim(session.name, streamName, slot, claim, hooks)
      : this.#broker.claim(session.name, streamName, claim, hooks);
    void result
      .then((r) => {
        if (r.ok) return;
        if (r.code === 'STORE_FAILED') {
          this.#onRefused(r.code);
          this.#log?.error(
            { session: session.name, stream: streamName, slot, ip: link.ip, outcome: r.code },
            'registration not saved; the peer was told nothing changed',
          );
        } else this.#refused(link, session, streamName, r.code);
        link.send(errorText(wsCode(r), r.message));
      }, this.#onError)
      .finally(() => room.pending.delete(key));
  }

  #refused(link: PeerLink, session: SessionRecord, stream: string | undefined, outcome: string): void {
    this.#onRefused(outcome);
    this.#log?.info(
      { session: session.name, stream: stream ?? null, ip: link.ip, outcome },
      'registration refused',
    );
  }

  /**
   * Send `peer` unless this connection was already sent the same coordinates for the stream (README
   * "When `peer` is sent"): address, port, local port, passphrase and latency. `meta` alone never re-sends.
   */
  #sendPeer(link: PeerLink, message: Extract<ServerMessage, { type: 'peer' }>): void {
    const key = `${message.ip}|${message.port}|${message.localPort}|${message.passphrase}|${message.latency}`;
    let sent = this.#lastPeer.get(link);
    if (!sent) {
      sent = new Map();
      this.#lastPeer.set(link, sent);
    }
    if (sent.get(message.stream) === key) return;
    sent.set(message.stream, key);
    link.send(encode(message));
  }

  /** A claim is saved: attach the link to the slot and send `peer` to both sides (synchronous). */
  #claimed(link: PeerLink, room: Room, session: SessionRecord, stream: StreamRecord, slot: PeerSlot): void {
    const h = this.#holders(room, stream.name);
    const i = slotIndex(slot);
    const previous = h[i];
    // The same connection never holds both slots of a stream.
    const j = slotIndex(other(slot));
    if (h[j] === link) {
      h[j] = null;
      room.detachedSince.set(`${stream.name}/${other(slot)}`, this.#clock.monotonicMs());
    }
    if (this.#sessionOf.has(link)) {
      h[i] = link;
      room.detachedSince.delete(`${stream.name}/${slot}`);
    } else {
      // The socket closed while the claim was being saved: the slot is claimed but detached.
      h[i] = null;
      room.detachedSince.set(`${stream.name}/${slot}`, this.#clock.monotonicMs());
    }
    if (previous && previous !== link) {
      this.detach(previous, 'replaced');
      previous.end('replaced');
    }
    // A new or renewed pair: `start` follows the next pair of `ready`s; the other side's `ready` stands.
    room.ready.get(stream.name)?.delete(slot);
    room.started.delete(stream.name);
    const samples = room.health.get(stream.name);
    if (samples) samples[slot] = undefined;
    this.#releaseStaleRelays(session.name, stream);
    const mine = claimOf(stream, slot);
    const theirs = claimOf(stream, other(slot));
    if (mine && theirs) {
      if (h[i]) this.#sendPeer(h[i], peerMessage(session, stream, theirs, mine, slot));
      if (h[j]) this.#sendPeer(h[j], peerMessage(session, stream, mine, theirs, other(slot)));
    }
    // A peer that registers after a tally was set learns it at once.
    if (h[i]) this.#sendTally(h[i], room, stream.name);
  }

  // --- ready / start

  #ready(link: PeerLink, room: Room, session: SessionRecord, requested: string | undefined): void {
    const stream = this.#heldStream(link, room, session, requested);
    if (!stream) return;
    const slot = this.#heldSlot(link, room, stream);
    if (!slot) return;
    let set = room.ready.get(stream.name);
    if (!set) {
      set = new Set();
      room.ready.set(stream.name, set);
    }
    set.add(slot);
    const h = this.#holders(room, stream.name);
    if (set.size < 2 || room.started.has(stream.name) || !stream.peerA || !stream.peerB) return;
    if (!h[0] || !h[1]) return;
    room.started.add(stream.name);
    // A side whose SRT runs learns whether its partner's does too (README "Reconnection"): after a partner
    // restarted, the side whose SRT still runs must start a fresh rendezvous. Otherwise the spec's shape.
    const startFor = (mine: PeerSlot): string =>
      this.#broker.srtReport(stream, mine) === 'connected'
        ? encode({
            type: 'start',
            stream: stream.name,
            partnerSrt: this.#broker.srtReport(stream, other(mine)),
          })
        : encode({ type: 'start', stream: stream.name });
    h[0].send(startFor('a'));
    h[1].send(startFor('b'));
    this.#armRelayFallback(session.name, room, stream.name);
  }

  // --- relay fallback (docs/relay.md "Detection")

  /**
   * Spec "States and transitions": a stream whose hole punching failed moves to RELAYING. Failure is
   * judged `relayAfterMs` after `start`, or after a direct link that was connected went down: both ends have
   * reported their SRT state since they registered and neither is `connected`. A client that never reports its SRT state (a spec client that only exchanges
   * coordinates) is never moved: the broker cannot tell that its link failed, and a second `peer` could
   * break a link that works.
   */
  #armRelayFallback(name: string, room: Room, stream: string, after = 'start'): void {
    if (!this.#relay) return;
    const key = `${stream}/relay`;
    room.graceTimers.get(key)?.cancel();
    room.graceTimers.set(
      key,
      this.#clock.setTimer(this.#relayAfterMs, () => {
        room.graceTimers.delete(key);
        if (this.#rooms.get(name) !== room || !room.started.has(stream)) return;
        const session = this.#broker.get(name);
        const record = session?.streams.find((st) => st.name === stream);
        if (!session || !isLive(session) || !record || record.state !== 'ready') return;
        if (record.relay?.state === 'allocated') return;
        const reports = SLOTS.map((slot) => this.#broker.srtReport(record, slot));
        if (reports.some((r) => r === null || r === 'connected')) return;
        this.#log?.warn(
          { session: name, stream, outcome: 'relay_fallback', afterMs: this.#relayAfterMs, srt: reports },
          `no SRT connection within the detection window after ${after}; moving the stream to the relay`,
        );
        void this.#allocateFor(session, record, null).catch(this.#onError);
      }),
    );
  }

  /**
   * Allocate a relay for a stream and send both peers the new coordinates. `previous` null: the fallback
   * after the detection window (the stream must still be `ready` and started); else the id of an allocation
   * on a relay that was lost (docs/relay.md "A relay's death"), which the stream must still hold.
   */
  async #allocateFor(session: SessionRecord, record: StreamRecord, previous: string | null): Promise<void> {
    const relay = this.#relay;
    const { peerA, peerB } = record;
    if (!relay || !peerA || !peerB) return;
    const name = session.name;
    const room = this.#rooms.get(name);
    // docs/relay.md "The cap per session": declared, else measured on a link being moved, else the default.
    const sender = peerB.role === 'sender' ? peerB : peerA;
    const cap = relayByteCap({
      declaredBps: declaredBitrate(sender.meta) ?? declaredBitrate((sender === peerA ? peerB : peerA).meta),
      measuredBps: previous === null || !room ? undefined : this.#measuredBitrate(room, record.name),
    });
    const lifetimeMs = this.#lifetimeFor(session);
    const result = await relay.allocate({
      sessionId: session.id,
      peers: [peerA.ip, peerB.ip],
      ...(cap.bytesPerSecond === undefined ? {} : { bytesPerSecond: cap.bytesPerSecond }),
      lifetimeMs,
    });
    // The stream may have changed while the relay bound its ports: a new claim, a departure, a close.
    const now = this.#broker.get(name);
    const current = now?.streams.find((st) => st.name === record.name);
    const unchanged =
      now === session &&
      isLive(session) &&
      this.#rooms.get(name) === room &&
      current?.peerA === peerA &&
      current.peerB === peerB &&
      (previous === null
        ? room !== undefined && room.started.has(record.name) && current.state === 'ready'
        : current.relay?.state === 'allocated' && current.relay.id === previous);
    if (!result.ok) {
      this.#onRelayFallback('refused', result.reason);
      this.#log?.warn(
        { session: name, stream: record.name, outcome: 'relay_refused', reason: result.reason },
        previous === null
          ? 'the relay refused the allocation; the stream stays on its direct path'
          : 'no live relay took the stream of the lost relay; its peers are sent their direct coordinates',
      );
      if (!unchanged) return;
      await this.#broker.setRelay(
        name,
        record.name,
        previous === null
          ? {
              state: 'refused',
              reason: result.reason,
              id: null,
              address: null,
              ports: null,
              since: this.#clock.now(),
            }
          : {
              ...(current?.relay ?? emptyRelay()),
              state: 'ended',
              reason: 'relay_lost',
              since: this.#clock.now(),
            },
      );
      if (previous !== null) this.#sendCoordinates(session, record);
      return;
    }
    if (!unchanged) {
      relay.release(result.id);
      return;
    }
    const saved = await this.#broker.setRelay(name, record.name, {
      state: 'allocated',
      reason: null,
      id: result.id,
      address: result.address,
      ports: result.ports,
      since: this.#clock.now(),
    });
    if (!saved.ok || this.#rooms.get(name) !== room) {
      relay.release(result.id);
      return;
    }
    this.#allocations.set(result.id, { session: name, stream: record.name });
    this.#scheduleRenewal(result.id, lifetimeMs);
    this.#onRelayFallback('allocated', previous === null ? null : 'relay_lost');
    this.#log?.info(
      {
        session: name,
        stream: record.name,
        outcome: 'relayed',
        relay: result.address,
        ports: result.ports,
        allocation: result.id,
        cap: cap.source,
        ...(cap.bytesPerSecond === undefined ? {} : { bytesPerSecond: cap.bytesPerSecond }),
        ...(previous === null ? {} : { replaces: previous }),
      },
      previous === null
        ? 'stream moved to the relay; peers sent the relay as their partner'
        : 'stream of the lost relay moved to a live relay; peers sent its coordinates',
    );
    this.#sendCoordinates(session, record);
  }

  /** An allocation's lifetime for this session now (relay-renewal.ts). */
  #lifetimeFor(session: SessionRecord): number {
    return relayLifetimeMs({
      sessionExpiresAt: session.expiresAt,
      now: this.#clock.now(),
      lifetimeMs: this.#relayLifetimeMs,
      maxLifetimeMs: DEFAULT_RELAY_LIMITS.maxLifetimeMs,
    });
  }

  #scheduleRenewal(id: string, lifetimeMs: number): void {
    this.#renewals.get(id)?.cancel();
    this.#renewals.set(
      id,
      this.#clock.setTimer(renewAfterMs(lifetimeMs), () => this.#renew(id)),
    );
  }

  /** Renew an allocation this hub still holds for a live session (docs/relay.md "Renewal"); else forget it. */
  #renew(id: string): void {
    this.#renewals.delete(id);
    const where = this.#allocations.get(id);
    const session = where ? this.#broker.get(where.session) : undefined;
    const record = session?.streams.find((st) => st.name === where?.stream);
    if (!this.#relay?.renew || !session || !isLive(session) || record?.relay?.id !== id) return;
    const lifetimeMs = this.#lifetimeFor(session);
    this.#relay.renew(id, lifetimeMs);
    this.#log?.info(
      { session: session.name, stream: record.name, outcome: 'relay_renewed', allocation: id, lifetimeMs },
      "the stream's relay allocation was renewed",
    );
    this.#scheduleRenewal(id, lifetimeMs);
  }

  /** The highest bitrate either end of a stream reported within `healthFreshMs`; undefined without one. */
  #measuredBitrate(room: Room, stream: string): number | undefined {
    const now = this.#clock.monotonicMs();
    const rates = Object.values(room.health.get(stream) ?? {})
      .filter((h): h is HealthSample => h !== undefined && now - h.at <= this.#healthFreshMs)
      .map((h) => h.bitrate);
    return rates.length > 0 ? Math.max(...rates) : undefined;
  }

  /** A new pair of coordinates: each present peer is sent `peer`; `start` follows the next pair of `ready`s. */
  #sendCoordinates(session: SessionRecord, record: StreamRecord): void {
    const room = this.#rooms.get(session.name);
    if (!room) return;
    room.ready.delete(record.name);
    room.started.delete(record.name);
    const h = this.#holders(room, record.name);
    for (const slot of SLOTS) {
      const link = h[slotIndex(slot)];
      const mine = claimOf(record, slot);
      const theirs = claimOf(record, other(slot));
      if (link && mine && theirs) this.#sendPeer(link, peerMessage(session, record, theirs, mine, slot));
    }
  }

  /**
   * A relay was lost (its registration expired, docs/relay.md "A relay's death"): each stream allocated on
   * it is moved to a new allocation and its peers get the new coordinates.
   */
  relayLost(relayId: string): void {
    for (const session of this.#broker.liveSessionRecords()) {
      for (const record of session.streams) {
        const id = record.relay?.state === 'allocated' ? record.relay.id : null;
        if (id === null || relayOfAllocation(id) !== relayId) continue;
        this.#allocations.delete(id);
        this.#log?.warn(
          {
            session: session.name,
            stream: record.name,
            outcome: 'relay_lost',
            relay: relayId,
            allocation: id,
          },
          "the stream's relay was lost; re-allocating",
        );
        void this.#allocateFor(session, record, id).catch(this.#onError);
      }
    }
  }

  /**
   * After this instance took over the sessions (docs/multi-instance.md "Election"): the allocations the
   * loaded streams name are taken over (released with their session, their ends reported); those on a relay
   * that is not up are re-allocated as for a lost relay.
   */
  adoptRelays(isUp: (relayId: string) => boolean): void {
    const lost = new Set<string>();
    for (const session of this.#broker.liveSessionRecords()) {
      for (const record of session.streams) {
        const id = record.relay?.state === 'allocated' ? record.relay.id : null;
        if (id === null) continue;
        const relayId = relayOfAllocation(id);
        if (relayId !== undefined && isUp(relayId)) {
          this.#allocations.set(id, { session: session.name, stream: record.name });
          // When the previous owner last renewed it is not known here: renew now, then on schedule.
          this.#renew(id);
        } else lost.add(relayId ?? id);
      }
    }
    for (const relayId of lost) this.relayLost(relayId);
  }

  /** The relay ended an allocation (idle or expired): the view says so; the stream is direct again. */
  relayEnded(id: string, reason: string): void {
    const where = this.#allocations.get(id);
    this.#allocations.delete(id);
    if (!where) return;
    const record = this.#broker.get(where.session)?.streams.find((st) => st.name === where.stream);
    if (record?.relay?.id !== id) return;
    this.#log?.warn(
      { session: where.session, stream: where.stream, outcome: 'relay_ended', reason, allocation: id },
      "the relay ended the stream's allocation",
    );
    void this.#broker
      .setRelay(where.session, where.stream, {
        ...record.relay,
        state: 'ended',
        reason,
        since: this.#clock.now(),
      })
      .catch(this.#onError);
  }

  /** `punch_sessions_total{path}`: each stream of a session once per path it got connected on. */
  #countConnected(session: SessionRecord): void {
    for (const st of session.streams) {
      if (st.state !== 'connected') continue;
      const path = pathOf(st);
      let counted = this.#countedConnected.get(session);
      if (!counted) {
        counted = new Set();
        this.#countedConnected.set(session, counted);
      }
      const key = `${st.name}\n${path}`;
      if (counted.has(key)) continue;
      counted.add(key);
      this.#onStreamConnected(path);
    }
  }

  /** Release this stream's allocations that it no longer uses (a claim from another address left it). */
  #releaseStaleRelays(name: string, stream: StreamRecord): void {
    for (const [id, where] of this.#allocations) {
      if (where.session !== name || where.stream !== stream.name || stream.relay?.id === id) continue;
      this.#allocations.delete(id);
      this.#relay?.release(id);
      this.#log?.info(
        { session: name, stream: stream.name, outcome: 'relay_released', allocation: id },
        'a peer came back from another address; the relay pinned to the old one is released',
      );
    }
  }

  /** Release the stream's allocation, if it has one (its slot was released, or the session closed). */
  #releaseRelay(record: StreamRecord | undefined): void {
    const id = record?.relay?.state === 'allocated' ? record.relay.id : null;
    if (id === null || !this.#allocations.delete(id)) return;
    this.#relay?.release(id);
  }

  // --- health

  #health(link: PeerLink, room: Room, session: SessionRecord, msg: HealthMessage): void {
    const stream = this.#resolveStream(link, room, session, msg.stream);
    if (!stream) return;
    const slot = this.#heldSlot(link, room, stream);
    if (slot === undefined && link.claims.role !== 'admin') {
      link.send(errorText('INVALID_MESSAGE', `stream "${stream.name}": register on it first`));
      return;
    }
    // An admin reporting for a stream it does not hold (e.g. a monitoring probe) fills slot b's place.
    const at = this.#clock.monotonicMs();
    const role = slot ? claimOf(stream, slot)?.role : null;
    let samples = room.health.get(stream.name);
    if (!samples) {
      samples = {};
      room.health.set(stream.name, samples);
    }
    samples[slot ?? 'b'] = {
      rtt: msg.rtt,
      retransmit: msg.retransmit,
      bitrate: msg.bitrate,
      at,
      wall: this.#clock.now(),
      receiver: role === 'receiver',
      dropped: msg.dropped,
      buffer: msg.buffer,
      role: role ?? msg.role ?? null,
      counted: msg.counts !== undefined,
    };
    this.#recordHistory(room, session, stream.name, samples[slot ?? 'b'] as HealthSample, msg);
    // The view shows the receiver's latest report while it is fresh, otherwise the latest of either.
    const all = Object.values(samples).filter((s): s is HealthSample => s !== undefined);
    const fresh = all.find((s) => s.receiver && at - s.at < this.#healthFreshMs);
    const latest = fresh ?? all.reduce((a, b) => (b.at > a.at ? b : a));
    this.#broker.setHealth(session.name, stream.name, {
      rtt: latest.rtt,
      retransmit: latest.retransmit,
      bitrate: latest.bitrate,
      at: latest.wall,
    });
    this.#scheduleHealthReport(session.name, room);
  }

  /** Into the 10-minute history (health-monitor.ts), when the end's role is known; alarms go out at once. */
  #recordHistory(
    room: Room,
    session: SessionRecord,
    stream: string,
    s: HealthSample,
    msg: HealthMessage,
  ): void {
    if (!s.role) return;
    const alarms = this.#monitor.record(
      session.name,
      stream,
      s.role,
      {
        at: s.at,
        wall: s.wall,
        rtt: s.rtt,
        retransmit: s.retransmit,
        bitrate: s.bitrate,
        counts: msg.counts,
        dropped: s.dropped ?? 0,
        latency: s.role === 'receiver' ? (msg.latency ?? session.latency) : undefined,
      },
      session.latency,
    );
    for (const a of alarms) {
      const text = encode({
        type: 'health_alarm',
        stream,
        alarm: a.alarm,
        active: a.active,
        message: a.message,
        at: a.at,
      });
      for (const l of room.links) if (l.claims.role === 'admin') l.send(text);
      this.#onAlarm(a);
    }
  }

  /** What the relay measured on a stream's allocation, while the stream is relayed (docs/relay.md). */
  relayFigures(stream: StreamRecord): RelayPathReport | undefined {
    const id = stream.relay?.state === 'allocated' ? stream.relay.id : null;
    return id === null ? undefined : this.#relay?.figures?.(id);
  }

  /** A stream's assessment and 10-minute history (the API's `GET …/health`); null for an unknown session. */
  healthView(name: string, stream: string): LinkHealthView | null {
    const session = this.#broker.get(name);
    if (!session || !isLive(session) || !session.streams.some((s) => s.name === stream)) return null;
    return this.#monitor.view(name, stream, this.#clock.monotonicMs(), session.latency);
  }

  #scheduleHealthReport(name: string, room: Room): void {
    if (room.healthTimer) return;
    const now = this.#clock.monotonicMs();
    const wait = room.lastHealthReport + this.#healthReportMs - now;
    if (wait <= 0) {
      this.#sendHealthReport(name, room);
      return;
    }
    room.healthTimer = this.#clock.setTimer(wait, () => {
      room.healthTimer = null;
      if (this.#rooms.get(name) === room) this.#sendHealthReport(name, room);
    });
  }

  /** Each present end's latest report (README "Health": the console shows both ends). */
  #ends(room: Room, stream: string): Record<string, EndHealth> {
    const out: Record<string, EndHealth> = {};
    const now = this.#clock.monotonicMs();
    const samples = room.health.get(stream) ?? {};
    for (const slot of SLOTS) {
      const s = samples[slot];
      if (!s || now - s.at > HEALTH_MAX_AGE_MS) continue;
      out[slot] = {
        rtt: s.rtt,
        retransmit: s.retransmit,
        bitrate: s.bitrate,
        dropped: s.dropped ?? null,
        buffer: s.buffer ?? null,
        age: Math.round((now - s.at) / 100) / 10,
        role: s.role,
      };
    }
    return out;
  }

  /** `{relay: figures}` while relayed and measured (docs/relay.md "What the operator sees"), else nothing. */
  #relayFiguresOf(stream: StreamRecord, now: number): { relay?: RelayPathView } {
    const report = this.relayFigures(stream);
    return report ? { relay: relayPathView(report, now) } : {};
  }

  #sendHealthReport(name: string, room: Room): void {
    room.lastHealthReport = this.#clock.monotonicMs();
    const session = this.#broker.get(name);
    if (!session || !isLive(session)) return;
    const streams: Extract<ServerMessage, { type: 'health_report' }>['streams'] = {};
    const now = this.#clock.now();
    for (const s of session.streams) {
      const h = liveHealth(s.health, now);
      if (!h) continue;
      // From ends that send their counters (docs/health.md), the verdict is taken over the 10 s window
      // (link-health.ts); a client that sends only the spec's fields is classified by its latest report.
      const counted = Object.values(room.health.get(s.name) ?? {}).some((x) => x?.counted === true);
      const a = counted
        ? this.#monitor.assess(name, s.name, this.#clock.monotonicMs(), session.latency)
        : null;
      streams[s.name] = {
        rtt: a?.rtt ?? h.rtt,
        retransmit: a?.retransmit ?? h.retransmit,
        bitrate: h.bitrate,
        status: a?.status ?? classifyHealth(h.rtt, h.retransmit),
        suggestedLatency: a?.suggestedLatency ?? suggestedLatency(h.rtt),
        ...relayedPath(s),
        ...this.#relayFiguresOf(s, now),
        ends: this.#ends(room, s.name),
        ...(a ? { figures: a.ends, advice: a.advice, alarms: a.alarms } : {}),
      };
    }
    const text = encode({ type: 'health_report', streams });
    for (const l of room.links) if (l.claims.role === 'admin') l.send(text);
  }

  // --- tally

  #tally(
    link: PeerLink,
    room: Room,
    session: SessionRecord,
    requested: string | undefined,
    state: TallyState,
    stale: boolean,
  ): void {
    if (link.claims.role !== 'admin') {
      link.send(errorText('AUTH_FAILED', 'tally: only an admin token may set tally'));
      return;
    }
    const stream = this.#resolveStream(link, room, session, requested);
    if (!stream) return;
    const before = room.tally.get(stream.name);
    // A stale tally repeated (a sender's reconnect) keeps the time it first became stale.
    const staleSince = !stale ? null : (before?.staleSince ?? this.#clock.monotonicMs());
    room.tally.set(stream.name, { state, staleSince });
    const text = this.#tallyText(room, stream.name);
    if (text === null) return;
    const h = this.#holders(room, stream.name);
    const to = new Set<PeerLink>();
    for (const l of h) if (l) to.add(l);
    for (const l of room.links) if (l.claims.role === 'admin') to.add(l);
    for (const [l, watched] of room.watchers) if (watched === stream.name) to.add(l);
    for (const l of to) l.send(text);
  }

  /** The stream's `tally` message, `stale` and `age` added when it is not known; null before any tally. */
  #tallyText(room: Room, stream: string): string | null {
    const t = room.tally.get(stream);
    if (!t) return null;
    if (t.staleSince === null) return encode({ type: 'tally', stream, state: t.state });
    const age = Math.max(0, Math.round(this.#clock.monotonicMs() - t.staleSince));
    return encode({ type: 'tally', stream, state: t.state, stale: true, age });
  }

  #sendTally(link: PeerLink, room: Room, stream: string): void {
    const text = this.#tallyText(room, stream);
    if (text !== null) link.send(text);
  }

  // --- broker events → messages

  #onBrokerEvent(e: BrokerEvent): void {
    if (e.type !== 'session_closed') this.#countConnected(e.session);
    // docs/relay.md "Lifetime": a session's allocations end with it (whether or not anyone is connected).
    if (e.type === 'session_closed') for (const st of e.session.streams) this.#releaseRelay(st);
    const room = this.#rooms.get(e.session.name);
    if (!room) return;
    switch (e.type) {
      case 'peer_matched': {
        const { peerA, peerB } = e.stream;
        if (!peerA || !peerB) return;
        this.#log?.info(
          {
            session: e.session.name,
            stream: e.stream.name,
            ip: peerA.ip,
            peerIp: peerB.ip,
            port: peerA.port,
            outcome: 'matched',
          },
          'stream matched',
        );
        const text = encode({
          type: 'peer_match',
          stream: e.stream.name,
          peer_a: { ip: peerA.ip, port: peerA.port },
          peer_b: { ip: peerB.ip, port: peerB.port },
          localPort: peerA.port,
          passphrase: e.session.passphrase,
          latency: e.session.latency,
        });
        for (const l of room.links) if (l.claims.role === 'admin') l.send(text);
        return;
      }
      case 'session_changed': {
        const text = encode(this.#sessionMessage(e.session));
        for (const l of room.links) l.send(text);
        return;
      }
      case 'peer_presence': {
        // README "Presence": to admin observers and to the stream's peers; spec clients ignore the type.
        const claim = claimOf(e.stream, e.slot);
        const text = encode({
          type: 'presence',
          stream: e.stream.name,
          slot: e.slot,
          present: e.present,
          label: claim?.label ?? '',
        });
        const h = this.#holders(room, e.stream.name);
        for (const l of room.links) if (l.claims.role === 'admin' || l === h[0] || l === h[1]) l.send(text);
        return;
      }
      case 'invite_revoked': {
        // README "Invites": the revoked token's connections end at once; their slots stay claimed
        // (detached) and are freed after the grace period, or taken by another peer then.
        const text = errorText('AUTH_FAILED', 'token: its invite was revoked by the operator');
        for (const l of [...room.links]) {
          if (l.claims.inv !== e.invite.id) continue;
          l.send(text);
          this.detach(l, 'invite revoked');
          l.end('revoked');
        }
        return;
      }
      case 'session_closed': {
        const text = encode({ type: 'session_closed', reason: e.reason });
        room.healthTimer?.cancel();
        for (const t of room.graceTimers.values()) t.cancel();
        this.#rooms.delete(e.session.name);
        this.#monitor.drop(e.session.name);
        for (const l of room.links) {
          this.#sessionOf.delete(l);
          l.send(text);
          l.end('session_closed');
        }
        return;
      }
      default:
        return;
    }
  }
}

/**
 * `peer` to the peer holding `mine` (slot `slot`), about `theirs`. On the relay (docs/relay.md "What the
 * agent is sent"), the partner's address is the relay's and its port is this peer's relay port.
 */
function peerMessage(
  session: SessionRecord,
  stream: StreamRecord,
  theirs: PeerClaim,
  mine: PeerClaim,
  slot: PeerSlot,
): Extract<ServerMessage, { type: 'peer' }> {
  const relay = stream.relay?.state === 'allocated' ? stream.relay : null;
  return {
    type: 'peer',
    stream: stream.name,
    ip: relay?.address ?? theirs.ip,
    port: relay?.ports?.[slotIndex(slot)] ?? theirs.port,
    localPort: mine.port,
    passphrase: session.passphrase,
    latency: session.latency,
    meta: theirs.meta,
  };
}

/** `{path: 'relayed'}` while the stream is on the relay, else nothing (the spec's message shapes). */
function relayedPath(stream: StreamRecord): { path?: 'relayed' } {
  return pathOf(stream) === 'relayed' ? { path: 'relayed' } : {};
}

/** The `session` message; `peers` counts the stream's present peers (README "Presence"). */
export function sessionMessage(
  session: SessionRecord,
  presentPeers: (stream: StreamRecord) => number = (s) => (s.peerA ? 1 : 0) + (s.peerB ? 1 : 0),
): ServerMessage {
  const streams: Record<string, { state: string; peers: number; path?: 'relayed' }> = {};
  let connected = 0;
  for (const s of session.streams) {
    // docs/relay.md "What the operator sees": `path` only while relayed, so the spec's shape stays otherwise.
    streams[s.name] = { state: s.state, peers: presentPeers(s), ...relayedPath(s) };
    if (s.state === 'connected') connected++;
  }
  return { type: 'session', state: session.state, streams, connected, total: session.streams.length };
}

/** A relay record's empty fields (for `ended` on a stream whose record was cleared meanwhile). */
function emptyRelay(): StreamRelay {
  return { state: 'ended', reason: null, id: null, address: null, ports: null, since: 0 };
}
