/**
 * The replay ring: the latest broadcast messages (state deltas and events) in offset order, for resuming
 * clients. Bounded by both a message count and a byte budget (UTF-8 bytes of the serialised messages); the
 * oldest go first. `floor` is the highest offset that can no longer be replayed: a client resuming from an
 * offset below it is told `recovery_failed` and gets a snapshot instead.
 */
export interface RingItem {
  offset: number;
  kind: 'state' | 'event';
  path: string;
  json: string;
  bytes: number;
}

export interface RingLimits {
  maxMessages: number;
  maxBytes: number;
}

export class ReplayRing {
  readonly #limits: RingLimits;
  #items: (RingItem | undefined)[] = [];
  #head = 0;
  #bytes = 0;
  #floor: number;

  constructor(limits: RingLimits, floor = 0) {
    this.#limits = limits;
    this.#floor = floor;
  }

  get floor(): number {
    return this.#floor;
  }
  get size(): number {
    return this.#items.length - this.#head;
  }
  get bytes(): number {
    return this.#bytes;
  }

  /** Nothing at or below `offset` can be replayed any more (a new epoch, a restore that starts later). */
  raiseFloor(offset: number): void {
    if (offset <= this.#floor) return;
    while (this.size > 0 && (this.#items[this.#head] as RingItem).offset <= offset) this.#evict();
    this.#floor = offset;
  }

  push(offset: number, kind: 'state' | 'event', path: string, json: string): void {
    const bytes = Buffer.byteLength(json);
    this.#items.push({ offset, kind, path, json, bytes });
    this.#bytes += bytes;
    while (this.size > this.#limits.maxMessages || (this.#bytes > this.#limits.maxBytes && this.size > 0)) {
      this.#evict();
    }
    if (this.#head > 4096 && this.#head > this.size) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }

  #evict(): void {
    const item = this.#items[this.#head] as RingItem;
    this.#items[this.#head] = undefined;
    this.#head++;
    this.#bytes -= item.bytes;
    this.#floor = item.offset;
  }

  /** The first item with an offset above `after`, or undefined when there is none (yet). */
  nextAfter(after: number): RingItem | undefined {
    let lo = this.#head;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#items[mid] as RingItem).offset <= after) lo = mid + 1;
      else hi = mid;
    }
    return this.#items[lo];
  }
}
