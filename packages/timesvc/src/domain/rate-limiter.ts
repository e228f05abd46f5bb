/**
 * Per-client-address rate limiter for the NTP server (RFC 8633 §4.6 and reference §3.2): a token bucket per
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
    if (!address.includes(':')) return address;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped?.[1] !== undefined) return mapped[1];
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

/** Expand textual IPv6 (with `::` and an optional `%zone`) to eight 16-bit groups, or undefined. */
export function expandIpv6(text: string): number[] | undefined {
  const addr = text.split('%')[0] ?? '';
  let tail: number[] = [];
  let body = addr;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(addr);
  if (v4) {
    const o = v4.slice(1, 5).map(Number);
    if (o.some((x) => x > 255)) return undefined;
    tail = [((o[0] ?? 0) << 8) | (o[1] ?? 0), ((o[2] ?? 0) << 8) | (o[3] ?? 0)];
    body = addr.slice(0, v4.index);
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const parse = (s: string): number[] | undefined => {
    if (s === '') return [];
    const parts = s.split(':');
    const out: number[] = [];
    for (const p of parts) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
      out.push(parseInt(p, 16));
    }
    return out;
  };
  const halves = body.split('::');
  if (halves.length > 2) return undefined;
  const head = parse(halves[0] ?? '');
  if (head === undefined) return undefined;
  if (halves.length === 1) {
    const all = [...head, ...tail];
    return all.length === 8 ? all : undefined;
  }
  const rest = parse(halves[1] ?? '');
  if (rest === undefined) return undefined;
  const known = head.length + rest.length + tail.length;
  if (known > 7) return undefined;
  return [...head, ...new Array<number>(8 - known).fill(0), ...rest, ...tail];
}
