import { classifyHealth, suggestedLatency } from './health.ts';
import type { EndRole, LinkAlarms, LinkFigures, WindowFigures } from '../protocol/health-figures.ts';
import type { HealthStatus } from '../protocol/ws-messages.ts';

export type { EndRole, WindowFigures } from '../protocol/health-figures.ts';

/**
 * One link's health over time, from the `health` reports of its two ends (README "Health"). Pure: samples
 * in, figures out; the caller passes the monotonic time. What the figures mean, and where each counter
 * comes from in srt-live-transmit's statistics, is in docs/health.md.
 */

/** One end's report, as kept: the spec's fields plus the interval counters an agent adds. */
export interface LinkSample {
  /** Monotonic ms of arrival (windows) and Unix epoch ms (shown). */
  at: number;
  wall: number;
  /** Smoothed RTT, ms (libsrt `msRTT`). */
  rtt: number;
  /** Retransmit share as the peer computed it, percent (used when it sent no counters). */
  retransmit: number;
  bitrate: number;
  /** Counters over the report's interval (undefined: a client that sends only the spec's fields). */
  counts: LinkCounts | undefined;
  /** Drops since the previous report (the spec's `dropped`). */
  dropped: number;
  /** The receiver's TSBPD latency, ms (libsrt `msRcvTsbPdDelay`); undefined for a sender. */
  latency: number | undefined;
}

/** Interval counters (docs/health.md "Counters"): packets incl. retransmissions, unique, lost, retransmitted. */
export interface LinkCounts {
  packets: number;
  unique: number;
  lost: number;
  retransmitted: number;
}

/** One point of the graph: one report of one end. */
export interface HistoryPoint {
  /** Unix epoch ms. */
  t: number;
  rtt: number;
  lossPct: number | null;
  retransmitPct: number;
  dropped: number;
  bitrate: number;
  marginMs: number | null;
}

export const WINDOWS_MS = [10_000, 60_000] as const;
/** How long the history is kept (the console's graph spans it). */
export const HISTORY_MS = 600_000;
/** At most this many reports per end (10 minutes at one report a second, twice over). */
export const MAX_SAMPLES = 1200;

const round1 = (n: number): number => Math.round(n * 10) / 10;
/** RTTs keep libsrt's precision (ms with three decimals): a LAN's RTT is well below 0.1 ms. */
const round3 = (n: number): number => Math.round(n * 1000) / 1000;
const pct = (part: number, whole: number): number => (whole > 0 ? Math.min(100, (100 * part) / whole) : 0);

function lossOf(c: LinkCounts, dropped: number): number {
  // The sender sent `unique` originals that arrived in time, plus those dropped as too late.
  return pct(c.lost, c.unique + dropped);
}

/** Receiver's margin: latency minus (4 × RTT + the RTT's swing), docs/health.md "Margin". */
export function marginOf(
  latency: number,
  rttAvg: number,
  jitter: number,
): { needMs: number; marginMs: number } {
  const needMs = round1(4 * rttAvg + jitter);
  return { needMs, marginMs: round1(latency - needMs) };
}

/** A bounded, time-ordered list of one end's reports. */
export class EndHistory {
  readonly #samples: LinkSample[] = [];

  push(s: LinkSample): void {
    this.#samples.push(s);
    if (this.#samples.length > MAX_SAMPLES) this.#samples.splice(0, this.#samples.length - MAX_SAMPLES);
    this.prune(s.at);
  }

  prune(now: number): void {
    let cut = 0;
    while (cut < this.#samples.length && now - (this.#samples[cut]?.at ?? now) > HISTORY_MS) cut++;
    if (cut > 0) this.#samples.splice(0, cut);
  }

  get size(): number {
    return this.#samples.length;
  }

  latest(): LinkSample | undefined {
    return this.#samples.at(-1);
  }

  /** Figures over the last `windowMs` before `now`; null when no report falls in it. */
  figures(now: number, windowMs: number): WindowFigures | null {
    const inWindow = this.#samples.filter((s) => now - s.at <= windowMs && s.at <= now);
    if (inWindow.length === 0) return null;
    const rtts = inWindow.map((s) => s.rtt);
    const rttAvg = rtts.reduce((a, b) => a + b, 0) / rtts.length;
    const rttMin = Math.min(...rtts);
    const rttMax = Math.max(...rtts);
    const dropped = inWindow.reduce((a, s) => a + s.dropped, 0);
    const counted = inWindow.filter((s) => s.counts !== undefined);
    let lossPct: number | null = null;
    let retransmitPct = inWindow.reduce((a, s) => a + s.retransmit, 0) / inWindow.length;
    if (counted.length > 0) {
      const sum = { packets: 0, unique: 0, lost: 0, retransmitted: 0 };
      let countedDrops = 0;
      for (const s of counted) {
        const c = s.counts as LinkCounts;
        sum.packets += c.packets;
        sum.unique += c.unique;
        sum.lost += c.lost;
        sum.retransmitted += c.retransmitted;
        countedDrops += s.dropped;
      }
      lossPct = round1(lossOf(sum, countedDrops));
      retransmitPct = pct(sum.retransmitted, sum.packets);
    }
    const latest = inWindow[inWindow.length - 1] as LinkSample;
    const latency = latest.latency ?? null;
    const margin = latency === null ? null : marginOf(latency, rttAvg, rttMax - rttMin);
    return {
      windowS: windowMs / 1000,
      reports: inWindow.length,
      rtt: { min: round3(rttMin), avg: round3(rttAvg), max: round3(rttMax) },
      lossPct,
      retransmitPct: round1(retransmitPct),
      dropped,
      bitrate: Math.round(inWindow.reduce((a, s) => a + s.bitrate, 0) / inWindow.length),
      latency,
      needMs: margin?.needMs ?? null,
      marginMs: margin?.marginMs ?? null,
    };
  }

  /** The graph's points from `now - HISTORY_MS` on, oldest first. */
  points(now: number): HistoryPoint[] {
    return this.#samples
      .filter((s) => now - s.at <= HISTORY_MS)
      .map((s) => ({
        t: s.wall,
        rtt: round3(s.rtt),
        lossPct: s.counts ? round1(lossOf(s.counts, s.dropped)) : null,
        retransmitPct: round1(s.counts ? pct(s.counts.retransmitted, s.counts.packets) : s.retransmit),
        dropped: s.dropped,
        bitrate: s.bitrate,
        marginMs: s.latency === undefined ? null : marginOf(s.latency, s.rtt, 0).marginMs,
      }));
  }
}

/** Both ends' figures over both windows, the verdict and the advice. */
export interface LinkAssessment {
  status: HealthStatus;
  /** The figures the verdict was taken from (10 s window): RTT average and the retransmit figure. */
  rtt: number;
  retransmit: number;
  suggestedLatency: number;
  ends: LinkFigures;
  alarms: LinkAlarms;
  advice: string[];
}

/**
 * The verdict (spec "Health status thresholds", worse band wins, README "Health"): RTT = the 10 s average
 * RTT; the retransmit figure = the receiver's larger of loss before ARQ and retransmit share over 10 s (the
 * share of packets the link needed to repair; the sender's share when the receiver sent no report).
 * `sessionLatency` is the latency fixed when the session was created.
 */
export function assess(
  ends: Partial<Record<EndRole, EndHistory>>,
  now: number,
  sessionLatency: number,
): LinkAssessment | null {
  const figures: LinkAssessment['ends'] = {};
  for (const role of ['sender', 'receiver'] as const) {
    const h = ends[role];
    const w10 = h?.figures(now, WINDOWS_MS[0]);
    const w60 = h?.figures(now, WINDOWS_MS[1]);
    if (w10 && w60) figures[role] = { w10, w60 };
  }
  const main = figures.receiver?.w10 ?? figures.sender?.w10;
  if (!main) return null;
  const rx = figures.receiver?.w10;
  const retransmit = rx ? Math.max(rx.lossPct ?? 0, rx.retransmitPct) : main.retransmitPct;
  const rtt = main.rtt.avg;
  const status = classifyHealth(rtt, retransmit);
  const dropped = rx?.dropped ?? 0;
  const latency = rx?.latency ?? sessionLatency;
  const margin = marginOf(latency, rtt, main.rtt.max - main.rtt.min);
  const alarms = { drops: dropped > 0, margin: margin.marginMs < 0 };
  const suggested = suggestedLatency(margin.needMs / 4);
  return {
    status,
    rtt,
    retransmit: round1(retransmit),
    suggestedLatency: suggested,
    ends: figures,
    alarms,
    advice: adviceFor({ status, rtt, retransmit, dropped, latency, ...margin, suggested }),
  };
}

/**
 * Advice an operator can act on. The latency of a session is fixed when it is created (spec: one latency
 * per session, both ends must use the same value), so it is never "raise the latency": the way to a larger
 * latency is a new session, and what can change on a running link is the bitrate and the path.
 */
export function adviceFor(f: {
  status: HealthStatus;
  rtt: number;
  retransmit: number;
  dropped: number;
  latency: number;
  needMs: number;
  marginMs: number;
  suggested: number;
}): string[] {
  const out: string[] = [];
  if (f.dropped > 0) {
    out.push(
      `${f.dropped} packets arrived too late to play in the last 10 s: the picture or sound glitched. ` +
        'Lower the encoder bitrate or move the sender to a steadier connection (wired rather than Wi-Fi or cellular).',
    );
  }
  if (f.marginMs < 0) {
    out.push(
      `Latency ${f.latency} ms is below 4 × RTT plus its swing (${f.needMs} ms needed). The latency is fixed for ` +
        `this session: for a safe link, create a new session with latency ${f.suggested} ms or more and give both ` +
        'ends its links; until then expect drops when packets are lost.',
    );
  }
  if (f.retransmit > 5) {
    out.push(
      `The link repairs ${f.retransmit.toFixed(1)} % of its packets (critical above 5 %). Lower the encoder ` +
        'bitrate, or move the sender to another uplink; check for a saturated line or a weak radio link.',
    );
  } else if (f.retransmit >= 1) {
    out.push(
      `The link repairs ${f.retransmit.toFixed(1)} % of its packets (warning from 1 %); SRT recovers them ` +
        `within the latency (${Math.max(0, f.marginMs)} ms to spare). Watch for drops; a lower bitrate reduces the risk.`,
    );
  }
  if (f.rtt > 200) {
    out.push(
      `RTT ${f.rtt} ms is above 200 ms (critical): a shorter network path (another uplink or provider) would help.`,
    );
  } else if (f.rtt >= 100) out.push(`RTT ${f.rtt} ms is in the warning band (100-200 ms).`);
  if (out.length === 0) {
    out.push(
      `Healthy: latency ${f.latency} ms covers 4 × RTT (${f.rtt} ms) with ${f.marginMs} ms to spare; ` +
        `${f.retransmit.toFixed(1)} % repaired, no drops.`,
    );
  }
  return out;
}
