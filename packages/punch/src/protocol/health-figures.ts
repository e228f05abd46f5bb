/**
 * The figures of a link's health as the `health_report` message carries them (docs/health.md): each end's
 * figures over 10 s and 60 s and the alarm state. The wire owns their shape; domain/link-health.ts computes
 * them.
 */
export type EndRole = 'sender' | 'receiver';

/** Figures of one end over one window. */
export interface WindowFigures {
  windowS: number;
  /** Reports in the window. */
  reports: number;
  rtt: { min: number; avg: number; max: number };
  /** Packets lost before ARQ, percent of the packets the sender sent (null: no counters). */
  lossPct: number | null;
  /** Retransmitted packets, percent of all packets sent or received. */
  retransmitPct: number;
  /** Packets dropped too late to play (receiver) or never sent in time (sender). */
  dropped: number;
  /** Average bit rate, bits/s. */
  bitrate: number;
  /** Receiver only: its latency, the time the RTT rule needs, and what is left (docs/health.md "Margin"). */
  latency: number | null;
  needMs: number | null;
  marginMs: number | null;
}

/** Each end's figures over the two windows (docs/health.md "Figures"), by role. */
export type LinkFigures = Partial<Record<EndRole, { w10: WindowFigures; w60: WindowFigures }>>;

/** Which alarms are raised (docs/health.md "Alarms"). */
export interface LinkAlarms {
  drops: boolean;
  margin: boolean;
}
