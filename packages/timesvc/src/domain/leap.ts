/**
 * Leap seconds (docs/leap-seconds.md): where a pending leap comes from, when it is announced, and how the
 * served clock passes it.
 *
 * - RFC 5905 §7.3: the leap indicator (LI) of a reply warns of a leap second at the end of the current day
 *   (1: the last minute has 61 seconds, 2: 59 seconds); the NTP timescale itself has no 23:59:60: an
 *   insertion repeats the second, a deletion skips 23:59:59.
 * - RFC 8633 §3.7 (NTP BCP): servers should take leap information from a trusted source such as the IERS
 *   leap-seconds list; upstream leap bits are voted on rather than believed from a single server.
 * - ITU-R TF.460-6 §2.2: a leap second is inserted or deleted at the end of a UTC month, by preference
 *   June or December; IERS Bulletin C announces it months ahead.
 */

/** Seconds between the NTP era-0 epoch (1900) and the Unix epoch (1970). */
const NTP_UNIX_OFFSET_S = 2_208_988_800;
export const DAY_MS = 86_400_000;

export type LeapMode = 'step' | 'smear';

/** A leap second to pass: at `epochUnixMs` (the first instant after it, a UTC midnight), `deltaS` −1 or +1. */
export interface PendingLeap {
  epochUnixMs: number;
  /** What served time does at the leap: −1 (insertion: the second is repeated) or +1 (deletion). */
  deltaS: -1 | 1;
  source: 'sources' | 'list';
}

/** The UTC month last asked about, [from, to): the leap plan asks every second (leap-schedule.ts). */
let monthFromMs = Number.POSITIVE_INFINITY;
let monthToMs = Number.NEGATIVE_INFINITY;

/** The start of the next UTC month after `unixMs`: the only instants a leap second may end at. */
export function nextMonthStartUnixMs(unixMs: number): number {
  if (unixMs >= monthFromMs && unixMs < monthToMs) return monthToMs;
  const d = new Date(unixMs);
  const from = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const to = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  if (Number.isFinite(from) && Number.isFinite(to)) {
    monthFromMs = from;
    monthToMs = to;
  }
  return to;
}

/**
 * The majority vote on the leap bits of the selected sources (as chrony and ntpd do): an insertion or
 * deletion only when more than half of them announce it. LI 3 (unsynchronised) counts as no leap.
 */
export function voteLeap(indicators: readonly number[]): -1 | 0 | 1 {
  const n = indicators.length;
  if (n === 0) return 0;
  const ins = indicators.filter((li) => li === 1).length;
  const del = indicators.filter((li) => li === 2).length;
  if (ins * 2 > n) return -1;
  if (del * 2 > n) return 1;
  return 0;
}

export interface LeapSecondsList {
  /** Unix ms after which the list must not be trusted (its `#@` line). */
  expiresUnixMs: number;
  /** Unix ms of the last update (`#$`), if given. */
  updatedUnixMs: number | undefined;
  /** Each entry: from `atUnixMs` on, TAI − UTC is `taiUtc` seconds. */
  entries: { atUnixMs: number; taiUtc: number }[];
}

/** Largest list accepted, bytes (the IERS file is about 10 kB). */
export const LEAP_LIST_MAX_BYTES = 256 * 1024;

/**
 * Parse the IERS/NIST `leap-seconds.list` format (as Debian's tzdata ships it in
 * /usr/share/zoneinfo/leap-seconds.list): data lines "<NTP seconds> <TAI−UTC>", `#$` last update and
 * `#@` expiry in NTP seconds, other `#` lines comments. Throws on anything else.
 */
export function parseLeapSecondsList(text: string): LeapSecondsList {
  if (text.length > LEAP_LIST_MAX_BYTES) throw new Error('leap-seconds list too large');
  let expires: number | undefined;
  let updated: number | undefined;
  const entries: LeapSecondsList['entries'] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    const ntpField = (s: string): number => {
      if (!/^\d{1,12}$/.test(s)) throw new Error(`leap-seconds list line ${i + 1}: bad NTP time "${s}"`);
      return (Number(s) - NTP_UNIX_OFFSET_S) * 1000;
    };
    if (line.startsWith('#@')) {
      expires = ntpField(line.slice(2).trim());
      return;
    }
    if (line.startsWith('#$')) {
      updated = ntpField(line.slice(2).trim());
      return;
    }
    if (line.startsWith('#')) return;
    const m = /^(\d{1,12})\s+(\d{1,3})(\s+#.*)?$/.exec(line);
    if (!m) throw new Error(`leap-seconds list line ${i + 1}: not "<NTP seconds> <TAI-UTC>"`);
    const atUnixMs = ntpField(m[1] ?? '');
    const prev = entries[entries.length - 1];
    if (prev && atUnixMs <= prev.atUnixMs) throw new Error(`leap-seconds list line ${i + 1}: not ascending`);
    entries.push({ atUnixMs, taiUtc: Number(m[2]) });
  });
  if (expires === undefined) throw new Error('leap-seconds list has no expiry (#@) line');
  if (entries.length === 0) throw new Error('leap-seconds list has no entries');
  return { expiresUnixMs: expires, updatedUnixMs: updated, entries };
}

/** The next leap second after `nowUnixMs` from the list, or undefined (none announced). */
export function nextListedLeap(list: LeapSecondsList, nowUnixMs: number): PendingLeap | undefined {
  for (let i = 1; i < list.entries.length; i++) {
    const e = list.entries[i];
    const prev = list.entries[i - 1];
    if (!e || !prev || e.atUnixMs <= nowUnixMs) continue;
    const step = e.taiUtc - prev.taiUtc;
    if (step === 1) return { epochUnixMs: e.atUnixMs, deltaS: -1, source: 'list' };
    if (step === -1) return { epochUnixMs: e.atUnixMs, deltaS: 1, source: 'list' };
  }
  return undefined;
}

/**
 * The leap term of the served clock at monotonic `tMs` for a leap at monotonic `atMs`: in step mode the
 * full second from the leap instant on; in smear mode a linear ramp over `smearMs` centred on it.
 */
export function leapTerm(tMs: number, atMs: number, deltaS: number, smearMs: number): number {
  if (smearMs <= 0) return tMs >= atMs ? deltaS : 0;
  const f = (tMs - (atMs - smearMs / 2)) / smearMs;
  return deltaS * Math.min(1, Math.max(0, f));
}
