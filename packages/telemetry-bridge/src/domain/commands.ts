/**
 * Commands from clients to adapters (docs/protocol.md "Commands"): routing by `target`, the `received` ack
 * (sent only once the command record is durable in the event log), TTL and the default timeout, the final
 * ack from the adapter, and idempotency (a repeated key from the same client identity within the window
 * replays the cached acks and never executes again; docs/protocol.md "Exactly once").
 */
import type { Clock, Logger } from '@broadcast-ops/core';
import type { AckStatus, ClientCommand, ErrorInfo } from '../protocol/envelope.ts';
import type { Adapter, AdapterCommand, AdapterResult } from './adapter.ts';
import type { ClientConn } from './client-conn.ts';
import type { RestoredIdem } from './idempotency-log.ts';
import type { Journal } from './journal.ts';
import { HUB_NAMESPACE, type MessageFactory } from './message-factory.ts';
import type { HubMetrics } from './metrics.ts';

/**
 * Cap on remembered idempotency keys. Clients choose the keys, so the registry needs a bound beyond its time
 * sweep; past it the oldest key is forgotten first (a repeat of that one would execute again).
 */
export const MAX_IDEMPOTENCY_KEYS = 100_000;

interface InFlight {
  commandId: string;
  action: string;
  adapter: Adapter;
  /** Namespaces waiting for the final ack (the original request and idempotent repeats). */
  waiters: Set<string>;
  /** A repeat's own command id, for a waiter that sent the key under another id than the original. */
  repeatIds: Map<string, string>;
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

export interface CommandRouterOptions {
  clock: Clock;
  logger: Logger;
  journal: Journal;
  factory: MessageFactory;
  metrics: HubMetrics;
  defaultTimeoutMs: number;
  idempotencyWindowMs: number;
  /** Commands one namespace may have in flight (each holds its frame until its final ack or ttl). */
  maxInFlightPerClient: number;
  target(name: string): Adapter | undefined;
  /** Deliver a control message to the live connection of a namespace (if any). */
  sendTo(namespace: string, json: string): void;
  /** Answer with an error message (UNKNOWN_TARGET, INTERNAL_ERROR). */
  fail(
    conn: ClientConn,
    msg: ClientCommand,
    code: 'UNKNOWN_TARGET' | 'INTERNAL_ERROR' | 'RATE_LIMITED',
    message: string,
    details?: unknown,
  ): void;
}

/**
 * A recorded ack as the answer to a repeat: unchanged when the repeat came from the same namespace with the
 * same command id; otherwise addressed to the repeat's namespace and command id (so its sender can match
 * it), with the first command's id kept in `originalCommandId`.
 */
export function replayAck(json: string, ns: string, commandId: string): string {
  const m = JSON.parse(json) as { target?: string; payload: { commandId: string } };
  if (m.target === ns && m.payload.commandId === commandId) return json;
  return JSON.stringify({
    ...m,
    target: ns,
    payload: { ...m.payload, commandId, originalCommandId: m.payload.commandId },
  });
}

export class CommandRouter {
  readonly #o: CommandRouterOptions;
  readonly #inflight = new Map<string, InFlight>();
  readonly #idem = new Map<string, IdemEntry>();
  /** Commands in flight per namespace (entries removed at zero). */
  readonly #perClient = new Map<string, number>();
  #lastSweep = 0;
  /** Wall-time spans of log stretches lost to damage (recovery.ts `RecoveredLog.lost`). */
  #lost: readonly { fromTime: number; toTime: number }[] = [];

  constructor(options: CommandRouterOptions) {
    this.#o = options;
  }

  get inflight(): number {
    return this.#inflight.size;
  }

  /** The spans a damaged log lost: an idempotency record of a command sent before one ended may be gone. */
  setLost(spans: readonly { fromTime: number; toTime: number }[]): void {
    this.#lost = spans;
  }

  /**
   * May this command's first attempt be recorded in a lost stretch? It was sent (its `timestamp`) before a
   * lost stretch ended, and that stretch is still inside the idempotency window. Then nobody can say
   * whether it ran, and it must not run again (docs/protocol.md "Exactly once", damaged log).
   */
  #mayBeLost(msg: ClientCommand, nowWall: number): boolean {
    return this.#lost.some(
      (l) => msg.timestamp <= l.toTime && nowWall - l.fromTime <= this.#o.idempotencyWindowMs,
    );
  }

  #sweep(nowMono: number): void {
    if (nowMono - this.#lastSweep < 10_000) return;
    this.#lastSweep = nowMono;
    for (const [k, e] of this.#idem) {
      if (!e.inflight && nowMono - e.at > 2 * this.#o.idempotencyWindowMs) this.#idem.delete(k);
    }
  }

  handle(conn: ClientConn, msg: ClientCommand): void {
    const o = this.#o;
    const ns = conn.namespace;
    const correlationId = msg.correlationId ?? msg.id;
    const adapter = o.target(msg.target);
    if (!adapter) {
      o.fail(conn, msg, 'UNKNOWN_TARGET', `no adapter answers to "${msg.target}"`);
      return;
    }
    const nowMono = o.clock.monotonicMs();
    this.#sweep(nowMono);
    const idemKey =
      msg.idempotencyKey === undefined ? undefined : `${conn.idemScope}\u0000${msg.idempotencyKey}`;
    if (idemKey !== undefined) {
      const cached = this.#idem.get(idemKey);
      if (cached && nowMono - cached.at <= o.idempotencyWindowMs) {
        // A repeat: replay the acks, never execute twice. Behind the first's durability wait (FIFO).
        o.journal.whenDurable(() => {
          if (cached.inflight?.done === true && cached.finalJson === undefined) {
            // The original was refused (its record never became durable): no `received` to replay.
            o.fail(conn, msg, 'INTERNAL_ERROR', 'the event log could not record the command');
            return;
          }
          o.sendTo(ns, replayAck(cached.receivedJson, ns, msg.id));
          if (cached.finalJson !== undefined) o.sendTo(ns, replayAck(cached.finalJson, ns, msg.id));
          else {
            cached.inflight?.waiters.add(ns);
            cached.inflight?.repeatIds.set(ns, msg.id);
          }
        });
        return;
      }
    }
    const running = this.#perClient.get(ns) ?? 0;
    if (running >= o.maxInFlightPerClient) {
      // Refused before it is logged or remembered: it costs nothing and cannot evict anyone's keys.
      o.fail(conn, msg, 'RATE_LIMITED', `at most ${o.maxInFlightPerClient} commands in flight per client`, {
        limit: o.maxInFlightPerClient,
      });
      return;
    }
    // The scope goes into the log with the command, so a restart keeps each key with its owner.
    const logged = {
      ...msg,
      source: ns,
      sequence: o.factory.seq(ns),
      ...(idemKey === undefined ? {} : { idemScope: conn.idemScope }),
    };
    o.journal.append(o.journal.next(), 'command', JSON.stringify(logged));
    const receivedJson = this.#loggedAck(HUB_NAMESPACE, ns, msg, 'received', {});
    const inf: InFlight = {
      commandId: msg.id,
      action: msg.payload.action,
      adapter,
      waiters: new Set([ns]),
      repeatIds: new Map(),
      startedMono: nowMono,
      abort: new AbortController(),
      timer: undefined,
      done: false,
      idemKey,
    };
    if (idemKey !== undefined) {
      // Delete first so the map's insertion order stays oldest-first for the cap below.
      this.#idem.delete(idemKey);
      if (this.#idem.size >= MAX_IDEMPOTENCY_KEYS)
        this.#idem.delete(this.#idem.keys().next().value as string);
      this.#idem.set(idemKey, { at: nowMono, receivedJson, finalJson: undefined, inflight: inf });
    }
    const key = msg.id + '\u0000' + ns;
    this.#inflight.set(key, inf);
    this.#perClient.set(ns, running + 1);
    const lostRecord = idemKey !== undefined && this.#mayBeLost(msg, o.clock.now());
    // `received` promises the command is recorded: it goes out (and the command runs) once the record is
    // durable. A log that cannot sync refuses the command instead of promising what a restart would undo.
    o.journal.whenDurable((err) => {
      if (err) {
        this.#settled(key, ns);
        inf.done = true;
        if (idemKey !== undefined && this.#idem.get(idemKey)?.inflight === inf) this.#idem.delete(idemKey);
        o.logger.error({ err, correlationId, commandId: msg.id }, 'command refused: event log not durable');
        o.fail(conn, msg, 'INTERNAL_ERROR', 'the event log could not record the command');
        return;
      }
      o.sendTo(ns, receivedJson);
      if (lostRecord) {
        // Recorded with its outcome, so every later repeat (restarts included) gets this same answer.
        o.logger.warn(
          { correlationId, commandId: msg.id, source: ns, idempotencyKey: msg.idempotencyKey },
          'idempotent command may repeat one recorded in a lost stretch of the event log: not executed',
        );
        this.#finish(inf, ns, msg, key, 'failed', {
          error: {
            code: 'INTERNAL_ERROR',
            message:
              'the event log lost records from when this command was sent; an earlier attempt may or may ' +
              'not have reached the device, so it is not executed',
            details: { outcome: 'unknown', reason: 'log_damaged' },
          },
        });
        return;
      }
      this.#start(inf, ns, msg, adapter, correlationId, key);
    });
  }

  #start(
    inf: InFlight,
    ns: string,
    msg: ClientCommand,
    adapter: Adapter,
    correlationId: string,
    key: string,
  ): void {
    const o = this.#o;
    const nowWall = o.clock.now();
    // TTL in ms from the command's own timestamp; without ttl the default timeout applies from arrival.
    const deadline = msg.ttl !== undefined ? msg.timestamp + msg.ttl : nowWall + o.defaultTimeoutMs;
    const remaining = Math.min(deadline - nowWall, msg.ttl ?? o.defaultTimeoutMs);
    if (remaining <= 0) {
      this.#finish(inf, ns, msg, key, 'timeout', {
        error: { code: 'TIMEOUT', message: 'ttl elapsed before dispatch' },
      });
      return;
    }
    inf.timer = o.clock.setTimer(remaining, () => {
      this.#finish(inf, ns, msg, key, 'timeout', {
        error: { code: 'TIMEOUT', message: `no result within ${remaining} ms` },
      });
    });
    const cmd: AdapterCommand = {
      id: msg.id,
      source: ns,
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
          this.#finish(inf, ns, msg, key, 'completed', r.result === undefined ? {} : { result: r.result });
        } else {
          this.#finish(inf, ns, msg, key, r.status, { error: r.error });
        }
      },
      (err: unknown) => {
        this.#finish(inf, ns, msg, key, 'failed', {
          error: { code: 'ADAPTER_ERROR', message: err instanceof Error ? err.message : String(err) },
        });
      },
    );
  }

  #finish(
    inf: InFlight,
    ns: string,
    msg: ClientCommand,
    key: string,
    status: AckStatus,
    extra: { result?: unknown; error?: ErrorInfo },
  ): void {
    if (inf.done) return;
    const o = this.#o;
    inf.done = true;
    inf.timer?.cancel();
    if (status === 'timeout') inf.abort.abort(new Error('command timed out'));
    this.#settled(key, ns);
    const source = status === 'timeout' ? HUB_NAMESPACE : inf.adapter.name;
    const json = this.#loggedAck(source, ns, msg, status, extra);
    const seconds = (o.clock.monotonicMs() - inf.startedMono) / 1000;
    o.metrics.commandFinished(inf.action, status, seconds);
    o.logger[status === 'completed' ? 'info' : 'warn'](
      {
        correlationId: msg.correlationId ?? msg.id,
        commandId: msg.id,
        source: ns,
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
        e.finalJson = json;
        e.inflight = undefined;
      }
    }
    for (const waiter of inf.waiters) {
      const repeatId = inf.repeatIds.get(waiter);
      o.sendTo(waiter, repeatId === undefined ? json : replayAck(json, waiter, repeatId));
    }
  }

  #settled(key: string, ns: string): void {
    if (!this.#inflight.delete(key)) return;
    const n = (this.#perClient.get(ns) ?? 1) - 1;
    if (n > 0) this.#perClient.set(ns, n);
    else this.#perClient.delete(ns);
  }

  /** An ack for a command, numbered and written to the event log. */
  #loggedAck(
    source: string,
    ns: string,
    msg: ClientCommand,
    status: AckStatus,
    extra: { result?: unknown; error?: ErrorInfo },
  ): string {
    const o = this.#o;
    const offset = o.journal.next();
    const json = o.factory.ack(
      source,
      ns,
      msg.path,
      msg.id,
      status,
      msg.correlationId ?? msg.id,
      extra,
      offset,
    );
    o.journal.append(offset, 'ack', json);
    return json;
  }

  /**
   * Remember the idempotent commands the event log recorded inside the window (idempotency-log.ts), so a
   * retry after a restart gets the recorded acks and never runs again. A command that was still running
   * when the bridge died gets a final `failed` ack (outcome unknown), logged here: call once the event log
   * accepts appends.
   */
  seed(entries: readonly RestoredIdem[]): number {
    const o = this.#o;
    const nowWall = o.clock.now();
    const nowMono = o.clock.monotonicMs();
    let interrupted = 0;
    for (const r of [...entries].sort((a, b) => a.at - b.at)) {
      let finalJson = r.finalJson;
      if (finalJson === undefined) {
        interrupted++;
        const offset = o.journal.next();
        finalJson = o.factory.ack(
          HUB_NAMESPACE,
          r.namespace,
          r.command.path,
          r.command.id,
          'failed',
          r.command.correlationId,
          {
            error: {
              code: 'INTERNAL_ERROR',
              message:
                'the bridge restarted while this command was running; it may or may not have reached the ' +
                'device and is not executed again',
              details: { outcome: 'unknown' },
            },
          },
          offset,
        );
        o.journal.append(offset, 'ack', finalJson);
      }
      this.#idem.delete(r.key);
      if (this.#idem.size >= MAX_IDEMPOTENCY_KEYS)
        this.#idem.delete(this.#idem.keys().next().value as string);
      // The window counts from when the command was logged, on the monotonic clock from here on.
      this.#idem.set(r.key, {
        at: nowMono - Math.max(0, nowWall - r.at),
        receivedJson: r.receivedJson,
        finalJson,
        inflight: undefined,
      });
    }
    return interrupted;
  }

  /** Abort every command still in flight (shutdown). */
  abortAll(): void {
    for (const inf of [...this.#inflight.values()]) {
      inf.done = true;
      inf.timer?.cancel();
      inf.abort.abort(new Error('hub shutting down'));
    }
    this.#inflight.clear();
    this.#perClient.clear();
  }
}
