import type { PunchConfig } from '../config.ts';
import { FixedWindowLimiter, type LimitGroup, type RateLimitDecision } from '../domain/rate-limiter.ts';
import { rateLimitKey } from './client-address.ts';

/** Per-client buckets, one per group; each key is the client address reduced by `rateLimitKey`. */
export class ClientLimits {
  readonly #limiters: Record<LimitGroup, FixedWindowLimiter>;
  readonly #ipv6PrefixBits: number;

  constructor(limits: PunchConfig['limits']) {
    const make = (limit: number) =>
      new FixedWindowLimiter({ limit, windowMs: 60_000, maxKeys: limits.rateLimitKeys });
    this.#limiters = {
      create: make(limits.createPerMinute),
      read: make(limits.getPerMinute),
      admin: make(limits.adminPerMinute),
      page: make(limits.pagePerMinute),
      wsConnect: make(limits.wsConnectPerMinute),
    };
    this.#ipv6PrefixBits = limits.ipv6PrefixBits;
  }

  hit(group: LimitGroup, address: string, nowMs: number): RateLimitDecision {
    return this.#limiters[group].hit(rateLimitKey(address, this.#ipv6PrefixBits), nowMs);
  }
}
