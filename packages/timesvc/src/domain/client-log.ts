import { ipv6Text } from './ip-address.ts';

/**
 * The per-client log of the NTP server (chronyc `clients`, docs/cli.md "clients"), kept in the rate
 * limiter's bounded table (rate-limiter.ts; native/ntp-fast.c keeps the same fields with the same
 * arithmetic). The average interval follows chrony's clientlog.c (`update_record`, `get_interval`): times
 * in 1/16 s, the interval as a log2 scaled by 4, rounded, and a rough exponential moving average of it;
 * a second average (chrony's IntL) is updated instead when the client's previous request was dropped.
 */

/** clientlog.c: TS_FRAC, RATE_SCALE, MIN_RATE, INVALID_RATE. */
const TS_PER_S = 16;
const RATE_SCALE = 4;
const MIN_RATE = -14 * RATE_SCALE;
export const INVALID_RATE = -128;

export interface ClientLogEntry {
  hits: number;
  drops: number;
  kodRate: number;
  kodDeny: number;
  /** Time of the last request in 1/16 s of the monotonic clock; -1 before the first. */
  lastTs: number;
  /** chrony's rate: −4·log2 of the average interval between requests; INVALID_RATE before two. */
  rate: number;
  /** The same, over requests that followed a dropped one (chrony's ntp_timeout_rate, IntL). */
  timeoutRate: number;
  /** The previous request was dropped by the rate limiter. */
  dropped: boolean;
}

/** What GET /api/clients reports per client (snake_case, as the other routes). */
export interface ClientLogRecord {
  address: string;
  ntp_packets: number;
  dropped: number;
  kod_rate: number;
  kod_deny: number;
  /** chronyc's Int: log2 of the average interval in seconds, rounded; null before two requests. */
  interval_log2: number | null;
  /** chronyc's IntL. */
  interval_limited_log2: number | null;
  /** chronyc's Last: whole seconds since the last request. */
  last_rx_ago_s: number;
}

export function newLogEntry(): ClientLogEntry {
  return {
    hits: 0,
    drops: 0,
    kodRate: 0,
    kodDeny: 0,
    lastTs: -1,
    rate: INVALID_RATE,
    timeoutRate: INVALID_RATE,
    dropped: false,
  };
}

/** The log's clock: monotonic ms in 1/16 s (the C side computes floor(now_ms * 16.0 / 1000.0)). */
export function logTs(nowMs: number): number {
  return Math.floor((nowMs * TS_PER_S) / 1000);
}

/** clientlog.c update_record's interval: the scaled log2 of `interval` (1/16 s), rounded. */
function scaledLog2(interval: number): number {
  if (interval === 0) return -RATE_SCALE * 5;
  let v = interval + Math.floor(interval / 2);
  let interval2 = -RATE_SCALE * 4;
  for (; interval2 < -MIN_RATE; interval2 += RATE_SCALE) {
    if (v <= 1) break;
    v = Math.floor(v / 2);
  }
  return interval2;
}

/** clientlog.c update_record's moving average of the rate; C's integer division truncates. */
function averaged(rate: number, interval2: number): number {
  if (rate === INVALID_RATE) return -interval2;
  if (rate < -interval2) return rate + 1;
  if (rate > -interval2) {
    if (rate > (RATE_SCALE * 5) / 2 - interval2) return (RATE_SCALE * 5) / 2 - interval2;
    return Math.trunc((rate - interval2 - 1) / 2);
  }
  return rate;
}

/** Log one request and the limiter's decision about it; `denied`: refused by the access list. */
export function logRequest(
  e: ClientLogEntry,
  nowMs: number,
  decision: 'allow' | 'kod' | 'drop',
  denied: boolean,
): void {
  const now = logTs(nowMs);
  const prev = e.lastTs;
  e.lastTs = now;
  e.hits++;
  if (prev >= 0 && now >= prev) {
    const interval2 = scaledLog2(now - prev);
    if (e.dropped) e.timeoutRate = averaged(e.timeoutRate, interval2);
    else e.rate = averaged(e.rate, interval2);
  }
  e.dropped = decision === 'drop';
  if (decision === 'drop') e.drops++;
  else if (decision === 'kod') e.kodRate++;
  else if (denied) e.kodDeny++;
}

/** clientlog.c get_interval: the rate as a rounded log2 interval in seconds, null when not known. */
export function intervalLog2(rate: number): number | null {
  if (rate === INVALID_RATE) return null;
  const r = rate + (rate > 0 ? RATE_SCALE / 2 : -RATE_SCALE / 2);
  return Math.trunc(r / -RATE_SCALE) + 0;
}

export function reportEntry(address: string, e: ClientLogEntry, nowMs: number): ClientLogRecord {
  return {
    address,
    ntp_packets: e.hits,
    dropped: e.drops,
    kod_rate: e.kodRate,
    kod_deny: e.kodDeny,
    interval_log2: intervalLog2(e.rate),
    interval_limited_log2: intervalLog2(e.timeoutRate),
    last_rx_ago_s: e.lastTs < 0 ? 0 : Math.max(0, Math.floor((logTs(nowMs) - e.lastTs) / TS_PER_S)),
  };
}

/** One client of a log as its table holds it: the key as text and the entry. */
export interface LoggedClient {
  address: string;
  entry: ClientLogEntry;
}

/**
 * The report of one or more logs (one per socket on the native path), most recently seen first, at most
 * `max`: a client in several logs is merged (counts summed, the intervals of the latest).
 */
export function reportClients(logs: readonly LoggedClient[], nowMs: number, max: number): ClientLogRecord[] {
  const merged = new Map<string, ClientLogEntry>();
  for (const { address, entry } of logs) {
    const m = merged.get(address);
    if (m === undefined) {
      merged.set(address, { ...entry });
      continue;
    }
    m.hits += entry.hits;
    m.drops += entry.drops;
    m.kodRate += entry.kodRate;
    m.kodDeny += entry.kodDeny;
    if (entry.lastTs > m.lastTs) {
      m.lastTs = entry.lastTs;
      m.rate = entry.rate;
      m.timeoutRate = entry.timeoutRate;
      m.dropped = entry.dropped;
    }
  }
  return [...merged]
    .sort((a, b) => b[1].lastTs - a[1].lastTs)
    .slice(0, max)
    .map(([address, e]) => reportEntry(address, e, nowMs));
}

/** An IPv6 prefix key's text: the 16 bytes `at(0..15)` in RFC 5952 form and `/bits`. */
export function ipv6KeyText(at: (i: number) => number, bits: number): string {
  const bytes = Uint8Array.from({ length: 16 }, (_, i) => at(i));
  return `${ipv6Text(bytes, 0)}/${Math.max(0, Math.min(128, bits))}`;
}

/** The native log's flat form (native/mmsg.c clients(): 17-byte keys, 7 numbers each) as LoggedClients. */
export function nativeClients(
  keys: Uint8Array,
  nums: Float64Array,
  count: number,
  bits: number,
): LoggedClient[] {
  const out: LoggedClient[] = [];
  for (let i = 0; i < count; i++) {
    const k = i * 17;
    const address =
      keys[k] === 4
        ? [keys[k + 1], keys[k + 2], keys[k + 3], keys[k + 4]].join('.')
        : ipv6KeyText((j) => keys[k + 1 + j] ?? 0, bits);
    const n = nums.subarray(i * 7, i * 7 + 7);
    out.push({
      address,
      entry: {
        hits: n[0] ?? 0,
        drops: n[1] ?? 0,
        kodRate: n[2] ?? 0,
        kodDeny: n[3] ?? 0,
        lastTs: n[4] ?? -1,
        rate: n[5] ?? INVALID_RATE,
        timeoutRate: n[6] ?? INVALID_RATE,
        dropped: false,
      },
    });
  }
  return out;
}
