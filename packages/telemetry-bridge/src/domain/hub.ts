/**
 * The core hub (README "Code map"), assembled from modules with one job each:
 * - StateStore (state-store.ts): values, owners, versions, the key index;
 * - Journal (journal.ts): the hub-wide offset, the event log feed, the replay ring, durability;
 * - MessageFactory (message-factory.ts): every outgoing message, serialised once;
 * - Router (subscriptions.ts): wildcard fan-out, paged snapshots and replays;
 * - CommandRouter (commands.ts): commands, acks, TTL, idempotency;
 * - ClientRegistry (client-registry.ts): namespaces, identity, rate limit, departed-key expiry;
 * - ClientWrites (client-writes.ts): clients' own state and events, acked once durable;
 * - AdapterHost (adapters.ts): the surface device adapters plug into;
 * - restore (recovery.ts): state and ring rebuilt from the log.
 * This class owns the rules that tie them together (ownership, stale marking, departed-key expiry) and the
 * typed entry points for the transport: openClient / handle / closeClient. It never sees wire text or close
 * codes: frames arrive parsed (protocol/envelope.ts) and connections end with a DisconnectReason.
 */
import type { Clock, Logger, TimerHandle } from '@broadcast-ops/core';
import type { Adapter } from './adapter.ts';
import { AdapterHost } from './adapters.ts';
import { ClientRegistry, idempotencyScope, type IdentityProof } from './client-registry.ts';
import type { ClientConn } from './client-conn.ts';
import { CommandRouter } from './commands.ts';
import { Journal } from './journal.ts';
import { HUB_NAMESPACE, MessageFactory, type RelatedMessage } from './message-factory.ts';
import { labelOf, noMetrics, type HubMetrics } from './metrics.ts';
import { OutboundQueue, type OutboundSink } from './outbound-queue.ts';
import { ClientWrites, related } from './client-writes.ts';
import {
  DEFAULT_HUB_LIMITS,
  type HubLimits,
  type HubOptions,
  type OpenedClient,
  type StateWriteOutcome,
} from './hub-options.ts';
import { idempotencyFromLog, type RestoredIdem } from './idempotency-log.ts';
import { restore } from './recovery.ts';
import { StateStore } from './state-store.ts';
import { Router } from './subscriptions.ts';
import type { ClientEnvelope } from '../protocol/envelope.ts';
import type { BridgeErrorCode } from '../errors.ts';

export { HUB_NAMESPACE, SUBSCRIPTIONS_PATH } from './message-factory.ts';
export type { EventLogSink } from './journal.ts';
export type { RecoveredLog } from './recovery.ts';
export type { HubMetrics } from './metrics.ts';
export * from './hub-options.ts';

/** Values marked stale per event-loop turn when an owner's keys go stale or fresh (#markOwnerStale). */
export const STALE_TURN_BYTES = 1024 * 1024;

export class Hub {
  readonly epoch: string;
  readonly store = new StateStore();
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #limits: HubLimits;
  readonly #metrics: HubMetrics;
  readonly #factory: MessageFactory;
  readonly #journal: Journal;
  readonly #router: Router;
  readonly #commands: CommandRouter;
  readonly #clients: ClientRegistry;
  readonly #adapters: AdapterHost;
  readonly #writes: ClientWrites;
  readonly #restoredOwners: Set<string>;
  #restoredIdem: RestoredIdem[] = [];
  #slowDisconnects = 0;
  /** Stale marking of an owner's keys still under way in later turns (#markOwnerStale), per owner. */
  readonly #staleJobs = new Map<string, TimerHandle>();

  constructor(options: HubOptions) {
    this.#clock = options.clock;
    this.#logger = options.logger.child({ component: 'hub' });
    this.#limits = {
      ...DEFAULT_HUB_LIMITS,
      ...options.limits,
      outbound: { ...DEFAULT_HUB_LIMITS.outbound, ...options.limits?.outbound },
    };
    this.#metrics = options.metrics ?? noMetrics;
    this.#factory = new MessageFactory(this.#clock);
    const rec = options.recovered;
    this.epoch = options.epoch ?? rec?.epoch ?? this.#factory.nextId();
    const lastOffset = rec?.lastOffset ?? 0;
    this.#journal = new Journal({
      log: options.log,
      ring: { maxMessages: this.#limits.replayRingSize, maxBytes: this.#limits.replayRingBytes },
      now: () => this.#clock.now(),
      startOffset: lastOffset,
      // A new epoch cannot replay anything older than itself.
      replayFloor: rec && rec.epoch === this.epoch ? rec.floorOffset : lastOffset,
    });
    this.#clients = new ClientRegistry(this.#clock, options.identities);
    this.#router = new Router({
      clock: this.#clock,
      store: this.store,
      journal: this.#journal,
      factory: this.#factory,
      epoch: this.epoch,
      maxPatternsPerClient: this.#limits.maxPatternsPerClient,
      maxPendingSnapshotKeys: this.#limits.maxPendingSnapshotKeys,
      pollMs: this.#limits.outbound.pollMs,
      ack: (conn, msg, result) => this.#writes.ack(conn, msg, result, false),
      refuse: (conn, msg, message) =>
        this.#sendError(conn, 'SUBSCRIPTION_FAILED', message, related(msg), msg.type),
      delivered: (kind, n) => this.#metrics.messagesSent(kind, 'app', n),
      failed: (conn, sub, reason, err) => {
        const patterns = [...sub.patterns];
        const rel = { id: sub.messageId };
        const details = { subscriptionId: sub.id, patterns };
        if (reason === 'limit') {
          this.#logger.warn(
            { namespace: conn.namespace, subscriptionId: sub.id },
            'subscription dropped: its replay fell behind the ring and the snapshot is over the limit',
          );
          this.#sendError(
            conn,
            'SUBSCRIPTION_FAILED',
            `subscription ${sub.id} dropped: its replay fell behind and a snapshot would exceed ` +
              `${this.#limits.maxPendingSnapshotKeys} pending keys per client`,
            rel,
            'subscribe',
            details,
          );
          return;
        }
        this.#logger.error(
          { err, namespace: conn.namespace, subscriptionId: sub.id },
          'snapshot or replay failed',
        );
        this.#sendError(
          conn,
          'INTERNAL_ERROR',
          `subscription ${sub.id} could not be completed and was dropped`,
          rel,
          'subscribe',
          details,
        );
      },
    });
    this.#commands = new CommandRouter({
      clock: this.#clock,
      logger: this.#logger,
      journal: this.#journal,
      factory: this.#factory,
      metrics: this.#metrics,
      defaultTimeoutMs: this.#limits.defaultCommandTimeoutMs,
      idempotencyWindowMs: this.#limits.idempotencyWindowMs,
      maxInFlightPerClient: this.#limits.maxCommandsInFlightPerClient,
      target: (name) => this.#adapters.target(name),
      sendTo: (ns, json) => {
        const c = this.#clients.byNamespace(ns);
        if (c?.open) c.queue.push('control', json);
      },
      fail: (conn, msg, code, message, details) =>
        this.#sendError(conn, code, message, related(msg), 'command', details),
    });
    this.#adapters = new AdapterHost({
      clock: this.#clock,
      logger: this.#logger,
      metrics: this.#metrics,
      claim: (prefix, owner) => this.store.claim(prefix, owner),
      ownerOf: (path) => this.store.ownerOf(path),
      writeState: (w, p, v, c) => this.writeState(w, p, v, c),
      publishEvent: (s, p, e, d, c) => this.publishEvent(s, p, e, d, c),
      rootLogger: options.logger,
      markStale: (owner, stale, except) => this.#markOwnerStale(owner, stale, except),
      markPathStale: (owner, path, stale) => {
        if (this.store.ownerOf(path) === owner) this.#markPathStale(path, stale);
      },
      read: (path) => this.store.get(path)?.value,
      writeLog: () => this.#journal.writePending(),
    });
    this.#writes = new ClientWrites({
      logger: this.#logger,
      store: this.store,
      journal: this.#journal,
      factory: this.#factory,
      maxKeysPerClient: this.#limits.maxKeysPerClient,
      writeState: (w, p, v, c) => this.writeState(w, p, v, c),
      publishEvent: (src, p, e, d, c) => this.publishEvent(src, p, e, d, c),
      sendError: (conn, code, message, rel, type, details) =>
        this.#sendError(conn, code, message, rel, type, details),
    });
    this.store.claim('hub', HUB_NAMESPACE);
    this.#restoredOwners = rec ? restore(rec, this.store, this.#journal) : new Set();
    if (rec)
      this.#restoredIdem = idempotencyFromLog(
        rec.records,
        this.#clock.now(),
        this.#limits.idempotencyWindowMs,
      );
    if (rec?.lost && rec.lost.length > 0) this.#commands.setLost(rec.lost);
    for (const owner of this.#restoredOwners) {
      if (owner.startsWith('app.')) this.store.claim(`${owner}.custom`, owner);
    }
    if (options.identities)
      this.#clients.restoreBindings([...this.#restoredOwners].filter((o) => o.startsWith('app.')));
  }

  get offset(): number {
    return this.#journal.offset;
  }

  /**
   * After a restart: restored keys are stale until their owner is back (one logged delta each), and the
   * keys of clients that do not come back expire like those of any departed client. Call once the event
   * log accepts appends.
   */
  markRecovered(): void {
    for (const owner of this.#restoredOwners) {
      this.#markOwnerStale(owner, true);
      if (owner.startsWith('app.')) this.#scheduleExpiry(owner);
    }
    this.#restoredOwners.clear();
    if (this.#restoredIdem.length > 0) {
      const interrupted = this.#commands.seed(this.#restoredIdem);
      this.#logger.info(
        { keys: this.#restoredIdem.length, interrupted },
        'idempotency keys restored from the event log',
      );
      this.#restoredIdem = [];
    }
  }

  // ---------------------------------------------------------------------------------------------- adapters

  registerAdapter(adapter: Adapter): void {
    this.#adapters.register(adapter);
  }
  adapters(): { name: string; connected: boolean; capabilities: Record<string, unknown> }[] {
    return this.#adapters.list();
  }
  startAdapters(): Promise<void> {
    return this.#adapters.start();
  }
  stopAdapters(): Promise<void> {
    return this.#adapters.stop();
  }

  // ---------------------------------------------------------------------------------------------- state

  /** Write a value as `writer`: refused unless the writer owns the path; no delta for an unchanged value. */
  writeState(writer: string, path: string, value: unknown, correlationId?: string): StateWriteOutcome {
    const valueJson = JSON.stringify(value ?? null);
    const check = this.store.check(path, writer, valueJson);
    if (check.kind === 'conflict') return check;
    if (check.kind === 'unchanged') return { kind: 'unchanged' };
    const offset = this.#journal.next();
    const entry = this.store.apply(path, writer, value ?? null, valueJson, offset, this.#clock.now());
    this.#metrics.stateUpdate(labelOf(path));
    this.#broadcast('state', path, offset, this.#factory.state(entry, writer, check.deleted, correlationId));
    return { kind: 'changed', version: entry.version, offset };
  }

  publishEvent(source: string, path: string, event: string, data: unknown, correlationId?: string): number {
    const offset = this.#journal.next();
    this.#broadcast(
      'event',
      path,
      offset,
      this.#factory.event(source, path, event, data, correlationId, offset),
    );
    return offset;
  }

  #broadcast(kind: 'state' | 'event', path: string, offset: number, json: string): void {
    this.#journal.broadcast(offset, kind, path, json);
    this.#router.broadcast(kind, path, offset, json);
  }

  /**
   * Set or clear stale on every key of an owner, one delta (and log record, carrying the value) each. A large
   * owner is done in turns of about STALE_TURN_BYTES of values, so a client or adapter leaving with many MB of
   * state never holds the event loop (other clients' handshakes and acks go on in between). A later call for
   * the same owner (it came back, or left again) supersedes the one under way.
   */
  #markOwnerStale(owner: string, stale: boolean, except?: (path: string) => boolean): void {
    this.#staleJobs.get(owner)?.cancel();
    this.#staleJobs.delete(owner);
    const paths = [...this.store.pathsOf(owner)].filter((p) => except?.(p) !== true);
    let i = 0;
    const turn = (): void => {
      this.#staleJobs.delete(owner);
      let bytes = 0;
      while (i < paths.length && bytes < STALE_TURN_BYTES) {
        const path = paths[i++] as string;
        bytes += this.store.get(path)?.valueJson.length ?? 0;
        this.#markPathStale(path, stale);
      }
      if (i < paths.length) this.#staleJobs.set(owner, this.#clock.setTimer(0, turn));
    };
    turn();
  }

  #markPathStale(path: string, stale: boolean): void {
    const offset = this.#journal.offset + 1;
    const e = this.store.setStale(path, stale, offset, this.#clock.now());
    if (!e) return;
    this.#journal.next();
    this.#broadcast('state', path, offset, this.#factory.state(e, HUB_NAMESPACE, false, undefined));
  }

  #scheduleExpiry(ns: string): void {
    this.#clients.scheduleExpiry(ns, this.#limits.departedKeyTtlMs, () => this.#expire(ns));
  }

  /** A departed client did not come back in time: its keys are deleted (one `value: null` delta each). */
  #expire(ns: string): void {
    const paths = [...this.store.pathsOf(ns)];
    for (const path of paths) this.writeState(ns, path, null);
    this.store.unclaim(`${ns}.custom`);
    this.#clients.forget(ns);
    this.#factory.forget(ns);
    this.#metrics.keysExpired(paths.length);
    this.#logger.info({ namespace: ns, keys: paths.length }, 'departed client keys expired');
  }

  // ---------------------------------------------------------------------------------------------- clients

  /** Register a client after a successful handshake (namespace rules in client-registry.ts). */
  openClient(sink: OutboundSink, name: string, proof: IdentityProof = {}): OpenedClient {
    const { namespace, supersedes } = this.#clients.resolve(name, proof);
    if (supersedes) {
      // The same client on a new socket: the old one is closed without stale marking or expiry.
      this.#logger.info(
        { namespace, oldConnId: supersedes.connId },
        'client reconnected while its old connection lingered; old connection closed',
      );
      this.#drop(supersedes);
      supersedes.sink.close('superseded');
    }
    const connId = this.#clients.nextConnId();
    const conn: ClientConn = {
      connId,
      namespace,
      sessionId: this.#factory.nextId(),
      sink,
      subs: new Map(),
      patternCount: 0,
      windowStart: this.#clock.monotonicMs(),
      windowCount: 0,
      lastStamp: -1,
      replayed: new Set(),
      streams: [],
      pumpTimer: undefined,
      open: true,
      idemScope: idempotencyScope(name, proof),
      queue: new OutboundQueue(
        sink,
        this.#limits.outbound,
        this.#clock,
        (dropped) => this.#factory.hubEvent('messages_coalesced', { dropped }, undefined),
        () => {
          this.#slowDisconnects++;
          this.#metrics.slowConsumer();
          this.#logger.warn({ namespace, connId }, 'slow consumer disconnected');
          // Deferred: this runs inside a fan-out loop, and closing publishes stale deltas of its own.
          conn.open = false;
          queueMicrotask(() => this.closeClient(connId));
        },
      ),
    };
    const resumeToken = this.#clients.add(conn, proof);
    this.store.claim(`${namespace}.custom`, namespace);
    // A returning owner: its keys stop being stale.
    this.#markOwnerStale(namespace, false);
    return {
      connId,
      namespace,
      sessionId: conn.sessionId,
      resumeToken,
      superseded: supersedes !== undefined,
    };
  }

  #drop(conn: ClientConn): void {
    conn.open = false;
    conn.queue.close();
    this.#router.drop(conn);
    this.#clients.remove(conn);
  }

  closeClient(connId: number): void {
    const conn = this.#clients.get(connId);
    if (!conn) return;
    this.#drop(conn);
    const ns = conn.namespace;
    if (this.#clients.isLive(ns)) return;
    // Last will: the client's keys become stale, one delta each; they expire unless it comes back.
    this.#markOwnerStale(ns, true);
    if (this.store.countOf(ns) === 0) {
      // Nothing left behind: forget the namespace, so ever-new names cannot grow the tables.
      this.store.unclaim(`${ns}.custom`);
      this.#clients.forget(ns);
      this.#factory.forget(ns);
    } else {
      this.#scheduleExpiry(ns);
    }
  }

  /** The transport reports a drained socket: flush the queue, continue paged streams. */
  flushClient(connId: number): void {
    const c = this.#clients.get(connId);
    if (!c) return;
    c.queue.flush();
    if (c.streams.length > 0) this.#router.pump(c);
  }

  /**
   * Count one inbound frame against the client's rate limit. Over the limit the client is told
   * (`RATE_LIMITED`, with the frame's id when known) and the frame must be dropped unparsed.
   */
  admit(connId: number, relatedId: string | undefined): boolean {
    const conn = this.#clients.get(connId);
    if (!conn?.open) return false;
    if (this.#clients.allow(conn, this.#limits.rateLimit, this.#limits.rateLimitWindowMs)) return true;
    this.#metrics.rateLimited(labelOf(conn.namespace));
    this.#sendError(
      conn,
      'RATE_LIMITED',
      `more than ${this.#limits.rateLimit} messages in ${this.#limits.rateLimitWindowMs} ms`,
      relatedId === undefined ? {} : { id: relatedId },
      'rate_limit',
    );
    return false;
  }

  /** Answer a frame the transport could not accept (INVALID_MESSAGE, INTERNAL_ERROR, ...). */
  reject(connId: number, code: BridgeErrorCode, message: string, rel: RelatedMessage, type: string): void {
    const conn = this.#clients.get(connId);
    if (conn?.open) this.#sendError(conn, code, message, rel, type);
  }

  /** Send a control frame built by the transport (pong, transport-level errors). */
  sendControl(connId: number, json: string): void {
    const conn = this.#clients.get(connId);
    if (conn?.open) conn.queue.push('control', json);
  }

  transportError(code: BridgeErrorCode, message: string): string {
    return this.#factory.transportError(code, message);
  }

  /** Handle one parsed envelope from a client that completed its handshake. */
  handle(connId: number, msg: ClientEnvelope): void {
    const conn = this.#clients.get(connId);
    if (!conn?.open) return;
    this.#metrics.messageReceived(msg.type, labelOf(conn.namespace));
    switch (msg.type) {
      case 'subscribe':
        this.#router.subscribe(conn, msg);
        return;
      case 'unsubscribe':
        this.#writes.ack(
          conn,
          msg,
          { removedCount: this.#router.unsubscribe(conn, msg.payload.patterns) },
          false,
        );
        return;
      case 'command':
        this.#commands.handle(conn, msg);
        return;
      case 'state':
        this.#writes.state(conn, msg);
        return;
      case 'event':
        this.#writes.event(conn, msg);
        return;
    }
  }

  #sendError(
    conn: ClientConn,
    code: BridgeErrorCode,
    message: string,
    rel: RelatedMessage,
    type: string,
    details?: unknown,
  ): void {
    this.#metrics.messageError(type, code);
    if (conn.open)
      conn.queue.push('control', this.#factory.error(conn.namespace, code, message, rel, details));
  }

  // ---------------------------------------------------------------------------------------------- stats

  /** The connected clients as the console shows them (docs/console.md): subscriptions and backlog. */
  clientViews(): {
    namespace: string;
    connId: number;
    subscriptions: { id: string; patterns: string[]; filter: string }[];
    queuedMessages: number;
    queuedBytes: number;
    bufferedBytes: number;
    coalescing: boolean;
    lastOffset: number;
    offsetsBehind: number;
  }[] {
    const out = [];
    for (const c of this.#clients.all()) {
      const last = Math.max(0, c.lastStamp);
      out.push({
        namespace: c.namespace,
        connId: c.connId,
        subscriptions: [...c.subs.values()].map((s) => ({
          id: s.id,
          patterns: [...s.patterns],
          filter: s.filter,
        })),
        queuedMessages: c.queue.queuedMessages,
        queuedBytes: c.queue.queuedBytes,
        bufferedBytes: c.sink.bufferedAmount(),
        coalescing: c.queue.coalescing,
        lastOffset: last,
        offsetsBehind: last > 0 ? this.#journal.offset - last : 0,
      });
    }
    return out;
  }

  /** Connected (handshaken) clients, without the rest of `stats()`. */
  get clientCount(): number {
    return this.#clients.size;
  }

  stats(): {
    clients: number;
    subscriptions: number;
    patterns: number;
    stateEntries: number;
    inflightCommands: number;
    queuedMessages: number;
    queuedBytes: number;
    coalescingClients: number;
    slowDisconnects: number;
    ringSize: number;
    ringBytes: number;
    streams: number;
    pendingSnapshotKeys: number;
    departedNamespaces: number;
    offset: number;
  } {
    let subscriptions = 0;
    let queuedMessages = 0;
    let queuedBytes = 0;
    let coalescingClients = 0;
    let streams = 0;
    let pendingSnapshotKeys = 0;
    for (const c of this.#clients.all()) {
      pendingSnapshotKeys += this.#router.pendingSnapshotKeys(c);
      subscriptions += c.subs.size;
      queuedMessages += c.queue.queuedMessages;
      queuedBytes += c.queue.queuedBytes;
      streams += c.streams.length;
      if (c.queue.coalescing) coalescingClients++;
    }
    return {
      clients: this.#clients.size,
      subscriptions,
      patterns: this.#router.patterns,
      stateEntries: this.store.size,
      inflightCommands: this.#commands.inflight,
      queuedMessages,
      queuedBytes,
      coalescingClients,
      slowDisconnects: this.#slowDisconnects,
      ringSize: this.#journal.ring.size,
      ringBytes: this.#journal.ring.bytes,
      streams,
      pendingSnapshotKeys,
      departedNamespaces: this.#clients.pendingExpiries,
      offset: this.#journal.offset,
    };
  }

  /** Live connection info by namespace (tests, health). */
  clientByNamespace(namespace: string):
    | {
        connId: number;
        coalescing: boolean;
        coalescedTotal: number;
        maxQueuedBytes: number;
        queuedBytes: number;
      }
    | undefined {
    const c = this.#clients.byNamespace(namespace);
    return (
      c && {
        connId: c.connId,
        coalescing: c.queue.coalescing,
        coalescedTotal: c.queue.coalescedTotal,
        maxQueuedBytes: c.queue.maxQueuedBytes,
        queuedBytes: c.queue.queuedBytes,
      }
    );
  }

  /** Fail every command still in flight and stop timers (shutdown). */
  abortAll(): void {
    for (const job of this.#staleJobs.values()) job.cancel();
    this.#staleJobs.clear();
    this.#commands.abortAll();
    this.#clients.dispose();
  }
}
