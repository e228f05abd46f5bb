/**
 * The hub-wide offset and where numbered messages go: the event log (io, written before delivery) and the
 * replay ring (memory). Also the one place that knows when something is durable: `whenDurable` runs its
 * callback once every record appended so far is on disk (group commit in the event log), so acks that
 * promise persistence are sent only then.
 */
import type { LogKind } from '../protocol/log-record.ts';
import { ReplayRing, type RingLimits } from './replay-ring.ts';

/** Where logged messages go (the io event log, or nothing). `append` writes before the message is delivered. */
export interface EventLogSink {
  append(offset: number, time: number, kind: LogKind, json: string): void;
  /**
   * Call `done` once everything appended so far is durable (fsynced), or with the error that prevented it.
   * Callbacks run in the order they were registered.
   */
  whenDurable(done: (err?: Error) => void): void;
  /**
   * Write what `append` may still hold from the current job (the io event log writes a job's records
   * together). Called before something leaves the process by a path the client transport does not see:
   * a record an adapter writes is on file before the adapter sends its device the line it describes.
   */
  writePending(): void;
}

export class Journal {
  readonly ring: ReplayRing;
  readonly #log: EventLogSink | undefined;
  readonly #now: () => number;
  #offset: number;

  constructor(options: {
    log: EventLogSink | undefined;
    ring: RingLimits;
    now: () => number;
    startOffset: number;
    replayFloor: number;
  }) {
    this.#log = options.log;
    this.#now = options.now;
    this.#offset = options.startOffset;
    this.ring = new ReplayRing(options.ring, options.replayFloor);
  }

  get offset(): number {
    return this.#offset;
  }

  /** Take the next offset. */
  next(): number {
    return ++this.#offset;
  }

  /** Log a numbered record (commands, acks, state, events). */
  append(offset: number, kind: LogKind, json: string): void {
    this.#log?.append(offset, this.#now(), kind, json);
  }

  /** Log a broadcast message and keep it for replay. */
  broadcast(offset: number, kind: 'state' | 'event', path: string, json: string): void {
    this.append(offset, kind, json);
    this.ring.push(offset, kind, path, json);
  }

  /** Write through what the log holds from this job (EventLogSink `writePending`). */
  writePending(): void {
    this.#log?.writePending();
  }

  whenDurable(done: (err?: Error) => void): void {
    if (this.#log) this.#log.whenDurable(done);
    else done();
  }
}
