import type { Satellite } from '../protocol/gpsd.ts';
import type { Gsa, Gsv, Sentence } from '../protocol/nmea.ts';

/**
 * The GPS receiver model shared by every GPSDO type (docs/gpsdo.md): fix, satellites, position, PPS edges
 * and their pairing with the NMEA second they start, lock, health events. Pure: time comes in with every
 * call (monotonic ms), samples and events go out through callbacks; the io/ layer feeds it.
 */

export type GpsdoType = 'dummy' | 'serialpps' | 'network';

/** Declared by the codec that reads it (protocol/gpsd.ts). */
export type { Satellite };

/** One PPS assert edge: the kernel's CLOCK_REALTIME timestamp and sequence number. */
export interface PpsEdge {
  sec: number;
  nsec: number;
  sequence: number;
  /** The edge on the monotonic clock (what io/ derived from the realtime timestamp). */
  edgeMonoMs: number;
}

/** A paired measurement: labelled UTC second − host realtime at its edge. */
export interface GpsSample {
  /** Reference − host realtime, seconds. */
  offsetS: number;
  atMonoMs: number;
  /** Dispersion of this kind of measurement (PPS: 1 µs; NMEA/SOCK-style: 10 ms). */
  dispersionS: number;
}

export type GpsdoEvent =
  | { type: 'locked' }
  | { type: 'lock_lost'; reason: string }
  | { type: 'pps_lost' }
  | { type: 'fix_lost' }
  | { type: 'disconnected'; error: string }
  | { type: 'connected' }
  /**
   * The receiver's labels moved by whole seconds against the PPS edges and persisted for a second label
   * (docs/gpsdo.md "Label continuity"): `deltaS` = new labelling − old.
   */
  | { type: 'label_jump'; deltaS: number };

export type GpsdoEventType = GpsdoEvent['type'] | 'holdover';

/** Reference-health and error counters (exported as metrics). */
export interface GpsdoCounters {
  sentences: number;
  /** NMEA errors by kind (bad_checksum, overlong, …) plus pps pairing rejections. */
  errors: Record<string, number>;
  pps: number;
  /** PPS edges paired with their NMEA second and used as samples. */
  paired: number;
  events: Record<string, number>;
}

export interface GpsdoStatus {
  type: GpsdoType;
  connected: boolean;
  locked: boolean;
  lockSinceMonoMs: number | undefined;
  fix: { valid: boolean; quality: number; mode: number };
  satellitesUsed: number;
  satellites: Satellite[];
  latitude: number | undefined;
  longitude: number | undefined;
  altitudeM: number | undefined;
  hdop: number | undefined;
  ppsCount: number;
  /** Unix ms of the last PPS edge (host realtime) and its sequence. */
  lastPpsUnixMs: number | undefined;
  lastPpsSequence: number | undefined;
  /** Unix ms of the last valid NMEA/gpsd time (the receiver's time). */
  lastTimeUnixMs: number | undefined;
  /** Offset of the last paired PPS edge: labelled second − host realtime, ns. */
  offsetNs: number | undefined;
  /** Mean SNR of the satellites used (dB-Hz). */
  signalStrengthDb: number | undefined;
  receiver: { vendor?: string; model?: string; firmware?: string; serial?: string };
  error: string | undefined;
  counters: GpsdoCounters;
}

export interface GpsdoModelOptions {
  type: GpsdoType;
  /** A PPS within this long is required for lock (serialpps; network with pps); 0 = no PPS needed. */
  ppsTimeoutMs: number;
  /** Longest wait for the NMEA sentence naming an edge's second (docs/gpsdo.md "Pairing"). */
  pairWindowMs?: number;
  /** Fix/time information older than this counts as lost. */
  fixTimeoutMs?: number;
  /** Satellites used needed for lock. */
  minSatellites?: number;
  /** Sample dispersion for PPS-paired samples (1 µs) and for time-only samples (10 ms). */
  ppsDispersionS?: number;
  onSample?: (s: GpsSample) => void;
  onEvent?: (e: GpsdoEvent) => void;
}

const SAT_PRUNE_MS = 10_000;

interface GsvCycle {
  total: number;
  parts: Map<number, Gsv>;
}

export class GpsReceiverModel {
  readonly #o: Required<Omit<GpsdoModelOptions, 'onSample' | 'onEvent'>>;
  readonly #onSample: ((s: GpsSample) => void) | undefined;
  readonly #onEvent: ((e: GpsdoEvent) => void) | undefined;
  #connected = false;
  #error: string | undefined;
  #locked = false;
  #lockSince: number | undefined;
  // fix
  #rmcValid = false;
  #rmcAt: number | undefined;
  #quality = 0;
  #ggaAt: number | undefined;
  #fixMode = 1;
  #satsUsedGga: number | undefined;
  #lat: number | undefined;
  #lon: number | undefined;
  #alt: number | undefined;
  #hdop: number | undefined;
  #receiver: GpsdoStatus['receiver'] = {};
  // time labels
  #lastLabel: { unixS: number; atMonoMs: number; paired: boolean } | undefined;
  #lastTimeUnixMs: number | undefined;
  #zdaSeenAt: number | undefined;
  // pps
  #lastEdge: (PpsEdge & { paired: boolean }) | undefined;
  #lastPaired: { unixS: number; edgeMonoMs: number } | undefined;
  /** A label that disagreed with #lastPaired, held back: a second one consistent with it is a jump. */
  #heldLabel: { unixS: number; edgeMonoMs: number; deltaS: number } | undefined;
  #offsetNs: number | undefined;
  #ppsSeenAt: number | undefined;
  #ppsLostReported = false;
  #fixLostReported = true;
  // satellites
  readonly #cycles = new Map<string, GsvCycle>();
  readonly #views = new Map<string, { sats: Satellite[]; at: number }>();
  readonly #used = new Map<string, { prns: Set<number>; epoch: number | undefined; at: number }>();
  /** The distinct PRNs of `#used` (−1: to be counted again). */
  #usedCount = -1;
  #epoch: number | undefined;
  readonly counters: GpsdoCounters = { sentences: 0, errors: {}, pps: 0, paired: 0, events: {} };

  constructor(options: GpsdoModelOptions) {
    this.#o = {
      type: options.type,
      ppsTimeoutMs: options.ppsTimeoutMs,
      pairWindowMs: options.pairWindowMs ?? 900,
      fixTimeoutMs: options.fixTimeoutMs ?? 3000,
      minSatellites: options.minSatellites ?? 4,
      ppsDispersionS: options.ppsDispersionS ?? 1e-6,
    };
    this.#onSample = options.onSample;
    this.#onEvent = options.onEvent;
  }

  get locked(): boolean {
    return this.#locked;
  }

  error(kind: string): void {
    this.counters.errors[kind] = (this.counters.errors[kind] ?? 0) + 1;
  }

  #event(e: GpsdoEvent): void {
    this.counters.events[e.type] = (this.counters.events[e.type] ?? 0) + 1;
    this.#onEvent?.(e);
  }

  setConnected(connected: boolean, error?: string): void {
    if (connected === this.#connected && error === this.#error) return;
    const was = this.#connected;
    this.#connected = connected;
    this.#error = error;
    if (connected && !was) this.#event({ type: 'connected' });
    if (!connected && was) this.#event({ type: 'disconnected', error: error ?? 'closed' });
  }

  setHdop(hdop: number): void {
    this.#hdop = hdop;
  }

  setReceiver(r: GpsdoStatus['receiver']): void {
    this.#receiver = { ...this.#receiver, ...r };
  }

  /** A sentence from the receiver, received at monoMs. */
  sentence(s: Sentence, monoMs: number): void {
    this.counters.sentences++;
    switch (s.kind) {
      case 'RMC':
        if (!s.valid) this.#noFix(monoMs);
        this.#rmcValid = s.valid;
        this.#rmcAt = monoMs;
        this.#epoch = s.secOfDay;
        if (s.valid) {
          if (s.latitude !== undefined) this.#lat = s.latitude;
          if (s.longitude !== undefined) this.#lon = s.longitude;
          // ZDA's 4-digit year wins while the receiver sends it; RMC labels the second otherwise.
          const zdaFresh = this.#zdaSeenAt !== undefined && monoMs - this.#zdaSeenAt < 5000;
          if (s.unixMs !== undefined && !zdaFresh) this.#label(s.unixMs, monoMs);
        }
        break;
      case 'GGA':
        if (s.quality === 0) this.#noFix(monoMs);
        this.#quality = s.quality;
        this.#ggaAt = monoMs;
        if (s.secOfDay !== undefined) this.#epoch = s.secOfDay;
        this.#satsUsedGga = s.satellitesUsed;
        if (s.quality > 0) {
          if (s.latitude !== undefined) this.#lat = s.latitude;
          if (s.longitude !== undefined) this.#lon = s.longitude;
          if (s.altitudeM !== undefined) this.#alt = s.altitudeM;
          if (s.hdop !== undefined) this.#hdop = s.hdop;
        }
        break;
      case 'GSA':
        this.#gsa(s, monoMs);
        break;
      case 'GSV':
        this.#gsv(s, monoMs);
        break;
      case 'ZDA':
        this.#zdaSeenAt = monoMs;
        if (this.#rmcValid || this.#quality > 0) this.#label(s.unixMs, monoMs);
        break;
      default:
        break;
    }
  }

  /**
   * A fix from a source that reports it whole (gpsd TPV, the dummy): mode 1 none, 2 2D, 3 3D, with the
   * receiver's time when known.
   */
  fix(
    f: {
      mode: number;
      latitude?: number | undefined;
      longitude?: number | undefined;
      altitudeM?: number | undefined;
      hdop?: number | undefined;
      timeUnixMs?: number | undefined;
    },
    monoMs: number,
  ): void {
    this.counters.sentences++;
    this.#fixMode = f.mode;
    this.#rmcValid = f.mode >= 2;
    this.#quality = f.mode >= 2 ? 1 : 0;
    this.#rmcAt = monoMs;
    this.#ggaAt = monoMs;
    if (f.latitude !== undefined) this.#lat = f.latitude;
    if (f.longitude !== undefined) this.#lon = f.longitude;
    if (f.altitudeM !== undefined) this.#alt = f.altitudeM;
    if (f.hdop !== undefined) this.#hdop = f.hdop;
    if (f.timeUnixMs !== undefined) this.#lastTimeUnixMs = f.timeUnixMs;
  }

  /** A whole satellite list (gpsd SKY, the dummy): replaces the view. */
  satellitesSeen(sats: Satellite[], monoMs: number): void {
    const view = this.#views.get('all');
    const used = this.#used.get('all');
    // The same list again (the dummy's, each second): only its age changes.
    if (view?.sats === sats && used !== undefined && this.#views.size === 1 && this.#used.size === 1) {
      view.at = monoMs;
      used.at = monoMs;
      return;
    }
    this.#usedCount = -1;
    this.#views.clear();
    this.#used.clear();
    this.#views.set('all', { sats, at: monoMs });
    this.#used.set('all', {
      prns: new Set(sats.filter((s) => s.used).map((s) => s.prn)),
      epoch: undefined,
      at: monoMs,
    });
  }

  #gsa(s: Gsa, monoMs: number): void {
    this.#fixMode = s.fix;
    if (s.hdop !== undefined && s.fix > 1) this.#hdop = s.hdop;
    const key = `${s.talker}:${s.systemId ?? ''}`;
    const prev = this.#used.get(key);
    this.#usedCount = -1;
    // Receivers without a system id send one GSA per constellation in the same epoch: merge those.
    if (prev && prev.epoch === this.#epoch && this.#epoch !== undefined && monoMs - prev.at < 900) {
      for (const p of s.prns) prev.prns.add(p);
      prev.at = monoMs;
    } else this.#used.set(key, { prns: new Set(s.prns), epoch: this.#epoch, at: monoMs });
  }

  #gsv(s: Gsv, monoMs: number): void {
    const key = `${s.talker}:${s.signalId ?? ''}`;
    let cycle = this.#cycles.get(key);
    if (s.index === 1 || !cycle || cycle.total !== s.total) {
      cycle = { total: s.total, parts: new Map() };
      this.#cycles.set(key, cycle);
    }
    cycle.parts.set(s.index, s);
    if (s.index !== s.total) return;
    // A complete cycle replaces this talker's view: satellites that left view are pruned (docs/gpsdo.md).
    if (cycle.parts.size === s.total) {
      const sats: Satellite[] = [];
      for (let i = 1; i <= s.total; i++) {
        for (const sat of cycle.parts.get(i)?.satellites ?? []) sats.push({ ...sat, used: false });
      }
      this.#views.set(key, { sats, at: monoMs });
    } else this.error('gsv_incomplete');
    this.#cycles.delete(key);
  }

  /** The receiver's time for the second that began at the preceding PPS edge (NMEA) — unix ms. */
  #label(unixMs: number, monoMs: number): void {
    this.#lastTimeUnixMs = unixMs;
    // Only whole seconds label a PPS edge (a 5 Hz receiver also sends .2, .4, …).
    if (unixMs % 1000 !== 0) return;
    const unixS = unixMs / 1000;
    if (this.#lastLabel && this.#lastLabel.unixS === unixS) return; // RMC and ZDA of the same second
    this.#lastLabel = { unixS, atMonoMs: monoMs, paired: false };
    this.#tryPair();
  }

  /** The receiver says it has no fix: the pending edge cannot be labelled (a PPS without a fix). */
  #noFix(monoMs: number): void {
    const e = this.#lastEdge;
    if (e && !e.paired && monoMs - e.edgeMonoMs <= this.#o.pairWindowMs) {
      e.paired = true;
      this.error('pps_without_fix');
    }
  }

  /** A PPS assert edge (kernel timestamp), seen at monoMs. */
  pps(edge: PpsEdge, monoMs: number): void {
    if (this.#lastEdge && edge.sequence === this.#lastEdge.sequence) return;
    this.counters.pps++;
    this.#ppsSeenAt = monoMs;
    this.#ppsLostReported = false;
    this.#lastEdge = { ...edge, paired: false };
    this.#tryPair();
  }

  /**
   * Pairing (docs/gpsdo.md "PPS and NMEA"): the sentence naming second L arrives after the edge that began
   * L, within pairWindowMs. offset = L − assert timestamp. A later sentence or a label that disagrees with
   * the edges' spacing is not used (counted).
   */
  #tryPair(): void {
    const e = this.#lastEdge;
    const l = this.#lastLabel;
    if (!e || !l || e.paired || l.paired) return;
    const lag = l.atMonoMs - e.edgeMonoMs;
    // The sentence arrived before this edge (20 ms allows for the error of mapping the kernel's realtime
    // stamp onto the monotonic clock): it named an earlier edge, already spent or never seen, and cannot
    // label a later one.
    if (lag < -20) {
      l.paired = true;
      return;
    }
    if (lag > this.#o.pairWindowMs) {
      // No label came within this edge's window: the edge is spent. The sentence is not its label, but it
      // may be the label of the next edge, already stamped by the kernel and not yet read (the assert file
      // is polled): it waits for that edge, which pairs it only if the edge precedes the sentence's arrival
      // (above). Spending the sentence here too would lose every label from an edge left unlabelled (a
      // duplicate second) on, for as long as the sentences arrive before the poll (docs/gpsdo.md "PPS and
      // NMEA").
      e.paired = true;
      this.error('pps_late_sentence');
      return;
    }
    e.paired = true;
    l.paired = true;
    if (!this.#fixValid(l.atMonoMs)) {
      this.error('pps_without_fix');
      return;
    }
    if (!this.#labelContinues(l.unixS, e.edgeMonoMs)) return;
    this.#lastPaired = { unixS: l.unixS, edgeMonoMs: e.edgeMonoMs };
    const offsetS = l.unixS - e.sec - e.nsec / 1e9;
    this.#offsetNs = Math.round((l.unixS - e.sec) * 1e9 - e.nsec);
    this.counters.paired++;
    if (this.#evaluate(l.atMonoMs)) {
      this.#onSample?.({ offsetS, atMonoMs: e.edgeMonoMs, dispersionS: this.#o.ppsDispersionS });
    }
  }

  /**
   * Label continuity (docs/gpsdo.md "Label continuity"): the second named for an edge must follow the
   * previous paired label by the number of edges between them. A label that does not is held back
   * (`pps_label_mismatch`): a delayed sentence of the previous second, or the first of a jump. A second
   * label consistent with the held one is a jump of the receiver's labelling (`pps_label_jump`, the
   * `label_jump` event): it is passed on from then, and the clock manager judges the new level like any
   * reference's step (held back until its stepout or an independent confirmation).
   */
  #labelContinues(unixS: number, edgeMonoMs: number): boolean {
    const prev = this.#lastPaired;
    if (prev === undefined || edgeMonoMs - prev.edgeMonoMs >= 10_000) {
      this.#heldLabel = undefined;
      return true;
    }
    const expected = prev.unixS + Math.round((edgeMonoMs - prev.edgeMonoMs) / 1000);
    if (unixS === expected) {
      this.#heldLabel = undefined;
      return true;
    }
    const held = this.#heldLabel;
    const heldExpected = held ? held.unixS + Math.round((edgeMonoMs - held.edgeMonoMs) / 1000) : undefined;
    if (held && unixS === heldExpected && edgeMonoMs - held.edgeMonoMs < 10_000) {
      this.#heldLabel = undefined;
      this.error('pps_label_jump');
      this.#event({ type: 'label_jump', deltaS: held.deltaS });
      return true;
    }
    this.error('pps_label_mismatch');
    this.#heldLabel = { unixS, edgeMonoMs, deltaS: unixS - expected };
    return false;
  }

  /** A time sample measured elsewhere (gpsd TOFF/PPS, the dummy). */
  timeSample(offsetS: number, atMonoMs: number, dispersionS: number, viaPps: boolean): void {
    if (viaPps) {
      this.counters.pps++;
      this.#ppsSeenAt = atMonoMs;
      this.#ppsLostReported = false;
    }
    this.#offsetNs = Math.round(offsetS * 1e9);
    this.counters.paired++;
    if (this.#evaluate(atMonoMs)) this.#onSample?.({ offsetS, atMonoMs, dispersionS });
  }

  #fixValid(now: number): boolean {
    const limit = this.#o.fixTimeoutMs;
    const rmc = this.#rmcAt;
    const gga = this.#ggaAt;
    return (
      this.#rmcValid &&
      rmc !== undefined &&
      now - rmc <= limit &&
      this.#quality > 0 &&
      gga !== undefined &&
      now - gga <= limit
    );
  }

  /** Satellites used (the lock rule reads it at every evaluation): counted again only when the lists change. */
  #satellitesUsed(): number {
    if (this.#usedCount < 0) {
      const used = new Set<number>();
      for (const u of this.#used.values()) for (const p of u.prns) used.add(p);
      this.#usedCount = used.size;
    }
    return Math.max(this.#usedCount, this.#satsUsedGga ?? 0);
  }

  /** Re-evaluate lock (R11 lock rule in docs/gpsdo.md); returns the new lock state. */
  #evaluate(now: number): boolean {
    const fix = this.#fixValid(now);
    if (!fix && !this.#fixLostReported && this.#locked) {
      this.#fixLostReported = true;
      this.#event({ type: 'fix_lost' });
    }
    if (fix) this.#fixLostReported = false;
    const ppsOk =
      this.#o.ppsTimeoutMs === 0 ||
      (this.#ppsSeenAt !== undefined && now - this.#ppsSeenAt <= this.#o.ppsTimeoutMs);
    if (!ppsOk && this.#ppsSeenAt !== undefined && !this.#ppsLostReported) {
      this.#ppsLostReported = true;
      this.#event({ type: 'pps_lost' });
    }
    const lock = this.#connected && fix && ppsOk && this.#satellitesUsed() >= this.#o.minSatellites;
    if (lock !== this.#locked) {
      this.#locked = lock;
      if (lock) {
        this.#lockSince = now;
        this.#event({ type: 'locked' });
      } else {
        this.#lockSince = undefined;
        const reason = !this.#connected
          ? 'receiver disconnected'
          : !fix
            ? 'no valid fix'
            : !ppsOk
              ? 'no PPS'
              : 'too few satellites';
        this.#event({ type: 'lock_lost', reason });
      }
    }
    return lock;
  }

  /** Periodic check (1 s): timeouts, pruning. */
  tick(now: number): void {
    for (const [k, v] of this.#views) if (now - v.at > SAT_PRUNE_MS) this.#views.delete(k);
    for (const [k, v] of this.#used) {
      if (now - v.at <= SAT_PRUNE_MS) continue;
      this.#used.delete(k);
      this.#usedCount = -1;
    }
    this.#evaluate(now);
  }

  satellites(): Satellite[] {
    const used = new Set<number>();
    for (const u of this.#used.values()) for (const p of u.prns) used.add(p);
    const byPrn = new Map<number, Satellite>();
    for (const v of this.#views.values()) {
      for (const s of v.sats) {
        const prev = byPrn.get(s.prn);
        // One satellite on several signals: keep the strongest.
        if (!prev || (s.snr ?? -1) > (prev.snr ?? -1))
          byPrn.set(s.prn, { ...s, used: s.used || used.has(s.prn) });
      }
    }
    return [...byPrn.values()].sort((a, b) => a.prn - b.prn);
  }

  /** The fix and the last PPS of `status(now)` alone (the reference-event watcher's once-a-second read). */
  signal(now: number): { fixValid: boolean; lastPpsUnixMs: number | undefined } {
    this.#evaluate(now);
    const lastPpsUnixMs = this.#lastEdge ? this.#lastEdge.sec * 1000 + this.#lastEdge.nsec / 1e6 : undefined;
    return {
      fixValid: this.#fixValid(now),
      lastPpsUnixMs: lastPpsUnixMs ?? (this.#ppsSeenAt !== undefined ? this.#lastTimeUnixMs : undefined),
    };
  }

  status(now: number): GpsdoStatus {
    this.#evaluate(now);
    const sats = this.satellites();
    const usedSnr = sats.filter((s) => s.used && s.snr !== undefined).map((s) => s.snr ?? 0);
    const lastPpsUnixMs = this.#lastEdge ? this.#lastEdge.sec * 1000 + this.#lastEdge.nsec / 1e6 : undefined;
    return {
      type: this.#o.type,
      connected: this.#connected,
      locked: this.#locked,
      lockSinceMonoMs: this.#lockSince,
      fix: { valid: this.#fixValid(now), quality: this.#quality, mode: this.#fixMode },
      satellitesUsed: this.#satellitesUsed(),
      satellites: sats,
      latitude: this.#lat,
      longitude: this.#lon,
      altitudeM: this.#alt,
      hdop: this.#hdop,
      ppsCount: this.counters.pps,
      lastPpsUnixMs: lastPpsUnixMs ?? (this.#ppsSeenAt !== undefined ? this.#lastTimeUnixMs : undefined),
      lastPpsSequence: this.#lastEdge?.sequence,
      lastTimeUnixMs: this.#lastTimeUnixMs,
      offsetNs: this.#offsetNs,
      signalStrengthDb: usedSnr.length ? usedSnr.reduce((a, b) => a + b, 0) / usedSnr.length : undefined,
      receiver: { ...this.#receiver },
      error: this.#error,
      counters: {
        ...this.counters,
        errors: { ...this.counters.errors },
        events: { ...this.counters.events },
      },
    };
  }
}

/** `/api/status/gpsdo` body (snake_case; fields omitted when unknown). */
export function gpsdoApiBody(s: GpsdoStatus, nowMonoMs: number): Record<string, unknown> {
  const iso = (ms: number | undefined): string | null =>
    ms === undefined ? null : new Date(Math.floor(ms)).toISOString();
  const body: Record<string, unknown> = {
    type: s.type,
    connected: s.connected,
    locked: s.locked,
    lock_duration: s.lockSinceMonoMs === undefined ? 0 : Math.round((nowMonoMs - s.lockSinceMonoMs) * 1e6),
    satellites: s.satellitesUsed,
    satellites_in_view: s.satellites.length,
    // NMEA GSA mode 1 ("fix not available") while the fix is not valid: the last GSA's 3 beside
    // "fix: false" (holdover) contradicted itself.
    fix_mode: s.fix.valid ? s.fix.mode : 1,
    pps_count: s.ppsCount,
    last_pps: iso(s.lastPpsUnixMs),
    last_nmea: iso(s.lastTimeUnixMs),
  };
  if (s.signalStrengthDb !== undefined) body['signal_strength_db'] = Math.round(s.signalStrengthDb * 10) / 10;
  if (s.offsetNs !== undefined) body['offset_ns'] = s.offsetNs;
  if (s.latitude !== undefined) body['latitude'] = s.latitude;
  if (s.longitude !== undefined) body['longitude'] = s.longitude;
  if (s.altitudeM !== undefined) body['altitude_m'] = s.altitudeM;
  if (s.hdop !== undefined) body['hdop'] = s.hdop;
  if (s.receiver.firmware) body['firmware'] = s.receiver.firmware;
  if (s.receiver.serial) body['serial_number'] = s.receiver.serial;
  if (s.receiver.model) body['model'] = s.receiver.model;
  if (s.receiver.vendor) body['vendor'] = s.receiver.vendor;
  if (s.error) body['error'] = s.error;
  return body;
}

/** `/api/satellites` body: `[{prn, elevation, azimuth, snr (null if not tracked), used}]`. */
export function satellitesApiBody(s: GpsdoStatus): Record<string, unknown>[] {
  return s.satellites.map((x) => ({
    prn: x.prn,
    elevation: x.elevation ?? null,
    azimuth: x.azimuth ?? null,
    snr: x.snr ?? null,
    used: x.used,
  }));
}
