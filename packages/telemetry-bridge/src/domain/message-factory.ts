/**
 * Builds every message the hub sends, as JSON text, in one style: hub ids (UUID v7), the per-source
 * `sequence` counters, timestamps from the injected clock. Messages are serialised once here and the same
 * string goes to every recipient, the event log and the replay ring (docs/protocol.md "Envelope").
 */
import type { Clock } from '@broadcast-ops/core';
import type { AckStatus, ErrorInfo } from '../protocol/envelope.ts';
import type { BridgeErrorCode } from '../errors.ts';
import { UuidV7Generator } from './ids.ts';
import type { StateEntry } from './state-store.ts';

export const HUB_NAMESPACE = 'hub.core';
export const SUBSCRIPTIONS_PATH = 'hub.subscriptions';

export interface RelatedMessage {
  id?: string | undefined;
  path?: string | undefined;
  correlationId?: string | undefined;
}

export class MessageFactory {
  readonly #clock: Clock;
  readonly #ids: UuidV7Generator;
  readonly #sequences = new Map<string, number>();

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#ids = new UuidV7Generator(() => clock.now());
  }

  nextId(): string {
    return this.#ids.next();
  }

  /** Next `sequence` of a source (monotonic per source). */
  seq(source: string): number {
    const n = (this.#sequences.get(source) ?? 0) + 1;
    this.#sequences.set(source, n);
    return n;
  }

  /** Forget a source's counter (a client namespace that left nothing behind). */
  forget(source: string): void {
    this.#sequences.delete(source);
  }

  /** A `state` message for an entry; `deleted` sends `value: null`. The entry's value is spliced in as JSON. */
  state(entry: StateEntry, source: string, deleted: boolean, correlationId: string | undefined): string {
    const payload = deleted
      ? `{"value":null,"owner":${JSON.stringify(entry.owner)},"version":${entry.version}}`
      : `{"value":${entry.valueJson},"owner":${JSON.stringify(entry.owner)},"version":${entry.version}${
          entry.stale ? ',"stale":true' : ''
        }}`;
    return (
      `{"id":"${this.#ids.next()}","type":"state","source":${JSON.stringify(source)},` +
      `"path":${JSON.stringify(entry.path)},"payload":${payload},"timestamp":${this.#clock.now()},` +
      (correlationId === undefined ? '' : `"correlationId":${JSON.stringify(correlationId)},`) +
      `"sequence":${this.seq(source)},"offset":${entry.offset}}`
    );
  }

  event(
    source: string,
    path: string,
    event: string,
    data: unknown,
    correlationId: string | undefined,
    offset: number,
  ): string {
    return JSON.stringify({
      id: this.#ids.next(),
      type: 'event',
      source,
      path,
      payload: data === undefined ? { event } : { event, data },
      timestamp: this.#clock.now(),
      ...(correlationId === undefined ? {} : { correlationId }),
      sequence: this.seq(source),
      offset,
    });
  }

  /** A per-client hub event on `hub.subscriptions` (snapshot_complete, recovery_failed, ...); no offset. */
  hubEvent(event: string, data: unknown, correlationId: string | undefined): string {
    return JSON.stringify({
      id: this.#ids.next(),
      type: 'event',
      source: HUB_NAMESPACE,
      path: SUBSCRIPTIONS_PATH,
      payload: { event, data },
      timestamp: this.#clock.now(),
      correlationId,
      sequence: this.seq(HUB_NAMESPACE),
    });
  }

  ack(
    source: string,
    target: string,
    path: string,
    commandId: string,
    status: AckStatus,
    correlationId: string,
    extra: { result?: unknown; error?: ErrorInfo },
    offset: number | undefined,
  ): string {
    return JSON.stringify({
      id: this.#ids.next(),
      type: 'ack',
      source,
      target,
      path,
      payload: { status, commandId, ...extra },
      timestamp: this.#clock.now(),
      correlationId,
      sequence: this.seq(source),
      offset,
    });
  }

  error(
    target: string,
    code: BridgeErrorCode,
    message: string,
    related: RelatedMessage,
    details?: unknown,
  ): string {
    return JSON.stringify({
      id: this.#ids.next(),
      type: 'error',
      source: HUB_NAMESPACE,
      target,
      path: related.path ?? HUB_NAMESPACE,
      payload: {
        code,
        message,
        ...(details === undefined ? {} : { details }),
        ...(related.id === undefined ? {} : { relatedMessageId: related.id }),
      },
      timestamp: this.#clock.now(),
      ...(related.correlationId === undefined ? {} : { correlationId: related.correlationId }),
      sequence: this.seq(HUB_NAMESPACE),
    });
  }

  /** A transport-level error: not an envelope (before the handshake, or a frame that is not JSON). */
  transportError(code: BridgeErrorCode, message: string): string {
    return JSON.stringify({ type: 'error', code, message, timestamp: this.#clock.now() });
  }
}
