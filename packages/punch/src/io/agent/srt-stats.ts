/**
 * srt-live-transmit's JSON statistics (`-pf:json`), one object per line, as the agent reads them
 * (docs/agent.md). Pure: a line in, a health sample or nothing out. The tool prints a report every N
 * packets (`-s:N` counts packets, not seconds), so the agent keeps the latest sample and reports it on its
 * own timer. Field names are those of libsrt's `srt_bstats` as srt-live-transmit prints them (`link.rtt` in
 * ms, `send`/`recv` packet counters, `mbitRate`, `msBuf`, `msTsbPdDelay`).
 */
export interface SrtSample {
  rtt: number;
  /** Retransmitted packets as a percentage of packets sent (sender) or received (receiver). */
  retransmit: number;
  /** Bits per second. */
  bitrate: number;
  /** Receive buffer fullness, percent of the TSBPD latency (receiver), 0 for a sender. */
  buffer: number;
  /**
   * The report's own counters. Without `-f` srt-live-transmit clears them at every report
   * (`srt_bstats(…, clear)` in apps/transmitmedia.cpp), so each report covers the packets since the last.
   */
  packets: number;
  unique: number;
  lost: number;
  retransmitted: number;
  dropped: number;
  /** Receiver: `msTsbPdDelay`, the latency in force (ms); undefined for a sender. */
  latency: number | undefined;
}

/** Longest stats line accepted (a report is about 900 bytes). */
export const MAX_STATS_LINE = 8192;

/** Largest counter or figure taken from a report; beyond it the line is not a real report's (sums stay finite). */
const MAX_FIGURE = 2 ** 40;

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? Math.min(MAX_FIGURE, Math.max(-MAX_FIGURE, v)) : 0;
}

function obj(v: unknown): Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

export function parseStatsLine(line: string, role: 'sender' | 'receiver'): SrtSample | undefined {
  const text = line.trim();
  if (!text.startsWith('{') || text.length > MAX_STATS_LINE) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const root = obj(value);
  if (!('link' in root)) return undefined;
  const link = obj(root['link']);
  const dir = obj(role === 'sender' ? root['send'] : root['recv']);
  const packets = num(dir['packets']);
  const retransmitted = num(dir['packetsRetransmitted']);
  const latency = num(dir['msTsbPdDelay']);
  const buffer = role === 'receiver' && latency > 0 ? (num(dir['msBuf']) / latency) * 100 : 0;
  return {
    rtt: Math.max(0, num(link['rtt'])),
    retransmit: packets > 0 ? Math.min(100, (retransmitted / packets) * 100) : 0,
    bitrate: Math.max(0, Math.round(num(dir['mbitRate']) * 1e6)),
    buffer: Math.min(100, Math.max(0, Math.round(buffer * 10) / 10)),
    packets: Math.max(0, packets),
    unique: Math.max(0, num(dir['packetsUnique'])),
    lost: Math.max(0, num(dir['packetsLost'])),
    retransmitted: Math.max(0, retransmitted),
    dropped: Math.max(0, num(dir['packetsDropped'])),
    latency: role === 'receiver' && latency > 0 ? latency : undefined,
  };
}

/** What an agent's `health` carries beyond the spec's fields (docs/health.md "What the agent sends"). */
export interface HealthCounts {
  rtt: number;
  retransmit: number;
  bitrate: number;
  dropped: number;
  packets: number;
  unique: number;
  lost: number;
  retransmitted: number;
  latency: number | undefined;
}

/**
 * Sums the interval reports between two `health` messages, so a report covers every packet of its period
 * (not only the last `-s:N` sample): counters are added, RTT and bit rate are the latest.
 */
export class StatsAccumulator {
  #sum: HealthCounts | undefined;

  add(s: SrtSample): void {
    const p = this.#sum;
    this.#sum = {
      rtt: s.rtt,
      bitrate: s.bitrate,
      latency: s.latency,
      dropped: (p?.dropped ?? 0) + s.dropped,
      packets: (p?.packets ?? 0) + s.packets,
      unique: (p?.unique ?? 0) + s.unique,
      lost: (p?.lost ?? 0) + s.lost,
      retransmitted: (p?.retransmitted ?? 0) + s.retransmitted,
      retransmit: 0,
    };
  }

  /** The period's figures, and a fresh period; undefined when no report arrived since the last take. */
  take(): HealthCounts | undefined {
    const s = this.#sum;
    this.#sum = undefined;
    if (!s) return undefined;
    return { ...s, retransmit: s.packets > 0 ? Math.min(100, (100 * s.retransmitted) / s.packets) : 0 };
  }
}

/**
 * What a line srt-live-transmit writes to stderr says about its link (`-v`; apps/srt-live-transmit.cpp):
 * "SRT source connected" / "SRT target connected" (or "Accepted SRT … connection") when the socket
 * connects, "SRT source disconnected" / "SRT target disconnected" when it breaks (SRTS_BROKEN, for example
 * after the peer idle timeout) or closes, after which the tool keeps running to reconnect. `error` for a
 * line that reports an error without a state; null for everything else. "disconnected" is tested first: it
 * ends in "connected".
 */
export function classifyStderrLine(line: string): 'connected' | 'disconnected' | 'error' | null {
  const text = line.trim();
  if (/\bdisconnected\b|connection .*lost/i.test(text)) return 'disconnected';
  if (/Connecting/i.test(text)) return null;
  if (/SRT (source|target) connected|Accepted SRT (source|target) connection|(^|\s)connected$/i.test(text))
    return 'connected';
  if (/Error/i.test(text)) return 'error';
  return null;
}
