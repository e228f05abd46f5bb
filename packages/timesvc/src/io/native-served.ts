import { performance } from 'node:perf_hooks';
import { PHI } from '../protocol/ntp-packet.ts';
import { DROP_REASONS, type ServerSystemState, type ResponderPolicy } from '../domain/ntp-responder.ts';
import { expandIpv6 } from '../domain/ip-address.ts';
import type { LinearPiece } from './served-clock.ts';

/**
 * The arrays the native responder (native/mmsg.c startNative, setServed, stats; docs/performance.md
 * "Native responder") is handed: what it serves, its policy, and the order of its counters. The layouts
 * here and in native/mmsg.c (served_from, policy_from, networks_from, the ST_ enum) are one contract.
 */

/** Fields of the served array (native/mmsg.c SERVED_FIELDS). */
export const SERVED_FIELDS = 16;

/**
 * The served array: the piece of the served clock (undefined: none, the native side then answers nothing
 * itself) and the reply fields of `state`.
 */
export function servedArray(
  out: Float64Array,
  piece: LinearPiece | undefined,
  state: ServerSystemState,
): Float64Array {
  out[0] = piece ? 1 : 0;
  out[1] = piece?.p0 ?? 0;
  out[2] = piece?.p1 ?? 0;
  out[3] = piece?.sec0 ?? 0;
  out[4] = piece?.ns0 ?? 0;
  out[5] = piece?.rate ?? 1;
  out[6] = state.leap;
  out[7] = state.stratum;
  out[8] = state.precision;
  out[9] = state.referenceId >>> 0;
  out[10] = state.referenceTimestamp.seconds >>> 0;
  out[11] = state.referenceTimestamp.fraction >>> 0;
  out[12] = state.rootDelayS;
  out[13] = state.rootDispersionS;
  out[14] = state.dispersionRateS ?? PHI;
  out[15] = state.updatedAtMs;
  return out;
}

/**
 * [rateLimitEnabled, averageIntervalS, burst, kodIntervalS, maxClients, ipv6PrefixBits]. The C table (and
 * so the client log) is kept whenever there is a limiter (maxClients > 0); rateLimitEnabled only controls
 * the decision.
 */
export function policyArray(policy: ResponderPolicy): Float64Array {
  const o = policy.rateLimiter?.options;
  return Float64Array.of(
    o ? (o.enabled === false ? 0 : 1) : 0,
    o?.averageIntervalS ?? 1,
    o?.burst ?? 1,
    o?.kodIntervalS ?? 0,
    o?.maxClients ?? 0,
    o?.ipv6PrefixBits ?? 64,
  );
}

/** The allowed networks as 18-byte records: family (4|6), prefix length, 16 address bytes. */
export function networksArray(policy: ResponderPolicy): Uint8Array {
  const nets = policy.access?.networks ?? [];
  const out = new Uint8Array(nets.length * 18);
  nets.forEach((n, i) => {
    const o = i * 18;
    out[o + 1] = n.prefix;
    if (n.family === 'ipv4') {
      out[o] = 4;
      n.address.split('.').forEach((b, k) => (out[o + 2 + k] = Number(b)));
    } else {
      out[o] = 6;
      const groups = expandIpv6(n.address) ?? [];
      groups.forEach((g, k) => {
        out[o + 2 + 2 * k] = g >>> 8;
        out[o + 3 + 2 * k] = g & 0xff;
      });
    }
  });
  return out;
}

/** The native thread's counters, in the order stats() fills them (native/mmsg.c, the ST_ enum). */
export const NATIVE_STATS = [
  'requests',
  'responses',
  'kodRate',
  'kodDeny',
  'sendErrors',
  ...DROP_REASONS, // in OUTCOME order, as the C enum
  'overload',
  'forwarded',
  'kernelReplaced',
  'batches',
  'datagrams',
  'largest',
  'ntsAuthentic',
] as const;

/**
 * CLOCK_MONOTONIC in ns at which performance.now() reads 0: the native thread reads the monotonic clock
 * itself and puts it on the scale of the served clock's pieces with this. process.hrtime.bigint() is the
 * same clock (libuv's uv_hrtime); the narrowest of 32 brackets wins (normally well under a microsecond).
 */
export function perfOriginNs(): bigint {
  let best = 0n;
  let width = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 32; i++) {
    const a = process.hrtime.bigint();
    const p = performance.now();
    const b = process.hrtime.bigint();
    const w = Number(b - a);
    if (w < width) {
      width = w;
      best = (a + b) / 2n - BigInt(Math.round(p * 1e6));
    }
  }
  return best;
}
