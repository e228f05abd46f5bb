/**
 * Per-client outgoing queue with backpressure (see README "Backpressure"). Below the soft limit of the socket's buffered
 * bytes, messages go straight out. At or above it the client enters coalescing mode: state deltas are kept per
 * path (latest wins), events and control messages (acks, errors) in order, and the queue is flushed when the
 * socket drains below half the soft limit. At the hard limit, or with too many queued events, the client is
 * closed with 4008 "Slow consumer". Messages arrive already serialised: the queue never re-serialises.
 */
import type { Clock, TimerHandle } from '@broadcast-ops/core';

/** Why the hub ends a connection; the transport maps it to its own close code (io/close-codes.ts). */
export type DisconnectReason = 'slow_consumer' | 'superseded' | 'shutdown';

export interface OutboundSink {
  /** Bytes accepted by send() but not yet written to the kernel (ws `bufferedAmount`). */
  bufferedAmount(): number;
  send(data: string): void;
  close(reason: DisconnectReason): void;
}

export type OutboundKind = 'state' | 'event' | 'control';

export interface OutboundLimits {
  softLimitBytes: number;
  hardLimitBytes: number;
  maxQueuedMessages: number;
  /** How often a coalescing client's socket is checked for drain. */
  pollMs: number;
}

interface Pending {
  json: string;
  path: string | undefined;
}

export class OutboundQueue {
  readonly #sink: OutboundSink;
  readonly #limits: OutboundLimits;
  readonly #clock: Clock;
  readonly #notice: (dropped: number) => string;
  readonly #onSlow: () => void;
  #pending: (Pending | null)[] = [];
  #head = 0;
  readonly #stateIndex = new Map<string, number>();
  #queuedBytes = 0;
  #queuedOthers = 0;
  #live = 0;
  #coalesced = 0;
  #coalescedTotal = 0;
  #timer: TimerHandle | undefined;
  #closed = false;
  #maxQueuedBytes = 0;

  constructor(
    sink: OutboundSink,
    limits: OutboundLimits,
    clock: Clock,
    /** Builds the per-client notice sent before a flush that skipped coalesced deltas. */
    notice: (dropped: number) => string,
    onSlow: () => void,
  ) {
    this.#sink = sink;
    this.#limits = limits;
    this.#clock = clock;
    this.#notice = notice;
    this.#onSlow = onSlow;
  }

  get coalescing(): boolean {
    return this.#live > 0;
  }
  get closed(): boolean {
    return this.#closed;
  }
  /**
   * True when a paged stream (snapshot, replay) may write now: nothing queued and the socket below the soft
   * limit. Paged output never enters the queue, so only live traffic counts against the hard limit.
   */
  get writable(): boolean {
    return !this.#closed && this.#live === 0 && this.#sink.bufferedAmount() < this.#limits.softLimitBytes;
  }
  /** Messages waiting in the queue (not counting bytes already handed to the socket). */
  get queuedMessages(): number {
    return this.#live;
  }
  get queuedBytes(): number {
    return this.#queuedBytes;
  }
  /** High-water mark of queued bytes, for tests and metrics. */
  get maxQueuedBytes(): number {
    return this.#maxQueuedBytes;
  }
  /** Deltas replaced by a newer value for the same path, over the life of the client. */
  get coalescedTotal(): number {
    return this.#coalescedTotal;
  }

  push(kind: OutboundKind, json: string, path?: string): void {
    if (this.#closed) return;
    if (this.#live === 0) {
      if (this.#sink.bufferedAmount() < this.#limits.softLimitBytes) {
        this.#sink.send(json);
        return;
      }
      this.#arm();
    }
    if (kind === 'state' && path !== undefined) {
      const at = this.#stateIndex.get(path);
      if (at !== undefined) {
        const old = this.#pending[at];
        if (old) {
          this.#queuedBytes -= Buffer.byteLength(old.json);
          this.#pending[at] = null;
          this.#live--;
          this.#coalesced++;
          this.#coalescedTotal++;
        }
      }
      this.#stateIndex.set(path, this.#pending.length);
    } else {
      this.#queuedOthers++;
    }
    this.#pending.push({ json, path: kind === 'state' ? path : undefined });
    this.#live++;
    this.#queuedBytes += Buffer.byteLength(json);
    if (this.#queuedBytes > this.#maxQueuedBytes) this.#maxQueuedBytes = this.#queuedBytes;
    if (
      this.#queuedBytes + this.#sink.bufferedAmount() >= this.#limits.hardLimitBytes ||
      this.#queuedOthers > this.#limits.maxQueuedMessages
    ) {
      this.#slow();
      return;
    }
    this.#compact();
  }

  /** Send queued messages while the socket is below half the soft limit. */
  flush(): void {
    if (this.#closed || this.#live === 0) return;
    const low = this.#limits.softLimitBytes / 2;
    if (this.#sink.bufferedAmount() >= low) return;
    if (this.#coalesced > 0) {
      // The client sees the gap in offsets; this notice says it was coalescing, not loss.
      this.#sink.send(this.#notice(this.#coalesced));
      this.#coalesced = 0;
    }
    while (this.#head < this.#pending.length && this.#sink.bufferedAmount() < low) {
      const item = this.#pending[this.#head];
      this.#pending[this.#head] = null;
      this.#head++;
      if (!item) continue;
      this.#live--;
      this.#queuedBytes -= Buffer.byteLength(item.json);
      if (item.path !== undefined) {
        if (this.#stateIndex.get(item.path) === this.#head - 1) this.#stateIndex.delete(item.path);
      } else {
        this.#queuedOthers--;
      }
      this.#sink.send(item.json);
    }
    if (this.#live === 0) {
      this.#pending = [];
      this.#head = 0;
      this.#stateIndex.clear();
      this.#queuedBytes = 0;
      this.#queuedOthers = 0;
    } else {
      this.#compact();
    }
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#pending = [];
    this.#stateIndex.clear();
    this.#live = 0;
    this.#queuedBytes = 0;
  }

  #slow(): void {
    this.close();
    this.#onSlow();
    this.#sink.close('slow_consumer');
  }

  #arm(): void {
    if (this.#timer) return;
    const tick = (): void => {
      this.#timer = undefined;
      if (this.#closed) return;
      this.flush();
      if (this.#live > 0) this.#timer = this.#clock.setTimer(this.#limits.pollMs, tick);
    };
    this.#timer = this.#clock.setTimer(this.#limits.pollMs, tick);
  }

  /** Drop the consumed head and replaced slots once they dominate the array, so it stays O(live). */
  #compact(): void {
    const dead = this.#pending.length - this.#live;
    if (dead < 1024 || dead < this.#live) return;
    const next: (Pending | null)[] = [];
    this.#stateIndex.clear();
    for (let i = this.#head; i < this.#pending.length; i++) {
      const item = this.#pending[i];
      if (!item) continue;
      if (item.path !== undefined) this.#stateIndex.set(item.path, next.length);
      next.push(item);
    }
    this.#pending = next;
    this.#head = 0;
  }
}
