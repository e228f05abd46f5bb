/**
 * What a client may write itself, and when it is told it succeeded (docs/protocol.md "Commands", last
 * paragraph): `state` under `app.<ns>.custom.*` (new keys capped per client) and `event`s under
 * `app.<ns>.`. Their `ack completed` is sent only once the change is durable in the event log; a log that
 * cannot sync answers INTERNAL_ERROR instead.
 */
import type { Logger } from '@broadcast-ops/core';
import type { ClientEnvelope } from '../protocol/envelope.ts';
import type { BridgeErrorCode } from '../errors.ts';
import type { ClientConn } from './client-conn.ts';
import type { StateWriteOutcome } from './hub-options.ts';
import type { Journal } from './journal.ts';
import { HUB_NAMESPACE, type MessageFactory, type RelatedMessage } from './message-factory.ts';
import type { StateStore } from './state-store.ts';

export interface ClientWritesOptions {
  logger: Logger;
  store: StateStore;
  journal: Journal;
  factory: MessageFactory;
  maxKeysPerClient: number;
  writeState(writer: string, path: string, value: unknown, correlationId?: string): StateWriteOutcome;
  publishEvent(source: string, path: string, event: string, data: unknown, correlationId?: string): number;
  sendError(
    conn: ClientConn,
    code: BridgeErrorCode,
    message: string,
    rel: RelatedMessage,
    type: string,
    details?: unknown,
  ): void;
}

export function related(msg: ClientEnvelope): RelatedMessage {
  return { id: msg.id, path: msg.path, correlationId: msg.correlationId };
}

export class ClientWrites {
  readonly #o: ClientWritesOptions;

  constructor(options: ClientWritesOptions) {
    this.#o = options;
  }

  /**
   * `ack completed` from hub.core. A `durable` ack confirms a logged change: it is logged too and sent only
   * once the change is on disk (an ack must not promise what a power cut would undo).
   */
  ack(conn: ClientConn, msg: ClientEnvelope, result: unknown, durable: boolean): void {
    const offset = durable ? this.#o.journal.next() : undefined;
    const json = this.#o.factory.ack(
      HUB_NAMESPACE,
      conn.namespace,
      msg.path,
      msg.id,
      'completed',
      msg.correlationId ?? msg.id,
      { result },
      offset,
    );
    if (offset === undefined) {
      conn.queue.push('control', json);
      return;
    }
    this.#o.journal.append(offset, 'ack', json);
    this.#o.journal.whenDurable((err) => {
      if (err) {
        this.#o.logger.error(
          { err, namespace: conn.namespace },
          'write not acknowledged: event log not durable',
        );
        this.#o.sendError(
          conn,
          'INTERNAL_ERROR',
          'the event log could not record the change',
          related(msg),
          msg.type,
        );
        return;
      }
      if (conn.open) conn.queue.push('control', json);
    });
  }

  state(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'state' }>): void {
    const ns = conn.namespace;
    const value = msg.payload.value ?? null;
    if (
      value !== null &&
      this.#o.store.get(msg.path) === undefined &&
      this.#o.store.ownerOf(msg.path) === ns &&
      this.#o.store.countOf(ns) >= this.#o.maxKeysPerClient
    ) {
      this.#o.sendError(
        conn,
        'FORBIDDEN',
        `${ns} already holds ${this.#o.maxKeysPerClient} keys (the per-client limit)`,
        related(msg),
        'state',
        { limit: this.#o.maxKeysPerClient },
      );
      return;
    }
    const out = this.#o.writeState(ns, msg.path, value, msg.correlationId ?? msg.id);
    if (out.kind === 'conflict') {
      const code = out.owner === undefined ? 'FORBIDDEN' : 'STATE_CONFLICT';
      const message =
        out.owner === undefined
          ? `${msg.path} is outside ${ns}.custom`
          : `${msg.path} is owned by ${out.owner}`;
      this.#o.sendError(conn, code, message, related(msg), 'state');
      return;
    }
    this.ack(
      conn,
      msg,
      out.kind === 'changed' ? { version: out.version, offset: out.offset } : { unchanged: true },
      out.kind === 'changed',
    );
  }

  event(conn: ClientConn, msg: Extract<ClientEnvelope, { type: 'event' }>): void {
    if (!msg.path.startsWith(conn.namespace + '.')) {
      this.#o.sendError(
        conn,
        'FORBIDDEN',
        `events must be published under ${conn.namespace}.`,
        related(msg),
        'event',
      );
      return;
    }
    const offset = this.#o.publishEvent(
      conn.namespace,
      msg.path,
      msg.payload.event,
      msg.payload.data,
      msg.correlationId ?? msg.id,
    );
    this.ack(conn, msg, { offset }, true);
  }
}
