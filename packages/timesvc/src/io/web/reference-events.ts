import type { Logger } from '@broadcast-ops/core';
import type { ClockManager } from '../../domain/clock-manager.ts';
import type { ClockSnapshot } from '../../domain/reference-source.ts';
import type { GpsdoProvider } from './providers.ts';

/**
 * Reference-health events (README "Web API: reference-health events"): a source lost or back, the
 * selection changed, holdover started or ended, the served stratum changed, a leap second pending, GPS
 * fix or PPS lost or back. Detected by comparing the state every `intervalMs` (and on every clock event);
 * each event is logged (so it reaches the log ring and stream), handed to listeners (the status stream)
 * and counted (`timesvc_reference_events_total{event}`).
 */
export type ReferenceEventType =
  | 'source_lost'
  | 'source_back'
  | 'selection_changed'
  | 'holdover_started'
  | 'holdover_ended'
  | 'stratum_changed'
  | 'leap_pending'
  | 'leap_cleared'
  | 'gps_fix_lost'
  | 'gps_fix_back'
  | 'pps_lost'
  | 'pps_back';

export const REFERENCE_EVENT_TYPES: readonly ReferenceEventType[] = [
  'source_lost',
  'source_back',
  'selection_changed',
  'holdover_started',
  'holdover_ended',
  'stratum_changed',
  'leap_pending',
  'leap_cleared',
  'gps_fix_lost',
  'gps_fix_back',
  'pps_lost',
  'pps_back',
];

export interface ReferenceEvent {
  type: ReferenceEventType;
  time: string;
  source?: string;
  from?: string | number | null;
  to?: string | number | null;
  message: string;
}

const WARN: ReadonlySet<ReferenceEventType> = new Set([
  'source_lost',
  'holdover_started',
  'gps_fix_lost',
  'pps_lost',
  'leap_pending',
]);

export class ReferenceEventWatcher {
  readonly counts = new Map<ReferenceEventType, number>(REFERENCE_EVENT_TYPES.map((t) => [t, 0]));
  readonly #manager: ClockManager;
  readonly #gpsdo: GpsdoProvider | undefined;
  readonly #logger: Logger;
  readonly #listeners = new Set<(e: ReferenceEvent) => void>();
  readonly #reachable = new Map<string, boolean>();
  #selected: string | undefined;
  #state: string | undefined;
  #stratum: number | undefined;
  #leap = 0;
  #fix: boolean | undefined;
  #pps: boolean | undefined;
  #timer: NodeJS.Timeout | undefined;
  #off: (() => void) | undefined;

  constructor(options: { manager: ClockManager; logger: Logger; gpsdo?: GpsdoProvider | undefined }) {
    this.#manager = options.manager;
    this.#logger = options.logger.child({ component: 'reference' });
    this.#gpsdo = options.gpsdo;
  }

  on(listener: (e: ReferenceEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Check now, on every clock-manager event but 'update', and every `intervalMs`; with `intervalMs` 0
   * the owner calls `check` once a second itself (web-layer.ts, on the service's tick).
   */
  start(intervalMs = 1000): void {
    this.check();
    this.#off = this.#manager.on((e) => {
      if (e.type !== 'update') this.check();
    });
    if (intervalMs <= 0) return;
    this.#timer = setInterval(() => this.check(), intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#off?.();
  }

  /** Compare with the last state (`snap`: the manager's snapshot taken now) and emit what changed. */
  check(snap: ClockSnapshot = this.#manager.snapshot()): void {
    for (const s of snap.sources) {
      const before = this.#reachable.get(s.id);
      if (before === s.usable) continue;
      this.#reachable.set(s.id, s.usable);
      // The first sight of a source is not an event unless it is already lost... which it is at start:
      // a source counts as lost only after it has been usable once.
      if (before === true && !s.usable) {
        this.#emit({ type: 'source_lost', source: s.id, message: `reference ${s.id} lost` });
      } else if (before === false && s.usable) {
        this.#emit({ type: 'source_back', source: s.id, message: `reference ${s.id} usable again` });
      } else if (before === undefined && !s.usable) {
        this.#reachable.set(s.id, false);
      }
    }
    for (const id of [...this.#reachable.keys()]) {
      if (!snap.sources.some((s) => s.id === id)) this.#reachable.delete(id);
    }
    if (snap.selected !== this.#selected) {
      const from = this.#selected ?? null;
      this.#selected = snap.selected;
      this.#emit({
        type: 'selection_changed',
        from,
        to: snap.selected ?? null,
        message: `selected reference: ${from ?? 'none'} -> ${snap.selected ?? 'none'}`,
      });
    }
    const state = snap.state;
    if (state !== this.#state) {
      const prev = this.#state;
      this.#state = state;
      if (state === 'HOLDOVER') {
        this.#emit({ type: 'holdover_started', from: prev ?? null, to: state, message: 'holdover started' });
      } else if (prev === 'HOLDOVER') {
        this.#emit({ type: 'holdover_ended', from: prev, to: state, message: `holdover ended (${state})` });
      }
    }
    if (this.#stratum !== undefined && snap.stratum !== this.#stratum) {
      this.#emit({
        type: 'stratum_changed',
        from: this.#stratum,
        to: snap.stratum,
        message: `served stratum ${this.#stratum} -> ${snap.stratum}`,
      });
    }
    this.#stratum = snap.stratum;
    const leap = this.#manager.serverState.leap;
    const pending = leap === 1 || leap === 2;
    const wasPending = this.#leap === 1 || this.#leap === 2;
    if (pending && !wasPending) {
      this.#emit({
        type: 'leap_pending',
        message: `leap second pending (${leap === 1 ? 'insert' : 'delete'} at the end of the month)`,
      });
    } else if (!pending && wasPending) {
      this.#emit({ type: 'leap_cleared', message: 'leap second no longer pending' });
    }
    this.#leap = leap;
    this.checkSignal();
  }

  /**
   * The GPSDO's fix and PPS alone (time-driven: they lapse without a sentence or an edge): `check` reads
   * them too; the web layer calls this alone on the seconds the clock manager found quiet (web-layer.ts).
   */
  checkSignal(): void {
    const g = this.#gpsdo?.signal ? this.#gpsdo.signal() : this.#gpsdo?.status();
    if (g) {
      if (this.#fix !== undefined && g.fix !== this.#fix) {
        this.#emit({
          type: g.fix ? 'gps_fix_back' : 'gps_fix_lost',
          message: g.fix ? 'GPS fix back' : 'GPS fix lost',
        });
      }
      if (this.#pps !== undefined && g.pps_ok !== this.#pps) {
        this.#emit({ type: g.pps_ok ? 'pps_back' : 'pps_lost', message: g.pps_ok ? 'PPS back' : 'PPS lost' });
      }
      this.#fix = g.fix;
      this.#pps = g.pps_ok;
    }
  }

  #emit(e: Omit<ReferenceEvent, 'time'>): void {
    const event: ReferenceEvent = { ...e, time: new Date().toISOString() };
    this.counts.set(e.type, (this.counts.get(e.type) ?? 0) + 1);
    const fields = { event: e.type, source: e.source, from: e.from, to: e.to };
    if (WARN.has(e.type)) this.#logger.warn(fields, e.message);
    else this.#logger.info(fields, e.message);
    for (const l of this.#listeners) l(event);
  }
}
