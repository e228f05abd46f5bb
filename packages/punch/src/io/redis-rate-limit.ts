import type { RedisCluster } from './redis-cluster.ts';
import { rateLimitKey } from './client-address.ts';

/**
 * A per-client fixed-window counter shared by every instance (docs/multi-instance.md "Rate limits"): one
 * Redis key per client and group, counted with INCR; the first hit of a window sets its expiry, so the
 * window starts at the client's first request, as in the local limiter (src/domain/rate-limiter.ts).
 * Resolves to 0 when allowed, otherwise the seconds until the window ends (at least 1).
 */
const HIT = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) ttl = tonumber(ARGV[1]) end
return {n, ttl}`;

export function sharedLimit(
  cluster: RedisCluster,
  group: string,
  perMinute: number,
  ipv6PrefixBits: number,
): (ip: string) => Promise<number> {
  return async (ip) => {
    const key = cluster.keys.rate(group, rateLimitKey(ip, ipv6PrefixBits));
    const [n, ttl] = (await cluster.redis.eval(HIT, 1, key, '60000')) as [number, number];
    return n <= perMinute ? 0 : Math.max(1, Math.ceil(ttl / 1000));
  };
}
