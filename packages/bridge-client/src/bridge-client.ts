/**
 * Typed client for the bridge's client WebSocket: handshake, subscriptions, commands with their acks,
 * custom state and events, and automatic reconnect.
 *
 * Resume never lies: each subscription's resume position comes only from what this client received and
 * handed to its listeners: the offset in `snapshot_complete`, then the offset of every later message on the
 * same connection. After a reconnect it re-subscribes with `since: {offset, epoch}` in batches of at most
 * 100 patterns, one batch at a time, retrying on RATE_LIMITED; the hub replays what was missed or says
 * `recovery_failed` and sends a fresh snapshot. A subscription whose first snapshot was cut off is reported
 * with `recoveryFailed` too, and a pattern that cannot be restored is reported with `subscriptionLost`.
 * A listener that throws is reported with `listenerError` and never stops the connection.
 *
 *   const client = new BridgeClient({ url: 'ws://127.0.0.1:8765/', name: 'graphics' });
 *   client.on('state', (m) => console.log(m.path, m.payload.value));
 *   await client.connect();
 *   await client.subscribe(['companion.variables.**'], { snapshot: true });
 *   const ack = await client.command('companion', 'companion.page.1.bank.1', 'press').done;
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import WebSocket from 'ws';
import {
  CloseCode,
  CLIENT_ID_RE,
  MAX_PATTERNS,
  type AckPayload,
  type Envelope,
  type ErrorPayload,
  type EventPayload,
  type HandshakeResponse,
  type StatePayload,
  type TransportError,
} from '@broadcast-ops/telemetry-bridge/protocol';

export type StateMessage = Envelope<StatePayload>;
export type EventMessage = Envelope<EventPayload>;
export type AckMessage = Envelope<AckPayload>;
export type ErrorMessage = Envelope<ErrorPayload>;

export type TransportErrorMessage = TransportError;

export interface ClientEvents {
  connected: (info: { namespace: string; sessionId: string; reconnect: boolean }) => void;
  disconnected: (info: { code: number; reason: string; willReconnect: boolean }) => void;
  state: (m: StateMessage) => void;
  event: (m: EventMessage) => void;
  ack: (m: AckMessage) => void;
  error: (m: ErrorMessage | TransportErrorMessage) => void;
  /** The hub coalesced deltas for this client (it was reading too slowly); `dropped` superseded deltas. */
  gap: (info: { dropped: number }) => void;
  /** A resume could not replay (or a first snapshot was cut off); a fresh snapshot follows. */
  recoveryFailed: (info: { subscriptionId: string; reason: string }) => void;
  snapshotComplete: (info: { subscriptionId: string; replayed?: number; offset?: number }) => void;
  /** Patterns that could not be restored after a reconnect (refused, or still rate limited after retries). */
  subscriptionLost: (info: { patterns: string[]; code: string; message: string }) => void;
  /** A listener threw; the client carries on. */
  listenerError: (info: { event: string; error: unknown }) => void;
}

export interface BridgeClientOptions {
  url: string;
  name: string;
  version?: string;
  authToken?: string;
  /** Send the token as `Authorization: Bearer` on the upgrade instead of in the handshake. */
  authInHeader?: boolean;
  reconnect?: { enabled?: boolean; initialDelayMs?: number; maxDelayMs?: number; maxAttempts?: number };
  /** App-level ping interval, keeps the connection clear of the hub's idle timeout. */
  heartbeatIntervalMs?: number;
  /** Reject a request (subscribe, setState, ...) without an answer after this long. */
  requestTimeoutMs?: number;
  /**
   * This client's stable id (8-128 of A-Z a-z 0-9 _ -), sent in every handshake: the bridge keeps this
   * client's idempotency keys under it (docs/protocol.md "Exactly once"). Default: read from
   * `clientIdFile`, or created there on first use; without either, one random id per BridgeClient object.
   */
  clientId?: string;
  /** File that keeps the generated client id across restarts of this program (created with mode 0600). */
  clientIdFile?: string;
}

/**
 * The id in `file`, or a new random one written there (its directory is created). A file that holds no
 * valid id is an error, never silently replaced: another id would make earlier keys someone else's.
 */
export function persistentClientId(file: string): string {
  try {
    const text = readFileSync(file, 'utf8').trim();
    if (!CLIENT_ID_RE.test(text))
      throw new BridgeError('INVALID_CLIENT_ID', `${file} does not hold a client id`);
    return text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dirname(file), { recursive: true });
  const id = randomBytes(16).toString('base64url');
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${id}\n`, { mode: 0o600 });
  renameSync(tmp, file);
  return id;
}

export interface CommandOptions {
  ttl?: number;
  idempotencyKey?: string;
  correlationId?: string;
  timestamp?: number;
}

export interface CommandHandle {
  id: string;
  /** Every ack so far, in arrival order. */
  acks: AckMessage[];
  /** The final ack (completed, failed, rejected or timeout); rejects on an `error` message or disconnect. */
  done: Promise<AckMessage>;
}

export class BridgeError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.name = 'BridgeError';
    this.code = code;
  }
}

interface Waiter {
  resolve: (m: AckMessage) => void;
  reject: (e: Error) => void;
  onAck: ((m: AckMessage) => void) | undefined;
}

interface Pending {
  waiters: Waiter[];
  /** Wait for the final ack (commands), not the first. */
  final: boolean;
  timer: NodeJS.Timeout | undefined;
}

interface SubscriptionSpec {
  patterns: string[];
  filter: 'state' | 'events' | 'all';
  snapshot: boolean;
  subscriptionId: string | undefined;
  /** Where this subscription is known complete: everything up to `offset` of `epoch` was received. */
  position: { epoch: string; offset: number } | undefined;
  /** Complete on the current connection: later messages on it advance the position. */
  live: boolean;
  /** Id of a subscribe sent on an earlier connection that never completed (its snapshot was cut off). */
  interrupted: string | undefined;
}

/** Retries of one resubscribe batch refused with RATE_LIMITED, with doubling delays from 100 ms. */
const RESUBSCRIBE_RETRIES = 8;

type Listeners = { [K in keyof ClientEvents]: Set<ClientEvents[K]> };

let counter = 0;

export class BridgeClient {
  readonly #opts: BridgeClientOptions;
  #ws: WebSocket | undefined;
  #namespace: string | undefined;
  #sessionId: string | undefined;
  #epoch: string | undefined;
  #lastOffset = -1;
  /** Highest offset received (and handed to listeners) on the current connection. */
  #connMax = -1;
  #resumeToken: string | undefined;
  readonly #bySubId = new Map<string, SubscriptionSpec[]>();
  #closedByUser = false;
  #everConnected = false;
  #attempts = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  readonly #pending = new Map<string, Pending>();
  readonly #subs: SubscriptionSpec[] = [];
  readonly #listeners: Listeners = {
    connected: new Set(),
    disconnected: new Set(),
    state: new Set(),
    event: new Set(),
    ack: new Set(),
    error: new Set(),
    gap: new Set(),
    recoveryFailed: new Set(),
    snapshotComplete: new Set(),
    subscriptionLost: new Set(),
    listenerError: new Set(),
  };
  #sequence = 0;
  /** Idempotency key → the first attempt's command id and timestamp, reused by every repeat. */
  readonly #idemIds = new Map<string, { id: string; timestamp: number }>();
  #connecting: Promise<void> | undefined;
  readonly #clientId: string;

  constructor(options: BridgeClientOptions) {
    this.#opts = options;
    const id =
      options.clientId ??
      (options.clientIdFile === undefined
        ? randomBytes(16).toString('base64url')
        : persistentClientId(options.clientIdFile));
    if (!CLIENT_ID_RE.test(id))
      throw new BridgeError('INVALID_CLIENT_ID', 'clientId: 8-128 of A-Z a-z 0-9 _ -');
    this.#clientId = id;
  }

  /** The stable id this client sends in its handshakes (the scope of its idempotency keys). */
  get clientId(): string {
    return this.#clientId;
  }

  get namespace(): string | undefined {
    return this.#namespace;
  }
  get sessionId(): string | undefined {
    return this.#sessionId;
  }
  get epoch(): string | undefined {
    return this.#epoch;
  }
  /** Highest hub offset this client has seen (replayed after a reconnect). */
  get lastOffset(): number {
    return this.#lastOffset;
  }
  get connected(): boolean {
    return this.#ws?.readyState === WebSocket.OPEN && this.#namespace !== undefined;
  }
  /** The underlying socket (tests use it to stop reading). */
  get socket(): WebSocket | undefined {
    return this.#ws;
  }

  on<K extends keyof ClientEvents>(event: K, fn: ClientEvents[K]): () => void {
    (this.#listeners[event] as Set<ClientEvents[K]>).add(fn);
    return () => (this.#listeners[event] as Set<ClientEvents[K]>).delete(fn);
  }

  #emit<K extends keyof ClientEvents>(event: K, ...args: Parameters<ClientEvents[K]>): void {
    for (const fn of this.#listeners[event]) {
      try {
        (fn as (...a: Parameters<ClientEvents[K]>) => void)(...args);
      } catch (error) {
        this.#listenerFailed(event, error);
      }
    }
  }

  #listenerFailed(event: string, error: unknown): void {
    if (event === 'listenerError' || this.#listeners.listenerError.size === 0) {
      process.emitWarning(
        `BridgeClient: a "${event}" listener threw: ${error instanceof Error ? error.message : String(error)}`,
        'BridgeClientListenerError',
      );
      return;
    }
    this.#emit('listenerError', { event, error });
  }

  /** Resume positions of the subscriptions (what a reconnect would send as `since`). */
  positions(): { patterns: string[]; position: { epoch: string; offset: number } | undefined }[] {
    return this.#subs.map((s) => ({ patterns: [...s.patterns], position: this.#positionOf(s) }));
  }

  #positionOf(s: SubscriptionSpec): { epoch: string; offset: number } | undefined {
    if (!s.position) return undefined;
    return s.live
      ? { epoch: s.position.epoch, offset: Math.max(s.position.offset, this.#connMax) }
      : s.position;
  }

  /** Connect and complete the handshake; rejects if the hub refuses (bad token, invalid name). */
  connect(): Promise<void> {
    this.#closedByUser = false;
    this.#connecting ??= this.#open(false).finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  #open(reconnect: boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const headers: Record<string, string> = {};
      if (this.#opts.authToken !== undefined && this.#opts.authInHeader) {
        headers['authorization'] = `Bearer ${this.#opts.authToken}`;
      }
      const ws = new WebSocket(this.#opts.url, {
        perMessageDeflate: false,
        headers,
        maxPayload: 64 * 1024 * 1024,
      });
      this.#ws = ws;
      let settled = false;
      ws.on('open', () => {
        ws.send(
          JSON.stringify({
            type: 'handshake',
            name: this.#opts.name,
            version: this.#opts.version ?? '1.0.0',
            ...(this.#opts.authToken !== undefined && !this.#opts.authInHeader
              ? { authToken: this.#opts.authToken }
              : {}),
            ...(this.#resumeToken === undefined ? {} : { resumeToken: this.#resumeToken }),
            clientId: this.#clientId,
          }),
        );
      });
      ws.on('message', (data: Buffer) => {
        if (this.#ws !== ws) return;
        let msg: Record<string, unknown>;
        try {
          msg = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
        } catch {
          return;
        }
        if (msg['type'] === 'handshake_response') {
          const r = msg as unknown as HandshakeResponse;
          settled = true;
          if (!r.success || r.namespace === undefined) {
            reject(new BridgeError('UNAUTHORIZED', r.error ?? 'handshake refused'));
            return;
          }
          this.#namespace = r.namespace;
          this.#sessionId = r.sessionId;
          this.#resumeToken = r.resumeToken ?? this.#resumeToken;
          this.#everConnected = true;
          this.#attempts = 0;
          this.#connMax = -1;
          this.#startHeartbeat();
          this.#emit('connected', { namespace: r.namespace, sessionId: r.sessionId ?? '', reconnect });
          void this.#resubscribe(ws);
          resolve();
          return;
        }
        try {
          this.#dispatch(msg);
        } catch (error) {
          // Never let one message wedge the connection.
          this.#listenerFailed(String(msg['type']), error);
        }
      });
      ws.on('error', (err) => {
        if (!settled) {
          settled = true;
          reject(err);
        }
      });
      ws.on('close', (code, reasonBuf) => {
        const reason = reasonBuf.toString();
        if (!settled) {
          settled = true;
          reject(new BridgeError('DISCONNECTED', `closed ${code} ${reason}`));
        }
        this.#onClose(ws, code, reason);
      });
    });
  }

  #onClose(ws: WebSocket, code: number, reason: string): void {
    if (this.#ws !== ws) return;
    this.#stopHeartbeat();
    this.#namespace = undefined;
    // Fix each subscription's position at what this connection delivered; unfinished ones stay where they were.
    for (const s of this.#subs) {
      if (s.live) s.position = this.#positionOf(s);
      else if (s.subscriptionId !== undefined) s.interrupted = s.subscriptionId;
      s.live = false;
      s.subscriptionId = undefined;
    }
    this.#bySubId.clear();
    for (const [id, p] of this.#pending) {
      if (p.timer) clearTimeout(p.timer);
      for (const w of p.waiters)
        w.reject(new BridgeError('DISCONNECTED', `connection closed (${code}) before an answer`));
      this.#pending.delete(id);
    }
    const r = this.#opts.reconnect ?? {};
    const maxAttempts = r.maxAttempts ?? 0;
    const willReconnect =
      !this.#closedByUser &&
      this.#everConnected &&
      (r.enabled ?? true) &&
      code !== CloseCode.AUTH_FAILED &&
      // Superseded: another connection proved this identity and holds the namespace now; reconnecting
      // would take it back and start a tug of war between two instances sharing a token.
      code !== CloseCode.DISCONNECTED &&
      (maxAttempts === 0 || this.#attempts < maxAttempts);
    this.#emit('disconnected', { code, reason, willReconnect });
    if (willReconnect) this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    const r = this.#opts.reconnect ?? {};
    const initial = r.initialDelayMs ?? 500;
    const delay =
      Math.min(r.maxDelayMs ?? 30_000, initial * 2 ** this.#attempts) * (0.8 + Math.random() * 0.4);
    this.#attempts++;
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (this.#closedByUser) return;
      this.#open(true).catch(() => {
        // #onClose has already scheduled the next attempt (or given up).
      });
    }, delay);
  }

  #startHeartbeat(): void {
    this.#stopHeartbeat();
    const every = this.#opts.heartbeatIntervalMs ?? 30_000;
    this.#heartbeat = setInterval(
      () => this.#raw(JSON.stringify({ type: 'ping', timestamp: Date.now() })),
      every,
    );
    this.#heartbeat.unref();
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }

  /**
   * Restore every subscription on a new connection: grouped by resume position, in batches of at most 100
   * patterns, one batch at a time; RATE_LIMITED is retried with doubling delays, anything else (or too many
   * retries) is reported with `subscriptionLost` and the patterns are dropped.
   */
  async #resubscribe(ws: WebSocket): Promise<void> {
    const groups = new Map<
      string,
      { since: { epoch: string; offset: number } | undefined; specs: SubscriptionSpec[] }
    >();
    for (const s of this.#subs) {
      const since = s.position;
      if (!since && s.interrupted !== undefined && s.snapshot) {
        this.#emit('recoveryFailed', {
          subscriptionId: s.interrupted,
          reason: 'snapshot interrupted; a new snapshot follows',
        });
      }
      s.interrupted = undefined;
      const key = `${s.filter}|${String(s.snapshot)}|${since ? `${since.epoch}:${since.offset}` : '-'}`;
      let g = groups.get(key);
      if (!g) groups.set(key, (g = { since, specs: [] }));
      g.specs.push(s);
    }
    for (const g of groups.values()) {
      let batch: SubscriptionSpec[] = [];
      let count = 0;
      const batches: SubscriptionSpec[][] = [];
      for (const s of g.specs) {
        if (count + s.patterns.length > MAX_PATTERNS && batch.length > 0) {
          batches.push(batch);
          batch = [];
          count = 0;
        }
        batch.push(s);
        count += s.patterns.length;
      }
      if (batch.length > 0) batches.push(batch);
      for (const b of batches) {
        if (this.#ws !== ws || !this.connected) return;
        await this.#restoreBatch(ws, b, g.since);
      }
    }
  }

  async #restoreBatch(
    ws: WebSocket,
    specs: SubscriptionSpec[],
    since: { epoch: string; offset: number } | undefined,
  ): Promise<void> {
    const first = specs[0] as SubscriptionSpec;
    const patterns = [...new Set(specs.flatMap((s) => s.patterns))];
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#sendSubscribe(specs, { patterns, filter: first.filter, snapshot: first.snapshot }, since);
        return;
      } catch (err) {
        if (this.#ws !== ws) return;
        const code = err instanceof BridgeError ? err.code : 'ERROR';
        if (code === 'DISCONNECTED') return;
        if (code === 'RATE_LIMITED' && attempt < RESUBSCRIBE_RETRIES) {
          await new Promise((r) => setTimeout(r, Math.min(3000, 100 * 2 ** attempt)));
          continue;
        }
        for (const s of specs) {
          const i = this.#subs.indexOf(s);
          if (i >= 0) this.#subs.splice(i, 1);
        }
        this.#emit('subscriptionLost', {
          patterns,
          code,
          message: err instanceof Error ? err.message : String(err),
        });
        return;
      }
    }
  }

  /** Send one subscribe for `specs`; they share the hub subscription id. */
  async #sendSubscribe(
    specs: SubscriptionSpec[],
    body: { patterns: string[]; filter: 'state' | 'events' | 'all'; snapshot: boolean },
    since: { offset: number; epoch: string } | undefined,
  ): Promise<string | undefined> {
    // The ack is handled synchronously on arrival: snapshot_complete may follow in the same socket read,
    // before an awaiting continuation would run.
    let id: string | undefined;
    await this.#request(
      'subscribe',
      'hub.subscriptions',
      { ...body, ...(since ? { since } : {}) },
      {},
      false,
      (ack) => {
        id = this.#subscribed(specs, ack, body.snapshot || since !== undefined);
      },
    );
    return id;
  }

  #subscribed(specs: SubscriptionSpec[], ack: AckMessage, streamed: boolean): string | undefined {
    if (ack.payload.status !== 'completed') return undefined;
    const r = (ack.payload.result ?? {}) as { subscriptionId?: string; offset?: number; epoch?: string };
    if (r.subscriptionId === undefined) return undefined;
    this.#bySubId.set(r.subscriptionId, specs);
    for (const s of specs) s.subscriptionId = r.subscriptionId;
    if (r.epoch !== undefined && r.epoch !== this.#epoch) {
      // Offsets of another epoch mean nothing here.
      this.#epoch = r.epoch;
      this.#lastOffset = -1;
    }
    // Every subscription already live on this connection is complete up to the offset this ack reports.
    if (typeof r.offset === 'number' && r.offset > this.#connMax) this.#connMax = r.offset;
    if (!streamed && typeof r.offset === 'number' && r.epoch !== undefined) {
      // No snapshot or replay follows: the subscription is live from the ack on, which arrived in order.
      for (const s of specs) {
        s.position = { epoch: r.epoch, offset: r.offset };
        s.live = true;
      }
    }
    return r.subscriptionId;
  }

  #snapshotDone(data: Record<string, unknown>): void {
    const id = String(data['subscriptionId']);
    const specs = this.#bySubId.get(id);
    const offset = data['offset'];
    const epoch = data['epoch'];
    if (!specs || typeof offset !== 'number' || typeof epoch !== 'string') return;
    for (const s of specs) {
      s.position = { epoch, offset };
      s.live = true;
    }
    if (offset > this.#connMax) this.#connMax = offset;
  }

  /**
   * The hub dropped a subscription after acknowledging it (its snapshot or replay failed): the error names it
   * in `details.subscriptionId`. Its patterns are forgotten (not restored on reconnect) and reported with
   * `subscriptionLost`, as for a subscription that cannot be restored.
   */
  #subscriptionDropped(payload: ErrorPayload | undefined): void {
    const details = payload?.details as { subscriptionId?: unknown } | undefined;
    const id = details?.subscriptionId;
    if (typeof id !== 'string') return;
    const specs = this.#bySubId.get(id);
    if (!specs) return;
    this.#bySubId.delete(id);
    for (const s of specs) {
      const i = this.#subs.indexOf(s);
      if (i >= 0) this.#subs.splice(i, 1);
    }
    this.#emit('subscriptionLost', {
      patterns: [...new Set(specs.flatMap((s) => s.patterns))],
      code: payload?.code ?? 'ERROR',
      message: payload?.message ?? '',
    });
  }

  #noteOffset(m: Record<string, unknown>): void {
    const o = m['offset'];
    if (typeof o !== 'number') return;
    if (o > this.#connMax) this.#connMax = o;
    if (o > this.#lastOffset) this.#lastOffset = o;
  }

  #dispatch(msg: Record<string, unknown>): void {
    switch (msg['type']) {
      case 'state':
        this.#emit('state', msg as unknown as StateMessage);
        // Applied: only now does it count towards the resume position.
        this.#noteOffset(msg);
        return;
      case 'event': {
        const m = msg as unknown as EventMessage;
        if (m.source === 'hub.core' && m.path === 'hub.subscriptions') {
          const data = (m.payload.data ?? {}) as Record<string, unknown>;
          if (m.payload.event === 'messages_coalesced')
            this.#emit('gap', { dropped: Number(data['dropped'] ?? 0) });
          if (m.payload.event === 'recovery_failed') {
            this.#emit('recoveryFailed', {
              subscriptionId: String(data['subscriptionId']),
              reason: String(data['reason']),
            });
          }
          if (m.payload.event === 'snapshot_complete') {
            this.#snapshotDone(data);
            this.#emit('snapshotComplete', {
              subscriptionId: String(data['subscriptionId']),
              ...(typeof data['replayed'] === 'number' ? { replayed: data['replayed'] } : {}),
              ...(typeof data['offset'] === 'number' ? { offset: data['offset'] } : {}),
            });
          }
        }
        this.#emit('event', m);
        this.#noteOffset(msg);
        return;
      }
      case 'ack': {
        const m = msg as unknown as AckMessage;
        const p = this.#pending.get(m.payload.commandId);
        if (p) {
          for (const w of p.waiters) w.onAck?.(m);
          if (m.payload.status !== 'received' || !p.final) {
            this.#pending.delete(m.payload.commandId);
            if (p.timer) clearTimeout(p.timer);
            for (const w of p.waiters) w.resolve(m);
          }
        }
        this.#emit('ack', m);
        return;
      }
      case 'error': {
        const payload = msg['payload'] as ErrorPayload | undefined;
        const related = payload?.relatedMessageId;
        if (related !== undefined) {
          const p = this.#pending.get(related);
          if (p) {
            this.#pending.delete(related);
            if (p.timer) clearTimeout(p.timer);
            for (const w of p.waiters)
              w.reject(new BridgeError(payload?.code ?? 'ERROR', payload?.message ?? ''));
          }
        }
        this.#subscriptionDropped(payload);
        this.#emit('error', msg as unknown as ErrorMessage | TransportErrorMessage);
        return;
      }
      default:
        return;
    }
  }

  #raw(text: string): boolean {
    const ws = this.#ws;
    if (ws?.readyState !== WebSocket.OPEN) return false;
    ws.send(text);
    return true;
  }

  /** Send any text frame (tests, fuzzing). */
  sendRaw(text: string): boolean {
    return this.#raw(text);
  }

  newId(): string {
    return `${this.#opts.name}-${process.pid}-${++counter}`;
  }

  #request(
    type: 'subscribe' | 'unsubscribe' | 'state' | 'event' | 'command',
    path: string,
    payload: unknown,
    extra: Record<string, unknown> = {},
    final = false,
    onAck?: (m: AckMessage) => void,
    id = this.newId(),
  ): Promise<AckMessage> {
    return new Promise<AckMessage>((resolve, reject) => {
      const msg = {
        id,
        type,
        source: this.#namespace ?? 'app.unknown',
        path,
        payload,
        timestamp: Date.now(),
        sequence: ++this.#sequence,
        ...extra,
      };
      const waiter: Waiter = { resolve, reject, onAck };
      const existing = this.#pending.get(id);
      if (existing) {
        // A retry of a command still in flight (same id and idempotency key): the hub replays its acks.
        existing.waiters.push(waiter);
        this.#raw(JSON.stringify(msg));
        return;
      }
      const timeoutMs = this.#opts.requestTimeoutMs ?? 60_000;
      const timer = setTimeout(() => {
        const p = this.#pending.get(id);
        this.#pending.delete(id);
        for (const w of p?.waiters ?? [])
          w.reject(new BridgeError('TIMEOUT', `no answer to ${type} ${id} within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.#pending.set(id, { waiters: [waiter], final, timer });
      if (!this.#raw(JSON.stringify(msg))) {
        this.#pending.delete(id);
        clearTimeout(timer);
        reject(new BridgeError('DISCONNECTED', 'not connected'));
      }
    });
  }

  /**
   * Subscribe; kept and re-sent after a reconnect. Resolves with the subscription id once the hub has
   * acknowledged (the snapshot and `snapshot_complete` follow on the same connection).
   */
  async subscribe(
    patterns: string[],
    options: { snapshot?: boolean; filter?: 'state' | 'events' | 'all' } = {},
  ): Promise<string> {
    const spec: SubscriptionSpec = {
      patterns,
      filter: options.filter ?? 'all',
      snapshot: options.snapshot ?? false,
      subscriptionId: undefined,
      position: undefined,
      live: false,
      interrupted: undefined,
    };
    // Kept from the start, so a drop before snapshot_complete is known as an interrupted snapshot.
    this.#subs.push(spec);
    try {
      const id = await this.#sendSubscribe(
        [spec],
        { patterns, filter: spec.filter, snapshot: spec.snapshot },
        undefined,
      );
      return id ?? '';
    } catch (err) {
      const i = this.#subs.indexOf(spec);
      if (i >= 0) this.#subs.splice(i, 1);
      throw err;
    }
  }

  async unsubscribe(patterns: string[]): Promise<number> {
    for (const s of this.#subs) s.patterns = s.patterns.filter((p) => !patterns.includes(p));
    for (let i = this.#subs.length - 1; i >= 0; i--)
      if (this.#subs[i]?.patterns.length === 0) this.#subs.splice(i, 1);
    const ack = await this.#request('unsubscribe', 'hub.subscriptions', { patterns });
    return (ack.payload.result as { removedCount?: number } | undefined)?.removedCount ?? 0;
  }

  /** Write `app.<name>.custom.<key>`; resolves with the hub's ack. `null` clears the key. */
  setState(key: string, value: unknown): Promise<AckMessage> {
    if (this.#namespace === undefined)
      return Promise.reject(new BridgeError('DISCONNECTED', 'not connected'));
    return this.setStatePath(`${this.#namespace}.custom.${key}`, value);
  }

  setStatePath(path: string, value: unknown): Promise<AckMessage> {
    return this.#request('state', path, { value });
  }

  publishEvent(path: string, event: string, data?: unknown): Promise<AckMessage> {
    return this.#request('event', path, data === undefined ? { event } : { event, data });
  }

  /** Send a command to an adapter. `acks` fills as acks arrive; `done` resolves with the final one. */
  command(
    target: string,
    path: string,
    action: string,
    params?: Record<string, unknown>,
    options: CommandOptions = {},
  ): CommandHandle {
    // A repeat with the same idempotency key reuses the first id: the hub answers with that command's acks.
    // It reuses the first timestamp too, so after a damaged log the hub can tell a repeat of a command sent
    // before the damage (docs/protocol.md "Exactly once").
    const key = options.idempotencyKey;
    const first = key === undefined ? undefined : this.#idemIds.get(key);
    const id = first?.id ?? this.newId();
    const timestamp = options.timestamp ?? first?.timestamp ?? (key === undefined ? undefined : Date.now());
    if (key !== undefined && timestamp !== undefined) {
      this.#idemIds.set(key, { id, timestamp });
      // Bounded: the hub forgets keys after its idempotency window anyway.
      if (this.#idemIds.size > 10_000) this.#idemIds.delete(this.#idemIds.keys().next().value as string);
    }
    const acks: AckMessage[] = [];
    const done = this.#request(
      'command',
      path,
      params === undefined ? { action } : { action, params },
      {
        target,
        ...(options.ttl === undefined ? {} : { ttl: options.ttl }),
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
        ...(options.correlationId === undefined ? {} : { correlationId: options.correlationId }),
        ...(timestamp === undefined ? {} : { timestamp }),
      },
      true,
      (m) => acks.push(m),
      id,
    );
    return { id, acks, done };
  }

  async close(): Promise<void> {
    this.#closedByUser = true;
    if (this.#reconnectTimer) clearTimeout(this.#reconnectTimer);
    this.#stopHeartbeat();
    const ws = this.#ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        ws.terminate();
        resolve();
      }, 1000);
      ws.once('close', () => {
        clearTimeout(t);
        resolve();
      });
      ws.close(1000, 'bye');
    });
  }
}
