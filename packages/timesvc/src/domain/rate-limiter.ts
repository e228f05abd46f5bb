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
}

export type RateDecision = 'allow' | 'kod' | 'drop';

interface Bucket {
  tokens: number;
  lastMs: number;
  lastKodMs: number;
}

export class RateLimiter {
  readonly #opts: RateLimitOptions;
  readonly #buckets = new Map<string, Bucket>();
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

  /** Decide about one request from `address` (as given by dgram: dotted IPv4 or IPv6 text). */
  check(address: string, nowMs: number): RateDecision {
    const key = this.keyOf(address);
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      if (this.#buckets.size >= this.#opts.maxClients) {
        // Map iteration order is insertion order and every hit re-inserts, so the first key is the LRU one.
        const oldest = this.#buckets.keys().next();
        if (!oldest.done) this.#buckets.delete(oldest.value);
      }
      bucket = { tokens: this.#opts.burst, lastMs: nowMs, lastKodMs: -Infinity };
    } else {
      this.#buckets.delete(key);
      const elapsed = Math.max(0, nowMs - bucket.lastMs);
      bucket.tokens = Math.min(this.#opts.burst, bucket.tokens + elapsed * this.#refillPerMs);
      bucket.lastMs = nowMs;
    }
    this.#buckets.set(key, bucket);
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
