import { performance } from 'node:perf_hooks';
import { PHI } from '../protocol/ntp-packet.ts';
import {
  DROP_REASONS,
  OUTCOME,
  type ServerSystemState,
  type ResponderPolicy,
} from '../domain/ntp-responder.ts';
import { expandIpv6 } from '../domain/ip-address.ts';
import type { LinearPiece } from './served-clock.ts';

/**
 * The arrays the native responder (native/mmsg.c startNative, setServed, stats; docs/performance.md
 * "Native responder") is handed: what it serves, its policy, and the order of its counters. The arrays are
 * positional; their layouts are named here and, once, in native/mmsg.c (SERVED_LAYOUT, POLICY_LAYOUT,
 * STATS_LAYOUT) and native/ntp-fast.h (NF_OUTCOMES). The addon's layout() returns its names and codes, and
 * `layoutMismatch` refuses an addon whose layout differs from these (a build older than the sources).
 */

/** The served array, by field (native/mmsg.c SERVED_LAYOUT). */
export const SERVED_LAYOUT = [
  'valid',
  'p0',
  'p1',
  'sec0',
  'ns0',
  'rate',
  'leap',
  'stratum',
  'precision',
  'referenceId',
  'referenceSeconds',
  'referenceFraction',
  'rootDelayS',
  'rootDispersionS',
  'dispersionRateS',
  'updatedAtMs',
] as const;

/** The policy array, by field (native/mmsg.c POLICY_LAYOUT). */
export const POLICY_LAYOUT = [
  'rateLimitEnabled',
  'averageIntervalS',
  'burst',
  'kodIntervalS',
  'maxClients',
  'ipv6PrefixBits',
] as const;

/** Fields of the served array. */
export const SERVED_FIELDS = SERVED_LAYOUT.length;

type Fields<L extends readonly string[]> = Record<L[number], number>;

/** `values` in `layout` order. */
function ordered<L extends readonly string[]>(out: Float64Array, layout: L, values: Fields<L>): Float64Array {
  layout.forEach((name: L[number], i) => (out[i] = values[name]));
  return out;
}

/**
 * The served array: the piece of the served clock (undefined: none, the native side then answers nothing
 * itself) and the reply fields of `state`.
 */
export function servedArray(
  out: Float64Array,
  piece: LinearPiece | undefined,
  state: ServerSystemState,
): Float64Array {
  return ordered(out, SERVED_LAYOUT, {
    valid: piece ? 1 : 0,
    p0: piece?.p0 ?? 0,
    p1: piece?.p1 ?? 0,
    sec0: piece?.sec0 ?? 0,
    ns0: piece?.ns0 ?? 0,
    rate: piece?.rate ?? 1,
    leap: state.leap,
    stratum: state.stratum,
    precision: state.precision,
    referenceId: state.referenceId >>> 0,
    referenceSeconds: state.referenceTimestamp.seconds >>> 0,
    referenceFraction: state.referenceTimestamp.fraction >>> 0,
    rootDelayS: state.rootDelayS,
    rootDispersionS: state.rootDispersionS,
    dispersionRateS: state.dispersionRateS ?? PHI,
    updatedAtMs: state.updatedAtMs,
  });
}

/**
 * The policy array. The C table (and so the client log) is kept whenever there is a limiter
 * (maxClients > 0); rateLimitEnabled only controls the decision.
 */
export function policyArray(policy: ResponderPolicy): Float64Array {
  const o = policy.rateLimiter?.options;
  return ordered(new Float64Array(POLICY_LAYOUT.length), POLICY_LAYOUT, {
    rateLimitEnabled: o ? (o.enabled === false ? 0 : 1) : 0,
    averageIntervalS: o?.averageIntervalS ?? 1,
    burst: o?.burst ?? 1,
    kodIntervalS: o?.kodIntervalS ?? 0,
    maxClients: o?.maxClients ?? 0,
    ipv6PrefixBits: o?.ipv6PrefixBits ?? 64,
  });
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

/** The native thread's counters, in the order stats() fills them (native/mmsg.c STATS_LAYOUT). */
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

/** What an ntp_mmsg build says of its arrays and outcome codes (native/mmsg.c layout()). */
export interface NativeLayout {
  served: readonly string[];
  policy: readonly string[];
  stats: readonly string[];
  outcomes: Readonly<Record<string, number>>;
}

/**
 * Why an addon whose layout() answered `layout` cannot be used with these sources, or undefined when it
 * agrees on every array and outcome code. An addon without layout() is a build older than it.
 */
export function layoutMismatch(layout: NativeLayout | undefined): string | undefined {
  if (layout === undefined) return 'it has no layout() (a build older than the sources)';
  const arrays: [string, readonly string[], readonly string[]][] = [
    ['served', SERVED_LAYOUT, layout.served],
    ['policy', POLICY_LAYOUT, layout.policy],
    ['stats', NATIVE_STATS, layout.stats],
  ];
  for (const [name, ours, theirs] of arrays) {
    if (ours.join(',') !== theirs.join(','))
      return `its ${name} array is [${theirs.join(', ')}], the sources expect [${ours.join(', ')}]`;
  }
  const ours = Object.entries(OUTCOME).map(([k, v]) => `${k}=${v}`);
  const theirs = Object.entries(layout.outcomes).map(([k, v]) => `${k}=${v}`);
  if (ours.sort().join(',') !== theirs.sort().join(','))
    return `its outcome codes are ${theirs.join(', ')}, the sources expect ${ours.join(', ')}`;
  return undefined;
}

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
