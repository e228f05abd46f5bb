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
  /** Cumulative dropped packets (the agent reports the difference since its last report). */
  droppedTotal: number;
  /** Receive buffer fullness, percent of the TSBPD latency (receiver), 0 for a sender. */
  buffer: number;
}

/** Longest stats line accepted (a report is about 900 bytes). */
export const MAX_STATS_LINE = 8192;

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
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
    droppedTotal: Math.max(0, num(dir['packetsDropped'])),
    buffer: Math.min(100, Math.max(0, Math.round(buffer * 10) / 10)),
  };
}
