/**
 * The core hub (spec 2 Part A "core hub"): state store with ownership, topic router with wildcards and
 * backpressure, command routing to adapters with acks, TTL and idempotency, the hub-wide offset with its
 * replay ring, and the feed into the append-only event log. Events in (client frames, adapter calls), actions
 * out (serialised messages pushed to per-client queues). Time comes from the injected Clock.
 *
 * Every broadcast message is serialised once and the same string is pushed to every matching client
 * (reference §4.2 rules).
 */
import type { Clock, Logger } from '@broadcast-ops/core';
import type { Adapter, AdapterCommand, AdapterContext, AdapterResult } from './adapter.ts';
import { UuidV7Generator } from './ids.ts';
import { OutboundQueue, type OutboundLimits, type OutboundSink } from './outbound-queue.ts';
import { StateStore, type StateEntry } from './state-store.ts';
import { TopicTrie, patternMatches } from './topic-trie.ts';
import {
  parseClientFrame,
  type AckStatus,
  type ClientCommand,
  type ClientEnvelope,
  type ErrorInfo,
} from '../protocol/envelope.ts';
import type { LogKind, LogRecord } from '../protocol/log-record.ts';
import type { BridgeErrorCode } from '../errors.ts';

export const HUB_NAMESPACE = 'hub.core';
export const SUBSCRIPTIONS_PATH = 'hub.subscriptions';

/** Where logged messages go (the io event log, or nothing). Must write synchronously before delivery. */
export interface EventLogSink {
  append(offset: number, time: number, kind: LogKind, json: string): void;
}

/** Counters the hub reports; the io layer maps them to prom-client (reference §1.9). */
export interface HubMetrics {
  messageReceived(type: string, source: string): void;
  messagesSent(type: string, target: string, count: number): void;
  messageError(type: string, code: string): void;
  commandFinished(action: string, status: AckStatus, seconds: number): void;
  stateUpdate(prefix: string): void;
  rateLimited(client: string): void;
  adapterState(adapter: string, up: boolean): void;
  adapterReconnect(adapter: string): void;
  adapterLatency(adapter: string, seconds: number): void;
  slowConsumer(): void;
}

const noMetrics: HubMetrics = {
  messageReceived: () => undefined,
  messagesSent: () => undefined,
  messageError: () => undefined,
  commandFinished: () => undefined,
  stateUpdate: () => undefined,
  rateLimited: () => undefined,
  adapterState: () => undefined,
  adapterReconnect: () => undefined,
  adapterLatency: () => undefined,
  slowConsumer: () => undefined,
};

export interface HubLimits {
  /** Messages per client per window (reference §1.10 `rateLimit` / `rateLimitWindow`). */
  rateLimit: number;
  rateLimitWindowMs: number;
  maxPatternsPerClient: number;
  /** Command timeout when the command has no `ttl` (reference §1.3). */
  defaultCommandTimeoutMs: number;
  idempotencyWindowMs: number;
  /** Broadcast messages kept in memory for replay by offset (reference §4.1). */
  replayRingSize: number;
  outbound: OutboundLimits;
}

export const DEFAULT_HUB_LIMITS: HubLimits = {
  rateLimit: 100,
  rateLimitWindowMs: 1000,
  maxPatternsPerClient: 1000,
  defaultCommandTimeoutMs: 30_000,
  idempotencyWindowMs: 60_000,
  replayRingSize: 10_000,
  outbound: {
    softLimitBytes: 1024 * 1024,
    hardLimitBytes: 8 * 1024 * 1024,
    maxQueuedMessages: 10_000,
    pollMs: 5,
  },
};

export interface RecoveredLog {
  epoch: string;
  /** Highest offset found in the log (0 if none). */
  lastOffset: number;
  /** Lowest offset the kept files can replay after (records after it are all present). */
  floorOffset: number;
  records: LogRecord[];
}

export interface HubOptions {
  clock: Clock;
  logger: Logger;
  limits?: Partial<HubLimits>;
  log?: EventLogSink;
  /** State and replay history read back from the event log at start. */
  recovered?: RecoveredLog;
  /** Epoch when there is no log history. */
  epoch?: string;
  metrics?: HubMetrics;
}

interface Subscription {
  id: string;
  conn: ClientConn;
  patterns: Set<string>;
  filter: 'state' | 'events' | 'all';
}

interface ClientConn {
  connId: number;
  namespace: string;
  sessionId: string;
  queue: OutboundQueue;
  subs: Map<string, Subscription>;
  patternCount: number;
  windowStart: number;
  windowCount: number;
  /** Offset of the last broadcast pushed, so a client with two matching subscriptions gets it once. */
  lastStamp: number;
  /** Offsets already replayed on this connection, so overlapping resumed subscriptions get each once. */
  replayed: Set<number>;
  open: boolean;
}

interface RingItem {
  offset: number;
  kind: 'state' | 'event';
  path: string;
  json: string;
}

interface InFlight {
  commandId: string;
  action: string;
  adapter: Adapter;
  /** Connections waiting for the final ack (the original request and idempotent repeats). */
  waiters: Set<number>;
  startedMono: number;
  abort: AbortController;
  timer: { cancel(): void } | undefined;
  done: boolean;
  idemKey: string | undefined;
}

interface IdemEntry {
  at: number;
  receivedJson: string;
  finalJson: string | undefined;
  inflight: InFlight | undefined;
}

export interface SubscribeResult {
  subscriptionId: string;
  offset: number;
  epoch: string;
}

/**
 * Cap on remembered idempotency keys. Clients choose the keys, so the registry needs a bound beyond its time
 * sweep; past it the oldest key is forgotten first (a repeat of that one would execute again).
 */
const MAX_IDEMPOTENCY_KEYS = 100_000;

const RELATED_ID_RE = /"id"\s*:\s*"([^"\\]{1,128})"/;

/** Namespace prefix for metric labels: bounded cardinality (reference §1.9 last line). */
function labelOf(ns: string): string {
  const dot = ns.indexOf('.');
  return dot < 0 ? ns : ns.slice(0, dot);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export class Hub {
  readonly epoch: string;
  readonly store = new StateStore();
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #limits: HubLimits;
  readonly #log: EventLogSink | undefined;
  readonly #metrics: HubMetrics;
  readonly #ids: UuidV7Generator;
  readonly #trie = new TopicTrie<Subscription>();
  readonly #scratch = new Set<Subscription>();
  readonly #clients = new Map<number, ClientConn>();
  readonly #liveNamespaces = new Map<string, number>();
  readonly #sequences = new Map<string, number>();
  readonly #adapters = new Map<string, Adapter>();
  readonly #targets = new Map<string, Adapter>();
  readonly #adapterUp = new Map<string, boolean>();
  readonly #inflight = new Map<string, InFlight>();
  readonly #idem = new Map<string, IdemEntry>();
  #lastIdemSweep = 0;
  #offset = 0;
  #ring: (RingItem | undefined)[];
  #ringHead = 0;
  #ringCount = 0;
  /** Highest offset that can no longer be replayed (evicted from the ring or older than the log). */
  #ringFloor = 0;
  #nextConnId = 1;
  #slowDisconnects = 0;

  constructor(options: HubOptions) {
    this.#clock = options.clock;
    this.#logger = options.logger.child({ component: 'hub' });
    this.#limits = {
      ...DEFAULT_HUB_LIMITS,
      ...options.limits,
      outbound: { ...DEFAULT_HUB_LIMITS.outbound, ...options.limits?.outbound },
    };
    this.#log = options.log;
    this.#metrics = options.metrics ?? noMetrics;
    this.#ids = new UuidV7Generator(() => this.#clock.now());
    this.#ring = new Array<RingItem | undefined>(Math.max(1, this.#limits.replayRingSize));
    this.store.claim('hub', HUB_NAMESPACE);
    const rec = options.recovered;
    this.epoch = rec?.epoch ?? options.epoch ?? this.#ids.next();
    if (rec) this.#restore(rec);
  }

  // ---------------------------------------------------------------------------------------------- ids, seq

  get offset(): number {
    return this.#offset;
  }

  #seq(source: string): number {
    const n = (this.#sequences.get(source) ?? 0) + 1;
    this.#sequences.set(source, n);
    return n;
  }

  // ---------------------------------------------------------------------------------------------- recovery

  /** Rebuild the store and the replay ring from the log, then mark restored keys stale: no owner is here yet. */
  #restore(rec: RecoveredLog): void {
    this.#offset = rec.lastOffset;
    this.#ringFloor = rec.floorOffset;
    for (const r of rec.records) {
      if ((r.k !== 'state' && r.k !== 'event') || !isRecord(r.m)) continue;
      const m = r.m;
      const path = typeof m['path'] === 'string' ? m['path'] : undefined;
      if (path === undefined) continue;
      this.#ringPush({ offset: r.o, kind: r.k, path, json: JSON.stringify(m) });
      if (r.k === 'state' && isRecord(m['payload'])) {
        const p = m['payload'];
        const value = p['value'] ?? null;
        const owner = typeof p['owner'] === 'string' ? p['owner'] : String(m['source']);
        this.store.restore({
          path,
          value,
          valueJson: JSON.stringify(value),
          owner,
          version: typeof p['version'] === 'number' ? p['version'] : 1,
          stale: p['stale'] === true,
          offset: r.o,
          updatedAt: r.t,
        });
        if (owner.startsWith('app.')) this.store.claim(`${owner}.custom`, owner);
      }
    }
    const owners = new Set<string>();
    for (const e of this.store.entries()) owners.add(e.owner);
    for (const owner of owners) this.#markOwnerStale(owner, true);
  }

  // ---------------------------------------------------------------------------------------------- adapters

  registerAdapter(adapter: Adapter): void {
    if (this.#adapters.has(adapter.name)) throw new Error(`adapter ${adapter.name} is already registered`);
    this.#adapters.set(adapter.name, adapter);
    for (const t of [adapter.name, ...adapter.targets]) this.#targets.set(t, adapter);
    for (const prefix of adapter.owns) this.store.claim(prefix, adapter.name);
    this.#adapterUp.set(adapter.name, false);
    this.#metrics.adapterState(adapter.name, false);
  }

  adapters(): { name: string; connected: boolean; capabilities: Record<string, unknown> }[] {
    return [...this.#adapters.values()].map((a) => ({
      name: a.name,
      connected: this.#adapterUp.get(a.name) ?? false,
      capabilities: a.capabilities(),
    }));
  }

  async startAdapters(): Promise<void> {
    for (const a of this.#adapters.values()) await a.start(this.#contextFor(a));
  }

  async stopAdapters(): Promise<void> {
    for (const a of this.#adapters.values()) {
      try {
        await a.stop();
      } catch (err) {
        this.#logger.error({ err, adapter: a.name }, 'adapter stop failed');
      }
    }
  }

  #contextFor(adapter: Adapter): AdapterContext {
    const logger = this.#logger.child({ component: `adapter:${adapter.name}` });
    return {
      clock: this.#clock,
      logger,
      setState: (path, value, options) => {
        const outcome = this.writeState(adapter.name, path, value, options?.correlationId);
        if (outcome.kind === 'conflict') {
          throw new Error(`adapter ${adapter.name} may not write ${path} (owner ${outcome.owner ?? 'none'})`);
        }
      },
      emitEvent: (path, event, data, options) => {
        if (this.store.ownerOf(path) !== adapter.name) {
          throw new Error(`adapter ${adapter.name} may not emit events on ${path}`);
        }
        this.publishEvent(adapter.name, path, event, data, options?.correlationId);
      },
      setConnected: (connected) => {
        if (this.#adapterUp.get(adapter.name) === connected) return;
        this.#adapterUp.set(adapter.name, connected);
        this.#metrics.adapterState(adapter.name, connected);
        this.#markOwnerStale(adapter.name, !connected);
      },
      reportReconnect: () => this.#metrics.adapterReconnect(adapter.name),
      reportLatency: (s) => this.#metrics.adapterLatency(adapter.name, s),
    };
  }

  // ---------------------------------------------------------------------------------------------- publish

  #ringPush(item: RingItem): void {
    const cap = this.#ring.length;
    const idx = (this.#ringHead + this.#ringCount) % cap;
    if (this.#ringCount === cap) {
      const evicted = this.#ring[this.#ringHead];
      if (evicted) this.#ringFloor = evicted.offset;
      this.#ring[this.#ringHead] = item;
      this.#ringHead = (this.#ringHead + 1) % cap;
    } else {
      this.#ring[idx] = item;
      this.#ringCount++;
    }
  }

  #appendLog(offset: number, kind: LogKind, json: string): void {
    if (!this.#log) return;
    this.#log.append(offset, this.#clock.now(), kind, json);
  }

  /** Log, remember for replay, and push one serialised message to every matching subscriber. */
  #broadcast(kind: 'state' | 'event', path: string, offset: number, json: string): void {
    this.#appendLog(offset, kind, json);
    this.#ringPush({ offset, kind, path, json });
    const subs = this.#trie.match(path, this.#scratch);
    let n = 0;
    for (const sub of subs) {
      if (sub.filter !== 'all' && (sub.filter === 'state') !== (kind === 'state')) continue;
      const c = sub.conn;
      if (c.lastStamp === offset || !c.open) continue;
      c.lastStamp = offset;
      c.queue.push(kind, json, path);
      n++;
    }
    subs.clear();
    if (n > 0) this.#metrics.messagesSent(kind, 'app', n);
  }

  #stateJson(entry: StateEntry, source: string, deleted: boolean, correlationId: string | undefined): string {
    const payload = deleted
      ? `{"value":null,"owner":${JSON.stringify(entry.owner)},"version":${entry.version}}`
      : `{"value":${entry.valueJson},"owner":${JSON.stringify(entry.owner)},"version":${entry.version}${
          entry.stale ? ',"stale":true' : ''
        }}`;
    return (
      `{"id":"${this.#ids.next()}","type":"state","source":${JSON.stringify(source)},` +
      `"path":${JSON.stringify(entry.path)},"payload":${payload},"timestamp":${this.#clock.now()},` +
      (correlationId === undefined ? '' : `"correlationId":${JSON.stringify(correlationId)},`) +
      `"sequence":${this.#seq(source)},"offset":${entry.offset}}`
    );
  }

  /**
   * Write a value as `writer`. Refused unless the writer owns the path; no delta for an unchanged value.
   * Returns the outcome so callers can ack.
   */
  writeState(
    writer: string,
    path: string,
    value: unknown,
    correlationId?: string,
  ):
    | { kind: 'changed'; version: number; offset: number }
    | { kind: 'unchanged' }
    | { kind: 'conflict'; owner: string | undefined } {
    const valueJson = JSON.stringify(value ?? null);
    const check = this.store.check(path, writer, valueJson);
    if (check.kind === 'conflict') return check;
    if (check.kind === 'unchanged') return { kind: 'unchanged' };
    const offset = ++this.#offset;
    const now = this.#clock.now();
    const entry = this.store.apply(path, writer, value ?? null, valueJson, offset, now);
    this.#metrics.stateUpdate(labelOf(path));
    this.#broadcast('state', path, offset, this.#stateJson(entry, writer, check.deleted, correlationId));
    return { kind: 'changed', version: entry.version, offset };
  }

  publishEvent(source: string, path: string, event: string, data: unknown, correlationId?: string): number {
    const offset = ++this.#offset;
    const payload = data === undefined ? { event } : { event, data };
    const json = JSON.stringify({
      id: this.#ids.next(),
      type: 'event',
      source,
      path,
      payload,
      timestamp: this.#clock.now(),
      ...(correlationId === undefined ? {} : { correlationId }),
      sequence: this.#seq(source),
      offset,
    });
    this.#broadcast('event', path, offset, json);
    return offset;
  }

  #markOwnerStale(owner: string, stale: boolean): void {
    for (const path of [...this.store.pathsOf(owner)]) {
      const offset = this.#offset + 1;
      const e = this.store.setStale(path, stale, offset, this.#clock.now());
      if (!e) continue;
      this.#offset = offset;
      this.#broadcast('state', path, offset, this.#stateJson(e, HUB_NAMESPACE, false, undefined));
    }
  }

  // ---------------------------------------------------------------------------------------------- clients

  /** Register a client after a successful handshake; picks `app.<name>` or `app.<name>_N` (reference §1.6). */
  openClient(sink: OutboundSink, name: string): { connId: number; namespace: string; sessionId: string } {
    const connId = this.#nextConnId++;
    let namespace = `app.${name}`;
    for (let i = 2; this.#liveNamespaces.has(namespace); i++) namespace = `app.${name}_${i}`;
    const now = this.#clock.monotonicMs();
    const conn: ClientConn = {
      connId,
      namespace,
      sessionId: this.#ids.next(),
      subs: new Map(),
      patternCount: 0,
      windowStart: now,
      windowCount: 0,
      lastStamp: -1,
      replayed: new Set(),
      open: true,
      queue: new OutboundQueue(
        sink,
        this.#limits.outbound,
        this.#clock,
        (dropped) => this.#hubEventJson('messages_coalesced', { dropped }, undefined),
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
    this.#clients.set(connId, conn);
    this.#liveNamespaces.set(namespace, connId);
    this.store.claim(`${namespace}.custom`, namespace);
    // A returning owner: its keys stop being stale (reference §1.6 duplicate-name decision).
    this.#markOwnerStale(namespace, false);
    return { connId, namespace, sessionId: conn.sessionId };
  }

  closeClient(connId: number): void {
    const conn = this.#clients.get(connId);
    if (!conn) return;
    conn.open = false;
    conn.queue.close();
    for (const sub of conn.subs.values()) for (const p of sub.patterns) this.#trie.remove(p, sub);
    conn.subs.clear();
    this.#clients.delete(connId);
    if (this.#liveNamespaces.get(conn.namespace) === connId) this.#liveNamespaces.delete(conn.namespace);
    for (const inf of this.#inflight.values()) inf.waiters.delete(connId);
    // Last will: the client's keys become stale, one delta each (reference §4.1).
    this.#markOwnerStale(conn.namespace, true);
    // A namespace that left nothing behind is forgotten, so clients choosing ever-new names cannot grow the
    // ownership table or the sequence counters without bound.
    if (this.store.pathsOf(conn.namespace).size === 0) {
      this.store.unclaim(`${conn.namespace}.custom`);
      this.#sequences.delete(conn.namespace);
    }
  }

  /** Flush a client's queue (the transport calls this when its socket drains). */
  flushClient(connId: number): void {
    this.#clients.get(connId)?.queue.flush();
  }

  #sendTo(conn: ClientConn, kind: 'control' | 'state' | 'event', json: string, path?: string): void {
    if (!conn.open) return;
    conn.queue.push(kind, json, path);
  }

  #sendError(
    conn: ClientConn,
    code: BridgeErrorCode,
    message: string,
    related: { id?: string; path?: string; correlationId?: string | undefined; type?: string },
  ): void {
    this.#metrics.messageError(related.type ?? 'unknown', code);
    const json = JSON.stringify({
      id: this.#ids.next(),
      type: 'error',
      source: HUB_NAMESPACE,
      target: conn.namespace,
      path: related.path ?? HUB_NAMESPACE,
      payload: { code, message, ...(related.id === undefined ? {} : { relatedMessageId: related.id }) },
      timestamp: this.#clock.now(),
      ...(related.correlationId === undefined ? {} : { correlationId: related.correlationId }),
      sequence: this.#seq(HUB_NAMESPACE),
    });
    this.#sendTo(conn, 'control', json);
  }

  /** A non-envelope transport error (PARSE_ERROR), reference §1.4 last paragraph. */
  transportError(code: BridgeErrorCode, message: string): string {
    return JSON.stringify({ type: 'error', code, message, timestamp: this.#clock.now() });
  }

  #ackJson(
    source: string,
    conn: { namespace: string },
    path: string,
    commandId: string,
    status: AckStatus,
    correlationId: string,
    extra: { result?: unknown; error?: ErrorInfo },
  ): { json: string; offset: number } {
    const offset = ++this.#offset;
    const json = JSON.stringify({
      id: this.#ids.next(),
      type: 'ack',
      source,
      target: conn.namespace,
      path,
      payload: { status, commandId, ...extra },
      timestamp: this.#clock.now(),
      correlationId,
      sequence: this.#seq(source),
      offset,
    });
    this.#appendLog(offset, 'ack', json);
    return { json, offset };
  }

  /** Handle one text frame from a client that completed its handshake. Never throws for bad input. */
  receive(connId: number, text: string): void {
    const conn = this.#clients.get(connId);
    if (!conn?.open) return;
    // Fixed-window rate limit; over it the client is told, never silently dropped (reference R10).
    const now = this.#clock.monotonicMs();
    if (now - conn.windowStart >= this.#limits.rateLimitWindowMs) {
      conn.windowStart = now;
      conn.windowCount = 0;
    }
    if (++conn.windowCount > this.#limits.rateLimit) {
      this.#metrics.rateLimited(labelOf(conn.namespace));
      // The id is picked out without parsing the frame (that is the work being limited), so the client can
      // fail the right request at once.
      const id = RELATED_ID_RE.exec(text.slice(0, 512))?.[1];
      this.#sendError(
        conn,
        'RATE_LIMITED',
        `more than ${this.#limits.rateLimit} messages in ${this.#limits.rateLimitWindowMs} ms`,
        { type: 'rate_limit', ...(id === undefined ? {} : { id }) },
      );
      return;
    }
    const parsed = parseClientFrame(text);
    if (!parsed.ok) {
      this.#metrics.messageReceived('invalid', labelOf(conn.namespace));
      if (parsed.code === 'PARSE_ERROR') {
        this.#metrics.messageError('unknown', 'PARSE_ERROR');
        this.#sendTo(conn, 'control', this.transportError('PARSE_ERROR', parsed.message));
      } else {
        this.#sendError(conn, 'INVALID_MESSAGE', parsed.message, {
          type: 'invalid',
          ...(parsed.relatedMessageId === undefined ? {} : { id: parsed.relatedMessageId }),
        });
      }
      return;
    }
    const v = parsed.value;
    if (v.kind === 'handshake') {
      this.#sendError(conn, 'INVALID_MESSAGE', 'handshake already completed', { type: 'handshake' });
      return;
    }
    if (v.kind === 'heartbeat') {
      this.#metrics.messageReceived(v.frame.type, labelOf(conn.namespace));
      if (v.frame.type === 'ping') {
        this.#sendTo(conn, 'control', JSON.stringify({ type: 'pong', timestamp: this.#clock.now() }));
      }
      return;
    }
    this.#metrics.messageReceived(v.frame.type, labelOf(conn.namespace));
    this.#dispatch(conn, v.frame);
  }

  #dispatch(conn: ClientConn, msg: ClientEnvelope): void {
    switch (msg.type) {
      case 'subscribe':
        this.#subscribe(conn, msg);
        return;
      case 'unsubscribe':
        this.#unsubscribe(conn, msg);
        return;
      case 'command':
        this.#command(conn, msg);
        return;
      case 'state':
        this.#clientState(conn, msg);
        return;
      case 'event':
        this.#clientEvent(conn, msg);
        return;
    }
  }

  #completedAck(conn: ClientConn, msg: ClientEnvelope, result: unknown): void {
    const ack = this.#ackJson(
      HUB_NAMESPACE,
      conn,
      msg.path,
      msg.id,
      'completed',
      msg.correlationId ?? msg.id,
      {
        result,
      },
    );
    this.#sendTo(conn, 'control', ack.json);
  }

  #clientState(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'state' }>): void {
    const out = this.writeState(conn.namespace, msg.path, msg.payload.value, msg.correlationId ?? msg.id);
    if (out.kind === 'conflict') {
      const code = out.owner === undefined ? 'FORBIDDEN' : 'STATE_CONFLICT';
      this.#sendError(
        conn,
        code,
        out.owner === undefined
          ? `${msg.path} is outside ${conn.namespace}.custom`
          : `${msg.path} is owned by ${out.owner}`,
        { id: msg.id, path: msg.path, correlationId: msg.correlationId, type: 'state' },
      );
      return;
    }
    this.#completedAck(
      conn,
      msg,
      out.kind === 'changed' ? { version: out.version, offset: out.offset } : { unchanged: true },
    );
  }

  #clientEvent(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'event' }>): void {
    if (!msg.path.startsWith(conn.namespace + '.')) {
      this.#sendError(conn, 'FORBIDDEN', `events must be published under ${conn.namespace}.`, {
        id: msg.id,
        path: msg.path,
        correlationId: msg.correlationId,
        type: 'event',
      });
      return;
    }
    const offset = this.publishEvent(
      conn.namespace,
      msg.path,
      msg.payload.event,
      msg.payload.data,
      msg.correlationId ?? msg.id,
    );
    this.#completedAck(conn, msg, { offset });
  }

  // ---------------------------------------------------------------------------------------------- subscribe

  #subscribe(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'subscribe' }>): void {
    const p = msg.payload;
    const fresh = p.patterns.filter((x, i) => p.patterns.indexOf(x) === i);
    if (conn.patternCount + fresh.length > this.#limits.maxPatternsPerClient) {
      this.#sendError(
        conn,
        'SUBSCRIPTION_FAILED',
        `at most ${this.#limits.maxPatternsPerClient} patterns per client`,
        {
          id: msg.id,
          path: msg.path,
          correlationId: msg.correlationId,
          type: 'subscribe',
        },
      );
      return;
    }
    const id = this.#ids.next();
    const sub: Subscription = { id, conn, patterns: new Set(fresh), filter: p.filter ?? 'all' };
    const correlationId = msg.correlationId ?? msg.id;
    this.#completedAck(conn, msg, { subscriptionId: id, offset: this.#offset, epoch: this.epoch });
    const wantsState = sub.filter !== 'events';
    const matches = (path: string): boolean => {
      for (const pat of sub.patterns) if (patternMatches(pat, path)) return true;
      return false;
    };
    // Everything below runs synchronously, so no delta can slip between the snapshot (or replay) and the
    // registration in the trie (reference §4.1 "No delta for a key may precede its snapshot entry").
    let replayed: number | undefined;
    if (p.since) {
      const s = p.since;
      if (s.epoch === this.epoch && s.offset >= this.#ringFloor && s.offset <= this.#offset) {
        replayed = 0;
        for (let i = 0; i < this.#ringCount; i++) {
          const item = this.#ring[(this.#ringHead + i) % this.#ring.length];
          if (!item || item.offset <= s.offset) continue;
          if (sub.filter !== 'all' && (sub.filter === 'state') !== (item.kind === 'state')) continue;
          if (!matches(item.path) || conn.replayed.has(item.offset)) continue;
          // Bounded by the ring: older offsets can never be replayed again anyway.
          if (conn.replayed.size >= this.#ring.length) conn.replayed.clear();
          conn.replayed.add(item.offset);
          this.#sendTo(conn, item.kind, item.json, item.kind === 'state' ? item.path : undefined);
          replayed++;
        }
      } else {
        this.#sendTo(
          conn,
          'event',
          this.#hubEventJson(
            'recovery_failed',
            {
              subscriptionId: id,
              reason: s.epoch !== this.epoch ? 'epoch changed' : 'offset no longer available',
              epoch: this.epoch,
              offset: this.#offset,
            },
            correlationId,
          ),
        );
      }
    }
    if (replayed === undefined && (p.snapshot === true || p.since !== undefined) && wantsState) {
      for (const e of this.store.entries()) {
        if (!matches(e.path)) continue;
        // Kind 'state': a newer delta for the same path supersedes a queued snapshot entry, and a big snapshot
        // to a client that is momentarily behind coalesces instead of counting against the event bound.
        this.#sendTo(conn, 'state', this.#stateJson(e, HUB_NAMESPACE, false, correlationId), e.path);
      }
    }
    if (p.snapshot === true || p.since !== undefined) {
      this.#sendTo(
        conn,
        'event',
        this.#hubEventJson(
          'snapshot_complete',
          replayed === undefined ? { subscriptionId: id } : { subscriptionId: id, replayed },
          correlationId,
        ),
      );
    }
    conn.subs.set(id, sub);
    conn.patternCount += sub.patterns.size;
    for (const pat of sub.patterns) this.#trie.add(pat, sub);
  }

  /** A hub event on `hub.subscriptions`; `correlationId` undefined leaves the key out (JSON.stringify drops it). */
  #hubEventJson(event: string, data: unknown, correlationId: string | undefined): string {
    return JSON.stringify({
      id: this.#ids.next(),
      type: 'event',
      source: HUB_NAMESPACE,
      path: SUBSCRIPTIONS_PATH,
      payload: { event, data },
      timestamp: this.#clock.now(),
      correlationId,
      sequence: this.#seq(HUB_NAMESPACE),
    });
  }

  #unsubscribe(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'unsubscribe' }>): void {
    // Decision (reference §1.5): remove exactly the listed patterns; drop subscriptions left empty.
    let removedCount = 0;
    for (const pat of new Set(msg.payload.patterns)) {
      for (const [id, sub] of conn.subs) {
        if (!sub.patterns.delete(pat)) continue;
        this.#trie.remove(pat, sub);
        conn.patternCount--;
        removedCount++;
        if (sub.patterns.size === 0) conn.subs.delete(id);
      }
    }
    this.#completedAck(conn, msg, { removedCount });
  }

  // ---------------------------------------------------------------------------------------------- commands

  #sweepIdempotency(nowMono: number): void {
    if (nowMono - this.#lastIdemSweep < 10_000) return;
    this.#lastIdemSweep = nowMono;
    for (const [k, e] of this.#idem) {
      if (!e.inflight && nowMono - e.at > 2 * this.#limits.idempotencyWindowMs) this.#idem.delete(k);
    }
  }

  #command(conn: ClientConn, msg: ClientCommand): void {
    const correlationId = msg.correlationId ?? msg.id;
    const adapter = this.#targets.get(msg.target);
    if (!adapter) {
      this.#sendError(conn, 'UNKNOWN_TARGET', `no adapter answers to "${msg.target}"`, {
        id: msg.id,
        path: msg.path,
        correlationId,
        type: 'command',
      });
      return;
    }
    const nowMono = this.#clock.monotonicMs();
    this.#sweepIdempotency(nowMono);
    const idemKey =
      msg.idempotencyKey === undefined ? undefined : `${conn.namespace}\u0000${msg.idempotencyKey}`;
    if (idemKey !== undefined) {
      const cached = this.#idem.get(idemKey);
      if (cached && nowMono - cached.at <= this.#limits.idempotencyWindowMs) {
        // Replay, never execute twice (reference §1.3 last row, R7).
        this.#sendTo(conn, 'control', cached.receivedJson);
        if (cached.finalJson !== undefined) this.#sendTo(conn, 'control', cached.finalJson);
        else cached.inflight?.waiters.add(conn.connId);
        return;
      }
    }
    const logged = { ...msg, source: conn.namespace, sequence: this.#seq(conn.namespace) };
    this.#appendLog(++this.#offset, 'command', JSON.stringify(logged));
    const received = this.#ackJson(HUB_NAMESPACE, conn, msg.path, msg.id, 'received', correlationId, {});
    this.#sendTo(conn, 'control', received.json);
    const inf: InFlight = {
      commandId: msg.id,
      action: msg.payload.action,
      adapter,
      waiters: new Set([conn.connId]),
      startedMono: nowMono,
      abort: new AbortController(),
      timer: undefined,
      done: false,
      idemKey,
    };
    if (idemKey !== undefined) {
      // Delete first so the map's insertion order stays oldest-first for the cap below.
      this.#idem.delete(idemKey);
      if (this.#idem.size >= MAX_IDEMPOTENCY_KEYS) {
        this.#idem.delete(this.#idem.keys().next().value as string);
      }
      this.#idem.set(idemKey, {
        at: nowMono,
        receivedJson: received.json,
        finalJson: undefined,
        inflight: inf,
      });
    }
    const nowWall = this.#clock.now();
    // TTL in ms from the command's own timestamp (reference §1.3); without ttl the default timeout applies.
    const deadline =
      msg.ttl !== undefined ? msg.timestamp + msg.ttl : nowWall + this.#limits.defaultCommandTimeoutMs;
    const remaining = Math.min(deadline - nowWall, msg.ttl ?? this.#limits.defaultCommandTimeoutMs);
    if (remaining <= 0) {
      this.#finish(inf, conn.namespace, msg, 'timeout', {
        error: { code: 'TIMEOUT', message: 'ttl elapsed before dispatch' },
      });
      return;
    }
    this.#inflight.set(msg.id + '\u0000' + conn.namespace, inf);
    inf.timer = this.#clock.setTimer(remaining, () => {
      this.#finish(inf, conn.namespace, msg, 'timeout', {
        error: { code: 'TIMEOUT', message: `no result within ${remaining} ms` },
      });
    });
    const cmd: AdapterCommand = {
      id: msg.id,
      source: conn.namespace,
      path: msg.path,
      action: msg.payload.action,
      params: msg.payload.params ?? {},
      correlationId,
      deadline,
    };
    let result: Promise<AdapterResult>;
    try {
      result = adapter.execute(cmd, inf.abort.signal);
    } catch (err) {
      result = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    result.then(
      (r) => {
        if (r.status === 'completed') {
          this.#finish(
            inf,
            conn.namespace,
            msg,
            'completed',
            r.result === undefined ? {} : { result: r.result },
          );
        } else {
          this.#finish(inf, conn.namespace, msg, r.status, { error: r.error });
        }
      },
      (err: unknown) => {
        this.#finish(inf, conn.namespace, msg, 'failed', {
          error: { code: 'ADAPTER_ERROR', message: err instanceof Error ? err.message : String(err) },
        });
      },
    );
  }

  #finish(
    inf: InFlight,
    namespace: string,
    msg: ClientCommand,
    status: AckStatus,
    extra: { result?: unknown; error?: ErrorInfo },
  ): void {
    if (inf.done) return;
    inf.done = true;
    inf.timer?.cancel();
    if (status === 'timeout') inf.abort.abort(new Error('command timed out'));
    this.#inflight.delete(msg.id + '\u0000' + namespace);
    const source = status === 'timeout' ? HUB_NAMESPACE : inf.adapter.name;
    const ack = this.#ackJson(
      source,
      { namespace },
      msg.path,
      msg.id,
      status,
      msg.correlationId ?? msg.id,
      extra,
    );
    const seconds = (this.#clock.monotonicMs() - inf.startedMono) / 1000;
    this.#metrics.commandFinished(inf.action, status, seconds);
    // Spec log record: correlationId on every line a command causes.
    this.#logger[status === 'completed' ? 'info' : 'warn'](
      {
        correlationId: msg.correlationId ?? msg.id,
        commandId: msg.id,
        source: namespace,
        target: inf.adapter.name,
        action: inf.action,
        status,
        durationMs: Math.round(seconds * 1e6) / 1e3,
        ...(extra.error ? { error: extra.error } : {}),
      },
      'command finished',
    );
    if (inf.idemKey !== undefined) {
      const e = this.#idem.get(inf.idemKey);
      // Only this command's entry: after its window the same key may already name a newer command.
      if (e?.inflight === inf) {
        e.finalJson = ack.json;
        e.inflight = undefined;
      }
    }
    for (const id of inf.waiters) {
      const c = this.#clients.get(id);
      if (c) this.#sendTo(c, 'control', ack.json);
    }
  }

  // ---------------------------------------------------------------------------------------------- stats

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
    offset: number;
  } {
    let subscriptions = 0;
    let queuedMessages = 0;
    let queuedBytes = 0;
    let coalescingClients = 0;
    for (const c of this.#clients.values()) {
      subscriptions += c.subs.size;
      queuedMessages += c.queue.queuedMessages;
      queuedBytes += c.queue.queuedBytes;
      if (c.queue.coalescing) coalescingClients++;
    }
    return {
      clients: this.#clients.size,
      subscriptions,
      patterns: this.#trie.size,
      stateEntries: this.store.size,
      inflightCommands: this.#inflight.size,
      queuedMessages,
      queuedBytes,
      coalescingClients,
      slowDisconnects: this.#slowDisconnects,
      ringSize: this.#ringCount,
      offset: this.#offset,
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
    const id = this.#liveNamespaces.get(namespace);
    const c = id === undefined ? undefined : this.#clients.get(id);
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

  /** Fail every command still in flight (shutdown). */
  abortAll(): void {
    for (const inf of [...this.#inflight.values()]) {
      inf.timer?.cancel();
      inf.abort.abort(new Error('hub shutting down'));
    }
    this.#inflight.clear();
  }
}
