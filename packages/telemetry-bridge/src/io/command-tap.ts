/**
 * Recent commands and their acks for the console (docs/console.md), read off the event-log feed: the hub
 * appends every command and every ack there before anything is sent, so this sees exactly what ran. It
 * wraps the log sink (or stands in for it when the log is off) and keeps the last `max` commands in memory.
 */
import type { EventLogSink } from '../domain/journal.ts';
import type { LogKind } from '../protocol/log-record.ts';

export interface RecentCommand {
  id: string;
  source: string;
  target: string;
  path: string;
  action: string;
  idempotencyKey?: string;
  at: number;
  offset: number;
  acks: { status: string; at: number; offset: number; error?: unknown }[];
}

export class CommandTap implements EventLogSink {
  readonly #inner: EventLogSink | undefined;
  readonly #max: number;
  readonly #recent = new Map<string, RecentCommand>();

  constructor(inner: EventLogSink | undefined, max = 100) {
    this.#inner = inner;
    this.#max = max;
  }

  append(offset: number, time: number, kind: LogKind, json: string): void {
    this.#inner?.append(offset, time, kind, json);
    if (kind === 'command') this.#command(offset, time, json);
    else if (kind === 'ack') this.#ack(offset, time, json);
  }

  whenDurable(done: (err?: Error) => void): void {
    if (this.#inner) this.#inner.whenDurable(done);
    else done();
  }

  writePending(): void {
    this.#inner?.writePending();
  }

  /** Newest first. */
  recent(): RecentCommand[] {
    return [...this.#recent.values()].reverse();
  }

  #command(offset: number, at: number, json: string): void {
    const m = JSON.parse(json) as Record<string, unknown>;
    const payload = (m['payload'] ?? {}) as Record<string, unknown>;
    const str = (v: unknown): string => (typeof v === 'string' ? v : '');
    const c: RecentCommand = {
      id: str(m['id']),
      source: str(m['source']),
      target: str(m['target']),
      path: str(m['path']),
      action: str(payload['action']),
      at,
      offset,
      acks: [],
    };
    if (typeof m['idempotencyKey'] === 'string') c.idempotencyKey = m['idempotencyKey'];
    this.#recent.set(`${c.source}\u0000${c.id}`, c);
    while (this.#recent.size > this.#max) this.#recent.delete(this.#recent.keys().next().value as string);
  }

  #ack(offset: number, at: number, json: string): void {
    // Every acked state write and event logs an ack; with no command on record none can match, so the
    // record is not parsed (docs/performance.md: this parse was 2 % of the hub's time at saturation).
    if (this.#recent.size === 0) return;
    const m = JSON.parse(json) as Record<string, unknown>;
    const p = (m['payload'] ?? {}) as Record<string, unknown>;
    const c = this.#recent.get(`${String(m['target'])}\u0000${String(p['commandId'])}`);
    if (!c || c.acks.length >= 8) return;
    c.acks.push({
      status: String(p['status']),
      at,
      offset,
      ...(p['error'] === undefined ? {} : { error: p['error'] }),
    });
  }
}
