import {
  EndHistory,
  assess,
  type EndRole,
  type HistoryPoint,
  type LinkAssessment,
  type LinkSample,
} from './link-health.ts';

/**
 * The broker's health history: per session and stream, each end's reports of the last 10 minutes
 * (bounded, link-health.ts), the assessment over 10 s and 60 s, and the alarms' state. An alarm is raised
 * when drops start or the receiver's margin falls below the 4 × RTT rule, and cleared when the 10 s window
 * is clean again; each change is one event (README "Health", docs/health.md "Alarms"). Memory only, like
 * the rest of the health (a restart starts an empty history).
 */
export type AlarmKind = 'drops' | 'margin';

export interface HealthAlarm {
  session: string;
  stream: string;
  alarm: AlarmKind;
  active: boolean;
  /** Plain words for the operator (the first matching advice line, or "cleared"). */
  message: string;
  /** Unix epoch ms. */
  at: number;
}

interface Link {
  ends: Partial<Record<EndRole, EndHistory>>;
  alarms: Record<AlarmKind, boolean>;
}

export interface LinkHealthView {
  stream: string;
  assessment: LinkAssessment | null;
  history: Partial<Record<EndRole, HistoryPoint[]>>;
}

export class HealthMonitor {
  readonly #links = new Map<string, Map<string, Link>>();

  #link(session: string, stream: string): Link {
    let streams = this.#links.get(session);
    if (!streams) {
      streams = new Map();
      this.#links.set(session, streams);
    }
    let link = streams.get(stream);
    if (!link) {
      link = { ends: {}, alarms: { drops: false, margin: false } };
      streams.set(stream, link);
    }
    return link;
  }

  /**
   * Records one end's report and returns the alarm changes it caused. `latency` is the session's (fixed at
   * creation), used when the receiver did not report its own.
   */
  record(session: string, stream: string, role: EndRole, sample: LinkSample, latency: number): HealthAlarm[] {
    const link = this.#link(session, stream);
    (link.ends[role] ??= new EndHistory()).push(sample);
    // Alarms, like the windowed verdict, come from reports with counters (docs/health.md): a client that
    // sends only the spec's fields is classified report by report, as the spec says.
    const a = sample.counts ? assess(link.ends, sample.at, latency) : null;
    if (!a) return [];
    const out: HealthAlarm[] = [];
    for (const kind of ['drops', 'margin'] as const) {
      if (a.alarms[kind] === link.alarms[kind]) continue;
      link.alarms[kind] = a.alarms[kind];
      const words = kind === 'drops' ? /too late to play/ : /Latency \d+ ms is below/;
      out.push({
        session,
        stream,
        alarm: kind,
        active: a.alarms[kind],
        message: a.alarms[kind]
          ? (a.advice.find((l) => words.test(l)) ?? kind)
          : kind === 'drops'
            ? 'Drops stopped: none in the last 10 s.'
            : 'The latency covers 4 × RTT again.',
        at: sample.wall,
      });
    }
    return out;
  }

  assess(session: string, stream: string, now: number, latency: number): LinkAssessment | null {
    const link = this.#links.get(session)?.get(stream);
    return link ? assess(link.ends, now, latency) : null;
  }

  /** The stream's assessment and its 10-minute history per end, for the API and the console's graph. */
  view(session: string, stream: string, now: number, latency: number): LinkHealthView {
    const link = this.#links.get(session)?.get(stream);
    const history: LinkHealthView['history'] = {};
    for (const role of ['sender', 'receiver'] as const) {
      const h = link?.ends[role];
      if (h) history[role] = h.points(now);
    }
    return { stream, assessment: link ? assess(link.ends, now, latency) : null, history };
  }

  /** Forget a closed session. */
  drop(session: string): void {
    this.#links.delete(session);
  }
}
