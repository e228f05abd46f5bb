import {
  type ClientLogEntry,
  type LoggedClient,
  ipv6KeyText,
  logRequest,
  newLogEntry,
} from './client-log.ts';
import { expandIpv6, unmapIpv4 } from './ip-address.ts';

/**
 * Per-client-address rate limiter for the NTP server (RFC 8633 §4.6): a token bucket per
 * client, in a map whose size is bounded (least recently seen clients are evicted first), so a flood of
 * spoofed source addresses costs a fixed amount of memory. Time is passed in (monotonic milliseconds).
 */

export interface RateLimitOptions {
  /** Average interval between requests a client may sustain, seconds. */
  averageIntervalS: number;
  /** Requests a client may send back to back before it is limited. */
  burst: number;
  /** At most one RATE kiss per client per this many seconds; requests limited in between are dropped. */
  kodIntervalS: number;
  /** Most clients tracked at once. */
  maxClients: number;
  /** Prefix length that groups IPv6 clients (one /64 is usually one host or one LAN). */
  ipv6PrefixBits: number;
  /**
   * Whether requests are limited (default true). When false every request is allowed, but the clients are
   * still keyed, bounded and logged (the client log, docs/cli.md "clients").
   */
  enabled?: boolean;
}

export type RateDecision = 'allow' | 'kod' | 'drop';

interface Bucket {
  tokens: number;
  lastMs: number;
  lastKodMs: number;
  log: ClientLogEntry;
}

export class RateLimiter {
  readonly #opts: RateLimitOptions;
  readonly #buckets = new Map<string | number, Bucket>();
  readonly #refillPerMs: number;

  constructor(options: RateLimitOptions) {
    if (!(options.averageIntervalS > 0) || !(options.burst >= 1) || !(options.maxClients >= 1)) {
      throw new RangeError('rate limit: averageIntervalS > 0, burst >= 1 and maxClients >= 1 are required');
    }
    this.#opts = options;
    this.#refillPerMs = 1 / (options.averageIntervalS * 1000);
  }

  get size(): number {
    return this.#buckets.size;
  }

  /** The options it was built with (the native responder builds the same limiter from them). */
  get options(): Readonly<RateLimitOptions> {
    return this.#opts;
  }

  /**
   * Decide about one request from `address` (as given by dgram: dotted IPv4 or IPv6 text) and log it;
   * `denied`: the access list refused the client (logged as a DENY kiss unless the limiter drops it).
   */
  check(address: string, nowMs: number, denied = false): RateDecision {
    return this.checkKey(this.keyOf(address), nowMs, denied);
  }

  /**
   * The same decision for a client given by its raw address (the batched socket path's address record:
   * family 4 or 6 at `offset`, the address bytes from offset + 4), without building its text: IPv4 (and
   * IPv4-mapped IPv6) clients are keyed by the address as a number, IPv6 clients by their prefix's bytes.
   */
  checkBytes(record: Uint8Array, offset: number, nowMs: number, denied = false): RateDecision {
    return this.checkKey(this.keyOfBytes(record, offset), nowMs, denied);
  }

  /** The bucket key of checkBytes. */
  keyOfBytes(record: Uint8Array, offset: number): number | string {
    const a = offset + 4;
    let mapped = record[offset] !== 6;
    if (!mapped) {
      mapped = record[a + 10] === 0xff && record[a + 11] === 0xff;
      for (let i = 0; i < 10 && mapped; i++) if (record[a + i] !== 0) mapped = false;
    }
    if (mapped) {
      const v4 = record[offset] === 6 ? a + 12 : a;
      return (
        (((record[v4] ?? 0) << 24) |
          ((record[v4 + 1] ?? 0) << 16) |
          ((record[v4 + 2] ?? 0) << 8) |
          (record[v4 + 3] ?? 0)) >>>
        0
      );
    }
    const bits = Math.max(0, Math.min(128, this.#opts.ipv6PrefixBits));
    let key = '/';
    for (let i = 0; i < 16; i++) {
      const keep = Math.max(0, Math.min(8, bits - i * 8));
      key += String.fromCharCode(keep === 0 ? 0 : (record[a + i] ?? 0) & (0xff << (8 - keep)) & 0xff);
    }
    return key;
  }

  checkKey(key: string | number, nowMs: number, denied = false): RateDecision {
    const decision = this.#decide(key, nowMs);
    const bucket = this.#buckets.get(key);
    if (bucket !== undefined) logRequest(bucket.log, nowMs, decision, denied);
    return decision;
  }

  /**
   * The client log, most recently seen first, at most `max` clients (docs/cli.md "clients"). One pass over
   * the table (insertion order is least recently seen first) keeping only the last `max` keys: memory
   * O(max) whatever the table's size.
   */
  clients(max: number): LoggedClient[] {
    const m = Math.max(0, Math.floor(max));
    const last: (string | number)[] = [];
    let at = 0;
    for (const key of this.#buckets.keys()) {
      if (m === 0) break;
      last[at] = key;
      at = (at + 1) % m;
    }
    const out: LoggedClient[] = [];
    for (let i = 1; i <= last.length; i++) {
      const key = last[(at - i + m * 2) % m] as string | number;
      const bucket = this.#buckets.get(key);
      if (bucket !== undefined) out.push({ address: this.keyText(key), entry: { ...bucket.log } });
    }
    return out;
  }

  /** A bucket key (keyOf or keyOfBytes) as text: the IPv4 address, or the IPv6 prefix as `address/bits`. */
  keyText(key: string | number): string {
    if (typeof key === 'number') {
      return [key >>> 24, (key >>> 16) & 0xff, (key >>> 8) & 0xff, key & 0xff].join('.');
    }
    if (key.startsWith('/') && key.length === 17) {
      return ipv6KeyText((i) => key.charCodeAt(1 + i), this.#opts.ipv6PrefixBits);
    }
    // keyOf's IPv6 form (eight groups and /bits) in the same RFC 5952 text; IPv4 text as it is.
    const groups = key.includes('/') ? expandIpv6(key.split('/')[0] ?? '') : undefined;
    if (groups === undefined) return key;
    return ipv6KeyText((i) => ((groups[i >> 1] ?? 0) >> (i & 1 ? 0 : 8)) & 0xff, this.#opts.ipv6PrefixBits);
  }

  #decide(key: string | number, nowMs: number): RateDecision {
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      if (this.#buckets.size >= this.#opts.maxClients) {
        // Map iteration order is insertion order and every hit re-inserts, so the first key is the LRU one.
        const oldest = this.#buckets.keys().next();
        if (!oldest.done) this.#buckets.delete(oldest.value);
      }
      bucket = { tokens: this.#opts.burst, lastMs: nowMs, lastKodMs: -Infinity, log: newLogEntry() };
    } else {
      this.#buckets.delete(key);
      const elapsed = Math.max(0, nowMs - bucket.lastMs);
      bucket.tokens = Math.min(this.#opts.burst, bucket.tokens + elapsed * this.#refillPerMs);
      bucket.lastMs = nowMs;
    }
    this.#buckets.set(key, bucket);
    if (this.#opts.enabled === false) return 'allow';
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 'allow';
    }
    if (nowMs - bucket.lastKodMs >= this.#opts.kodIntervalS * 1000) {
      bucket.lastKodMs = nowMs;
      return 'kod';
    }
    return 'drop';
  }

  /** The bucket key: the IPv4 address, or the configured IPv6 prefix (IPv4-mapped IPv6 counts as IPv4). */
  keyOf(address: string): string {
    const v4 = unmapIpv4(address);
    if (!v4.includes(':')) return v4;
    const groups = expandIpv6(address);
    if (groups === undefined) return address;
    const bits = Math.max(0, Math.min(128, this.#opts.ipv6PrefixBits));
    const out: number[] = [];
    for (let i = 0; i < 8; i++) {
      const keep = Math.max(0, Math.min(16, bits - i * 16));
      const g = groups[i] ?? 0;
      out.push(keep === 0 ? 0 : keep === 16 ? g : g & (0xffff << (16 - keep)) & 0xffff);
    }
    return out.map((g) => g.toString(16)).join(':') + `/${bits}`;
  }
}
