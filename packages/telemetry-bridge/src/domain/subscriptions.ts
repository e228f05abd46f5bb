/**
 * Subscriptions and delivery: the wildcard trie that routes each broadcast to its subscribers, and the paged
 * snapshot and replay streams that bring a new or resuming subscription up to date (docs/protocol.md
 * "Subscribe, snapshot and resume").
 *
 * Rules that keep a resume honest:
 * - A snapshot is a list of keys fixed at subscribe time (found through the store's segment index) and sent
 *   page by page as the socket drains; each key is sent with its value at send time. Until a key's page is
 *   sent, live deltas for it are held back for that subscription (the page carries the newer value), so no
 *   delta precedes its key's snapshot entry.
 * - A replay walks the replay ring from the client's offset and keeps walking until it reaches the live end;
 *   live messages for the subscription wait in the ring meanwhile, so they arrive in offset order. If the
 *   ring drops the next offset before the replay reaches it, the client is told `recovery_failed` and gets
 *   a snapshot instead.
 * - `snapshot_complete` carries the hub offset that the subscription is complete up to; the client resumes
 *   from there (or from any later offset it received), never from the subscribe ack.
 * Paged output is written only while the client's queue is empty and its socket is below the soft limit,
 * so any size reaches a reader that keeps up and never counts against the hard limit (live backlog only).
 */
import type { Clock } from '@broadcast-ops/core';
import type { ClientEnvelope } from '../protocol/envelope.ts';
import type { ClientConn, Stream, Subscription, SubscriptionFilter } from './client-conn.ts';
import type { Journal } from './journal.ts';
import { HUB_NAMESPACE, type MessageFactory } from './message-factory.ts';
import type { StateStore } from './state-store.ts';
import { TopicTrie, patternMatches } from './topic-trie.ts';

export interface RouterOptions {
  clock: Clock;
  store: StateStore;
  journal: Journal;
  factory: MessageFactory;
  epoch: string;
  maxPatternsPerClient: number;
  /** Snapshot keys one connection may have waiting to be sent, over all its snapshot streams. */
  maxPendingSnapshotKeys: number;
  /** How often a blocked stream checks the socket again. */
  pollMs: number;
  /** Subscribe answers (ack, or SUBSCRIPTION_FAILED) go through the hub's send path. */
  ack(conn: ClientConn, msg: ClientEnvelope, result: unknown): void;
  refuse(conn: ClientConn, msg: ClientEnvelope, message: string): void;
  delivered(kind: 'state' | 'event', count: number): void;
  /**
   * A subscription was dropped after its ack: its stream failed on a timer (a bug, `err` set) or a replay
   * that fell behind the ring needed a snapshot beyond `maxPendingSnapshotKeys`. The hub logs it and tells
   * the client which subscription is gone.
   */
  failed(conn: ClientConn, sub: Subscription, reason: 'internal' | 'limit', err?: unknown): void;
}

/** Ring items examined per pump before yielding to the event loop. */
const PUMP_BUDGET = 4096;

/**
 * Bound of the broadcast match cache, in cached subscription references over all paths; past it the cache
 * starts again empty (it is only a cache: a miss walks the trie).
 */
const MATCH_CACHE_REFS = 1 << 20;

function kindAllowed(filter: SubscriptionFilter, kind: 'state' | 'event'): boolean {
  return filter === 'all' || (filter === 'state') === (kind === 'state');
}

function matchesAny(patterns: Set<string>, path: string): boolean {
  for (const p of patterns) if (patternMatches(p, path)) return true;
  return false;
}

export class Router {
  readonly #o: RouterOptions;
  readonly #trie = new TopicTrie<Subscription>();
  readonly #scratch = new Set<Subscription>();
  /**
   * Path -> matching subscriptions, filled by broadcasts and emptied whenever any pattern is added or
   * removed, so a broadcast to a known path costs one lookup plus its own recipients (docs/performance.md).
   */
  readonly #matchCache = new Map<string, Subscription[]>();
  #matchCacheRefs = 0;

  constructor(options: RouterOptions) {
    this.#o = options;
  }

  get patterns(): number {
    return this.#trie.size;
  }

  /** Push one serialised broadcast to every live matching subscriber (each connection once). */
  broadcast(kind: 'state' | 'event', path: string, offset: number, json: string): void {
    const subs = this.#subscribersOf(path);
    let n = 0;
    for (let i = 0; i < subs.length; i++) {
      const sub = subs[i] as Subscription;
      if (!kindAllowed(sub.filter, kind) || sub.replaying) continue;
      if (kind === 'state' && sub.pendingPaths?.has(path)) continue;
      const c = sub.conn;
      if (c.lastStamp === offset || !c.open) continue;
      c.lastStamp = offset;
      c.queue.push(kind, json, path);
      n++;
    }
    if (n > 0) this.#o.delivered(kind, n);
  }

  /** The subscriptions whose patterns match `path`, each once (cached until the patterns change). */
  #subscribersOf(path: string): Subscription[] {
    let subs = this.#matchCache.get(path);
    if (subs !== undefined) return subs;
    const found = this.#trie.match(path, this.#scratch);
    subs = [...found];
    found.clear();
    if (this.#matchCacheRefs + subs.length + 1 > MATCH_CACHE_REFS) this.#forgetMatches();
    this.#matchCache.set(path, subs);
    this.#matchCacheRefs += subs.length + 1;
    return subs;
  }

  #forgetMatches(): void {
    this.#matchCache.clear();
    this.#matchCacheRefs = 0;
  }

  #addPattern(pat: string, sub: Subscription): void {
    this.#forgetMatches();
    this.#trie.add(pat, sub);
  }

  #removePattern(pat: string, sub: Subscription): void {
    this.#forgetMatches();
    this.#trie.remove(pat, sub);
  }

  subscribe(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'subscribe' }>): void {
    const p = msg.payload;
    const fresh = [...new Set(p.patterns)];
    if (conn.patternCount + fresh.length > this.#o.maxPatternsPerClient) {
      this.#o.refuse(conn, msg, `at most ${this.#o.maxPatternsPerClient} patterns per client`);
      return;
    }
    const { journal, factory, epoch } = this.#o;
    const filter = p.filter ?? 'all';
    let recoveryFailed: string | undefined;
    let replayFrom: number | undefined;
    if (p.since) {
      const s = p.since;
      if (s.epoch !== epoch) recoveryFailed = 'epoch changed';
      else if (s.offset < journal.ring.floor || s.offset > journal.offset)
        recoveryFailed = 'offset no longer available';
      else replayFrom = s.offset;
    }
    let paths: string[] | undefined;
    if (replayFrom === undefined && (p.snapshot === true || p.since !== undefined)) {
      paths = this.#matching(filter, new Set(fresh));
      if (!this.#snapshotFits(conn, paths.length)) {
        this.#o.refuse(conn, msg, this.#limitMessage(conn, paths.length));
        return;
      }
    }
    const id = factory.nextId();
    const sub: Subscription = {
      id,
      conn,
      patterns: new Set(fresh),
      filter,
      pendingPaths: undefined,
      replaying: replayFrom !== undefined,
      liveFrom: journal.offset,
      messageId: msg.id,
    };
    const correlationId = msg.correlationId ?? msg.id;
    // `offset` here is informational: the position to resume from arrives with snapshot_complete.
    this.#o.ack(conn, msg, { subscriptionId: id, offset: journal.offset, epoch });
    if (replayFrom !== undefined)
      conn.streams.push({ kind: 'replay', sub, cursor: replayFrom, replayed: 0, correlationId });
    else if (paths) conn.streams.push(this.#snapshotStream(sub, paths, correlationId, recoveryFailed));
    conn.subs.set(id, sub);
    conn.patternCount += sub.patterns.size;
    for (const pat of sub.patterns) this.#addPattern(pat, sub);
    this.pump(conn);
  }

  #matching(filter: SubscriptionFilter, patterns: Set<string>): string[] {
    return filter === 'events' ? [] : this.#o.store.matching(patterns);
  }

  /** Snapshot keys this connection still has to send, over all its streams. */
  pendingSnapshotKeys(conn: ClientConn): number {
    let n = 0;
    for (const s of conn.streams) if (s.kind === 'snapshot') n += s.paths.length - s.next;
    return n;
  }

  #snapshotFits(conn: ClientConn, keys: number): boolean {
    return this.pendingSnapshotKeys(conn) + keys <= this.#o.maxPendingSnapshotKeys;
  }

  #limitMessage(conn: ClientConn, keys: number): string {
    return (
      `snapshot of ${keys} keys refused: ${this.pendingSnapshotKeys(conn)} already pending, ` +
      `at most ${this.#o.maxPendingSnapshotKeys} per client`
    );
  }

  #snapshotStream(
    sub: Subscription,
    paths: string[],
    correlationId: string,
    recoveryFailed: string | undefined,
  ): Stream {
    sub.pendingPaths = new Set(paths);
    return { kind: 'snapshot', sub, paths, next: 0, correlationId, recoveryFailed };
  }

  /** Remove one subscription (trie, patterns, streams): nothing is delivered for it any more. */
  #remove(conn: ClientConn, sub: Subscription): void {
    for (const pat of sub.patterns) this.#removePattern(pat, sub);
    conn.patternCount -= sub.patterns.size;
    conn.subs.delete(sub.id);
    conn.streams = conn.streams.filter((s) => s.sub !== sub);
  }

  unsubscribe(conn: ClientConn, patterns: string[]): number {
    let removed = 0;
    for (const pat of new Set(patterns)) {
      for (const [id, sub] of conn.subs) {
        if (!sub.patterns.delete(pat)) continue;
        this.#removePattern(pat, sub);
        conn.patternCount--;
        removed++;
        if (sub.patterns.size === 0) {
          conn.subs.delete(id);
          conn.streams = conn.streams.filter((s) => s.sub !== sub);
        }
      }
    }
    return removed;
  }

  /** Forget a closed connection's subscriptions and streams. */
  drop(conn: ClientConn): void {
    conn.pumpTimer?.cancel();
    conn.pumpTimer = undefined;
    conn.streams = [];
    for (const sub of conn.subs.values()) for (const p of sub.patterns) this.#removePattern(p, sub);
    conn.subs.clear();
    conn.patternCount = 0;
  }

  /**
   * Serve the connection's streams while its socket keeps up; re-arms itself when blocked. Never throws
   * (it runs on timers and on the transport's drain): a stream that fails drops its subscription (one
   * left without its stream would stay deaf, held back by `replaying` or `pendingPaths` for ever), the
   * client is told which one, and the other streams carry on.
   */
  pump(conn: ClientConn): void {
    conn.pumpTimer?.cancel();
    conn.pumpTimer = undefined;
    try {
      this.#serve(conn);
    } catch (err) {
      const s = conn.streams[0];
      if (s) {
        this.#remove(conn, s.sub);
        this.#o.failed(conn, s.sub, 'internal', err);
      }
      if (conn.streams.length > 0) this.#arm(conn, this.#o.pollMs);
    }
  }

  #serve(conn: ClientConn): void {
    let budget = PUMP_BUDGET;
    while (conn.open && conn.streams.length > 0) {
      if (!conn.queue.writable) return this.#arm(conn, this.#o.pollMs);
      if (budget-- <= 0) return this.#arm(conn, 0);
      const s = conn.streams[0] as Stream;
      if (s.kind === 'snapshot') this.#stepSnapshot(conn, s);
      else this.#stepReplay(conn, s);
    }
  }

  #arm(conn: ClientConn, ms: number): void {
    if (!conn.open) return;
    conn.pumpTimer = this.#o.clock.setTimer(ms, () => {
      conn.pumpTimer = undefined;
      this.pump(conn);
    });
  }

  #complete(conn: ClientConn, s: Stream, data: Record<string, unknown>): void {
    const { journal, factory, epoch } = this.#o;
    s.sub.pendingPaths = undefined;
    s.sub.replaying = false;
    s.sub.liveFrom = journal.offset;
    conn.streams.shift();
    conn.queue.push(
      'event',
      factory.hubEvent(
        'snapshot_complete',
        { subscriptionId: s.sub.id, offset: journal.offset, epoch, ...data },
        s.correlationId,
      ),
    );
  }

  #stepSnapshot(conn: ClientConn, s: Extract<Stream, { kind: 'snapshot' }>): void {
    const { store, factory, journal, epoch } = this.#o;
    if (s.recoveryFailed !== undefined) {
      conn.queue.push(
        'event',
        factory.hubEvent(
          'recovery_failed',
          { subscriptionId: s.sub.id, reason: s.recoveryFailed, epoch, offset: journal.offset },
          s.correlationId,
        ),
      );
      s.recoveryFailed = undefined;
      return;
    }
    if (s.next >= s.paths.length) {
      this.#complete(conn, s, {});
      return;
    }
    const path = s.paths[s.next++] as string;
    s.sub.pendingPaths?.delete(path);
    const entry = store.get(path);
    if (!entry) return;
    conn.queue.push('state', factory.state(entry, HUB_NAMESPACE, false, s.correlationId), path);
  }

  #stepReplay(conn: ClientConn, s: Extract<Stream, { kind: 'replay' }>): void {
    const ring = this.#o.journal.ring;
    if (s.cursor < ring.floor) {
      // The ring moved past the replay position before the reader caught up: say so, then a snapshot,
      // within the same per-client bound as a snapshot asked for at subscribe time.
      const sub = s.sub;
      const paths = this.#matching(sub.filter, sub.patterns);
      if (!this.#snapshotFits(conn, paths.length)) {
        this.#remove(conn, sub);
        this.#o.failed(conn, sub, 'limit');
        return;
      }
      sub.replaying = false;
      conn.streams[0] = this.#snapshotStream(sub, paths, s.correlationId, 'offset no longer available');
      return;
    }
    const item = ring.nextAfter(s.cursor);
    if (!item) {
      this.#complete(conn, s, { replayed: s.replayed });
      return;
    }
    s.cursor = item.offset;
    const sub = s.sub;
    if (!kindAllowed(sub.filter, item.kind) || !matchesAny(sub.patterns, item.path)) return;
    if (conn.replayed.has(item.offset) || this.#deliveredLive(conn, sub, item.kind, item.path, item.offset))
      return;
    // Bounded by the ring: older offsets can never be replayed again anyway.
    if (conn.replayed.size >= 65_536) conn.replayed.clear();
    conn.replayed.add(item.offset);
    conn.queue.push(item.kind, item.json, item.kind === 'state' ? item.path : undefined);
    s.replayed++;
  }

  /** Did another, fully live subscription of this connection already deliver this message? */
  #deliveredLive(
    conn: ClientConn,
    except: Subscription,
    kind: 'state' | 'event',
    path: string,
    offset: number,
  ): boolean {
    for (const other of conn.subs.values()) {
      if (other === except || other.replaying || other.pendingPaths !== undefined) continue;
      if (other.liveFrom < offset && kindAllowed(other.filter, kind) && matchesAny(other.patterns, path))
        return true;
    }
    return false;
  }
}
