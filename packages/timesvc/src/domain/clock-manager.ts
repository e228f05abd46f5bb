import { createHash } from 'node:crypto';
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { LEAP, MAXSTRAT, MINDISP, unixToNtp } from '../protocol/ntp-packet.ts';
import { UNSYNCHRONISED_STATE, type ServerSystemState } from './ntp-responder.ts';
import { expandIpv6 } from './ip-address.ts';
import { intersect, type SelectionCandidate } from './selection.ts';

/**
 * The clock manager (reference §1.1): disciplines the *served* clock — never the system clock — from every
 * registered reference source (upstream NTP peers now; a GPSDO source later plugs into the same interface).
 *
 * Model. A source measures `offset = reference − raw local clock` (the raw clock is the high-resolution
 * realtime clock of the host). The manager keeps a correction c(t) = phase + freq·(t − t0) over monotonic
 * time t, fitted by least squares to the selected source's recent offsets, and the service serves
 * raw + c(t). The residual `offset − c(t)` of each new sample is how far the served clock is from the
 * reference: it drives the state machine. The frequency term keeps time in HOLDOVER.
 */

export type ClockState = 'INIT' | 'SYNCING' | 'LOCKED' | 'HOLDOVER' | 'FAULT';
export const CLOCK_STATES: readonly ClockState[] = ['INIT', 'SYNCING', 'LOCKED', 'HOLDOVER', 'FAULT'];

export type SourceKind = 'gpsdo' | 'ntp' | 'local';

/** What a reference source reports about itself; read by the manager on every tick and sample. */
export interface ReferenceStatus {
  /** `false` when unreachable, unsynchronised, denied or not locked. */
  usable: boolean;
  /** The source's own stratum (a GPSDO is 0, so we serve 1). */
  stratum: number;
  /** The refid we advertise while this source is selected (RFC 5905 §7.3). */
  referenceId: number;
  leap: number;
  /** The source's root delay and dispersion (0 for a local device), seconds. */
  rootDelayS: number;
  rootDispersionS: number;
}

export interface ReferenceSource {
  /** `NTP:<host>:<port>`, `GPSDO:Dummy`, `GPSDO:SerialPPS`, `LOCAL`. */
  readonly id: string;
  readonly kind: SourceKind;
  readonly prefer: boolean;
  status(): ReferenceStatus;
}

/** One measurement from a source; offset is reference − raw local clock, at monotonic time atMs. */
export interface ReferenceSample {
  offsetS: number;
  delayS: number;
  dispersionS: number;
  jitterS: number;
  atMs: number;
}

export interface ClockManagerOptions {
  clock: Clock;
  /** Tick period (reference: 1 s). */
  tickMs?: number;
  /** |median residual| below which SYNCING becomes LOCKED (reference: 100 µs), or the source jitter if larger. */
  lockThresholdS?: number;
  /** Samples needed in the lock window before LOCKED (reference: 4). */
  lockMinSamples?: number;
  /** Lock window (reference: 8). */
  lockWindow?: number;
  /** |residual| above which the clock is in FAULT (reference: 1 s). */
  faultThresholdS?: number;
  /** Longest HOLDOVER before FAULT (reference: 4 h). */
  holdoverTimeoutMs?: number;
  /** Samples in the least-squares window used for phase and frequency. */
  regressionWindow?: number;
  /** While SYNCING, a residual above this re-steps the served clock instead of slewing it. */
  stepThresholdS?: number;
  /** Our precision, log2 seconds. */
  precision?: number;
  /** Local-stratum mode: the host clock is a last-resort reference with this stratum (served = stratum). */
  local?: { stratum: number; referenceId: number } | undefined;
  /** A sample older than this no longer makes its source a candidate. */
  maxSampleAgeMs?: number;
}

export interface SourceSnapshot {
  id: string;
  kind: SourceKind;
  prefer: boolean;
  usable: boolean;
  candidate: boolean;
  falseticker: boolean;
  selected: boolean;
  stratum: number;
  offsetS: number | undefined;
  jitterS: number | undefined;
  lastSampleMs: number | undefined;
}

export interface ClockSnapshot {
  state: ClockState;
  /** Reference − served clock for the last sample of the selected source, seconds. */
  offsetS: number;
  /** Standard deviation of the residuals in the lock window, seconds. */
  offsetStddevS: number;
  /** Frequency estimate: served − raw rate, parts per billion. */
  driftPpb: number;
  /** Internal stratum: 16 when unsynchronised. */
  stratum: number;
  selected: string | undefined;
  /** The last selected reference (kept through HOLDOVER). */
  lastReference: string | undefined;
  jitterS: number;
  lastUpdateMs: number | undefined;
  /** Wall-clock ms of the last update (for status pages). */
  lastUpdateWallMs: number | undefined;
  holdoverStartedMs: number | undefined;
  holdoverRemainingMs: number | undefined;
  /** Samples discarded by the spike suppressor since start. */
  spikes: number;
  sources: SourceSnapshot[];
}

export type ClockManagerEvent =
  | { type: 'state'; from: ClockState; to: ClockState; reason: string }
  | { type: 'selected'; from: string | undefined; to: string | undefined }
  | { type: 'step'; source: string; offsetS: number }
  /** The correction changed (after every disciplined sample). */
  | { type: 'update' };

interface SourceEntry {
  source: ReferenceSource;
  last: ReferenceSample | undefined;
  falseticker: boolean;
  candidate: boolean;
}

interface FitPoint {
  t: number; // monotonic seconds
  offset: number;
}

const LOCAL_ID = 'LOCAL';
/** Frequency estimates are clamped to ±500 ppm (RFC 5905 MAXFREQ). */
const MAXFREQ = 500e-6;
/** A frequency is fitted only once the samples span this long; before that the last one is kept. */
const MIN_FIT_SPAN_S = 16;

export class ClockManager {
  readonly #clock: Clock;
  readonly #o: Required<Omit<ClockManagerOptions, 'clock' | 'local'>>;
  readonly #local: { stratum: number; referenceId: number } | undefined;
  readonly #sources = new Map<string, SourceEntry>();
  readonly #listeners: ((e: ClockManagerEvent) => void)[] = [];
  #state: ClockState = 'INIT';
  #selected: string | undefined;
  #lastReference: string | undefined;
  #lastStratum = MAXSTRAT;
  // Correction c(t) = phase + freq * (t − t0), t in monotonic seconds.
  #phase = 0;
  #freq = 0;
  #t0 = 0;
  #fitted = false;
  #fit: FitPoint[] = [];
  #residuals: number[] = [];
  #lastResidual = 0;
  #lastJitter = 0;
  #lastUpdateMs: number | undefined;
  #lastUpdateWallMs: number | undefined;
  #holdoverStartedMs: number | undefined;
  #serverState: ServerSystemState = UNSYNCHRONISED_STATE;
  #timer: TimerHandle | undefined;
  #selectedStatus: ReferenceStatus | undefined;
  #lastSample: ReferenceSample | undefined;
  #largeRun = 0;
  #spikes = 0;

  constructor(options: ClockManagerOptions) {
    this.#clock = options.clock;
    this.#o = {
      tickMs: options.tickMs ?? 1000,
      lockThresholdS: options.lockThresholdS ?? 100e-6,
      lockMinSamples: options.lockMinSamples ?? 4,
      lockWindow: options.lockWindow ?? 8,
      faultThresholdS: options.faultThresholdS ?? 1,
      holdoverTimeoutMs: options.holdoverTimeoutMs ?? 4 * 3600_000,
      regressionWindow: options.regressionWindow ?? 32,
      stepThresholdS: options.stepThresholdS ?? 0.128,
      precision: options.precision ?? -20,
      maxSampleAgeMs: options.maxSampleAgeMs ?? Number.POSITIVE_INFINITY,
    };
    this.#local = options.local;
    this.#serverState = { ...UNSYNCHRONISED_STATE, precision: this.#o.precision };
    if (this.#local) {
      const local = this.#local;
      this.register({
        id: LOCAL_ID,
        kind: 'local',
        prefer: false,
        status: () => ({
          usable: true,
          stratum: Math.max(0, local.stratum - 1),
          referenceId: local.referenceId,
          leap: LEAP.NONE,
          rootDelayS: 0,
          rootDispersionS: 0,
        }),
      });
    }
  }

  get state(): ClockState {
    return this.#state;
  }

  /** The reply fields the NTP server sends; replaced (not mutated) on every change. */
  get serverState(): ServerSystemState {
    return this.#serverState;
  }

  /** Correction parameters for the served clock: c(tMs) = phaseS + freq · (tMs − t0Ms)/1000. */
  get correction(): { phaseS: number; freq: number; t0Ms: number } {
    return { phaseS: this.#phase, freq: this.#freq, t0Ms: this.#t0 * 1000 };
  }

  /** c(t) in seconds at monotonic milliseconds `tMs`. */
  correctionAt(tMs: number): number {
    return this.#phase + this.#freq * (tMs / 1000 - this.#t0);
  }

  on(listener: (e: ClockManagerEvent) => void): () => void {
    this.#listeners.push(listener);
    return () => {
      const i = this.#listeners.indexOf(listener);
      if (i >= 0) this.#listeners.splice(i, 1);
    };
  }

  register(source: ReferenceSource): void {
    if (this.#sources.has(source.id)) throw new Error(`reference source ${source.id} registered twice`);
    this.#sources.set(source.id, { source, last: undefined, falseticker: false, candidate: false });
  }

  unregister(id: string): void {
    this.#sources.delete(id);
    if (this.#selected === id) this.#select();
  }

  /** Start the periodic tick (state evaluation, local reference, holdover timeout). */
  start(): void {
    const loop = (): void => {
      this.tick();
      this.#timer = this.#clock.setTimer(this.#o.tickMs, loop);
    };
    this.#timer = this.#clock.setTimer(0, loop);
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** A new measurement from a registered source. Only the selected source's samples steer the clock. */
  addSample(id: string, sample: ReferenceSample): void {
    const entry = this.#sources.get(id);
    if (entry === undefined) return;
    entry.last = sample;
    this.#select();
    if (this.#selected === id) this.#discipline(id, sample);
    this.#evaluate('sample');
  }

  /** Periodic evaluation; the timer calls it, tests call it directly. */
  tick(): void {
    if (this.#local) {
      // The local reference agrees with our own clock by definition: it only keeps the state alive.
      const now = this.#clock.monotonicMs();
      const entry = this.#sources.get(LOCAL_ID);
      if (entry) {
        entry.last = { offsetS: this.correctionAt(now), delayS: 0, dispersionS: 0, jitterS: 0, atMs: now };
      }
      this.#select();
      if (this.#selected === LOCAL_ID && entry?.last) this.#discipline(LOCAL_ID, entry.last);
    } else {
      this.#select();
    }
    this.#evaluate('tick');
  }

  #emit(e: ClockManagerEvent): void {
    for (const l of this.#listeners) l(e);
  }

  #setState(to: ClockState, reason: string): void {
    if (to === this.#state) return;
    const from = this.#state;
    this.#state = to;
    if (to === 'HOLDOVER') this.#holdoverStartedMs = this.#clock.monotonicMs();
    if (to !== 'HOLDOVER') this.#holdoverStartedMs = undefined;
    if (to === 'SYNCING' || to === 'FAULT') this.#residuals = [];
    this.#emit({ type: 'state', from, to, reason });
  }

  #rootDistance(entry: SourceEntry, status: ReferenceStatus): number {
    const s = entry.last;
    if (!s) return Number.POSITIVE_INFINITY;
    return (status.rootDelayS + s.delayS) / 2 + status.rootDispersionS + s.dispersionS + s.jitterS;
  }

  /** Selection (reference §1.1 plus RFC 5905 §11.2.1 for three or more NTP peers). */
  #select(): void {
    const now = this.#clock.monotonicMs();
    const candidates: { entry: SourceEntry; status: ReferenceStatus }[] = [];
    for (const entry of this.#sources.values()) {
      entry.candidate = false;
      entry.falseticker = false;
      const status = entry.source.status();
      const fresh = entry.last !== undefined && now - entry.last.atMs <= this.#o.maxSampleAgeMs;
      if (status.usable && fresh) candidates.push({ entry, status });
    }
    const ntp = candidates.filter((c) => c.entry.source.kind === 'ntp');
    if (ntp.length >= 3) {
      const result = intersect(
        ntp.map((c): SelectionCandidate => ({
          id: c.entry.source.id,
          offsetS: c.entry.last?.offsetS ?? 0,
          rootDistanceS: this.#rootDistance(c.entry, c.status),
        })),
      );
      const bad = new Set(result.falsetickers);
      for (const c of ntp) c.entry.falseticker = bad.has(c.entry.source.id);
    }
    let best: { entry: SourceEntry; status: ReferenceStatus; rank: number; dist: number } | undefined;
    for (const c of candidates) {
      if (c.entry.falseticker) continue;
      c.entry.candidate = true;
      const kind = c.entry.source.kind;
      // Reference §1.1 priorities: GPSDO 0, preferred peer 1, other peers stratum + 10; local last.
      const rank =
        kind === 'gpsdo' ? 0 : kind === 'local' ? 1000 : c.entry.source.prefer ? 1 : c.status.stratum + 10;
      const dist = this.#rootDistance(c.entry, c.status);
      if (best === undefined || rank < best.rank || (rank === best.rank && dist < best.dist)) {
        best = { ...c, rank, dist };
      }
    }
    const id = best?.entry.source.id;
    if (id !== this.#selected) {
      const from = this.#selected;
      this.#selected = id;
      if (id !== undefined) this.#lastReference = id;
      // A new reference re-phases the served clock to itself: its offsets must not be averaged with the
      // previous reference's (they may differ by up to their root distances). The frequency is kept.
      if (from !== undefined && id !== undefined) this.#fit = [];
      this.#emit({ type: 'selected', from, to: id });
    }
    this.#selectedStatus = best?.status;
  }

  #predict(tS: number): number {
    return this.#phase + this.#freq * (tS - this.#t0);
  }

  #resetFit(keepFrequency: boolean): void {
    this.#fitted = false;
    this.#fit = [];
    this.#residuals = [];
    if (!keepFrequency) this.#freq = 0;
  }

  #discipline(id: string, sample: ReferenceSample): void {
    const t = sample.atMs / 1000;
    this.#lastJitter = sample.jitterS;
    this.#lastSample = sample;
    if (this.#state === 'FAULT') {
      // Reference §1.1: FAULT → SYNCING when a reference returns; offset and drift samples are reset.
      this.#resetFit(false);
      this.#setState('SYNCING', `reference ${id} returned`);
    }
    if (!this.#fitted) {
      this.#stepTo(t, id, sample);
      return;
    }
    const residual = sample.offsetS - this.#predict(t);
    this.#lastResidual = residual;
    if (Math.abs(residual) > this.#o.faultThresholdS) {
      this.#resetFit(false);
      this.#setState('FAULT', `offset ${residual.toFixed(6)} s from ${id} exceeds the fault threshold`);
      return;
    }
    if (
      this.#state !== 'LOCKED' &&
      this.#state !== 'HOLDOVER' &&
      Math.abs(residual) > this.#o.stepThresholdS
    ) {
      // Still acquiring: step to the new offset rather than slewing for minutes.
      this.#resetFit(true);
      this.#stepTo(t, id, sample);
      return;
    }
    // Popcorn spike suppressor (RFC 5905 §10, SGATE = 3): the first residual far outside the recent spread
    // is taken for a queueing or scheduling spike and dropped; if the next ones are large too, it was a
    // real change and they are used.
    const spread = Math.max(this.#lockThreshold(), 1.4826 * median(this.#residuals.map((r) => Math.abs(r))));
    const large = this.#residuals.length >= this.#o.lockMinSamples && Math.abs(residual) > 3 * spread;
    this.#largeRun = large ? this.#largeRun + 1 : 0;
    if (this.#largeRun === 1) {
      this.#spikes++;
      return;
    }
    this.#residuals.push(residual);
    if (this.#residuals.length > this.#o.lockWindow) this.#residuals.shift();
    this.#fit.push({ t, offset: sample.offsetS });
    if (this.#fit.length > this.#o.regressionWindow) this.#fit.shift();
    this.#refit(t);
    this.#markUpdate(sample);
  }

  /**
   * Least squares over the window; the phase is the fitted line at the newest sample. Like chrony's
   * regression, a runs test on the residual signs detects a window that no longer fits a straight line (a
   * level shift or frequency change) and drops its older half, so a step is not turned into a slope.
   */
  #refit(tNow: number): void {
    for (;;) {
      const pts = this.#fit;
      const n = pts.length;
      const first = pts[0];
      if (first === undefined) return;
      if (n === 1) {
        this.#phase = first.offset;
        this.#t0 = tNow;
        return;
      }
      const span = tNow - first.t;
      let mt = 0;
      let mo = 0;
      for (const p of pts) {
        mt += p.t;
        mo += p.offset;
      }
      mt /= n;
      mo /= n;
      if (n >= 3 && span >= MIN_FIT_SPAN_S) {
        let stt = 0;
        let sto = 0;
        for (const p of pts) {
          stt += (p.t - mt) ** 2;
          sto += (p.t - mt) * (p.offset - mo);
        }
        const freq = stt > 0 ? sto / stt : this.#freq;
        this.#freq = Math.max(-MAXFREQ, Math.min(MAXFREQ, freq));
        this.#phase = mo + this.#freq * (tNow - mt);
      } else {
        // Too short a span for a frequency: average the offsets projected with the current frequency.
        let sum = 0;
        for (const p of pts) sum += p.offset + this.#freq * (tNow - p.t);
        this.#phase = sum / n;
      }
      this.#t0 = tNow;
      if (n < 8) return;
      // Runs test: with random residual signs the number of runs is about (n + 1) / 2, sd √(n − 1) / 2.
      let runs = 1;
      let prev = 0;
      for (const p of pts) {
        const sign = p.offset - this.#predict(p.t) >= 0 ? 1 : -1;
        if (prev !== 0 && sign !== prev) runs++;
        prev = sign;
      }
      if (runs >= (n + 1) / 2 - Math.sqrt(n - 1)) return;
      this.#fit = pts.slice(Math.floor(n / 2));
    }
  }

  /** Phase the fit to this sample's offset (first sample, or a step while acquiring). */
  #stepTo(t: number, id: string, sample: ReferenceSample): void {
    this.#phase = sample.offsetS;
    this.#t0 = t;
    this.#fitted = true;
    this.#fit = [{ t, offset: sample.offsetS }];
    this.#lastResidual = 0;
    this.#emit({ type: 'step', source: id, offsetS: sample.offsetS });
    this.#markUpdate(sample);
  }

  #markUpdate(sample: ReferenceSample): void {
    this.#lastUpdateMs = sample.atMs;
    this.#lastUpdateWallMs = this.#clock.now() - (this.#clock.monotonicMs() - sample.atMs);
    this.#emit({ type: 'update' });
  }

  #lockThreshold(): number {
    return Math.max(this.#o.lockThresholdS, this.#lastJitter);
  }

  #evaluate(reason: 'tick' | 'sample'): void {
    const have = this.#selected !== undefined;
    const now = this.#clock.monotonicMs();
    switch (this.#state) {
      case 'INIT':
        if (have) this.#setState('SYNCING', `reference ${this.#selected} available`);
        break;
      case 'SYNCING':
        if (!have) {
          if (reason === 'tick') this.#setState('FAULT', 'reference lost while syncing');
        } else if (
          this.#residuals.length >= this.#o.lockMinSamples &&
          Math.abs(median(this.#residuals)) < this.#lockThreshold()
        ) {
          this.#setState('LOCKED', `median offset within ${this.#lockThreshold() * 1e6} µs`);
        }
        break;
      case 'LOCKED':
        if (!have) {
          this.#setState('HOLDOVER', 'all references lost');
        } else if (
          this.#residuals.length >= this.#o.lockMinSamples &&
          Math.abs(median(this.#residuals)) > 10 * this.#lockThreshold()
        ) {
          // Not in the reference table: a lock that has drifted to 10× the threshold is no longer a lock.
          this.#setState('SYNCING', 'median offset above ten times the lock threshold');
        }
        break;
      case 'HOLDOVER':
        if (have) this.#setState('SYNCING', `reference ${this.#selected} returned`);
        else if (now - (this.#holdoverStartedMs ?? now) > this.#o.holdoverTimeoutMs) {
          this.#setState('FAULT', 'holdover expired');
        }
        break;
      case 'FAULT':
        if (have && reason === 'tick' && this.#fitted) this.#setState('SYNCING', 'reference available');
        break;
    }
    this.#updateServerState();
  }

  #updateServerState(): void {
    const status = this.#state === 'LOCKED' ? this.#selectedStatus : undefined;
    // A stratum-15 reference would make us 16, which RFC 5905 §7.3 defines as unsynchronised.
    const tooDeep = status !== undefined && status.stratum + 1 >= MAXSTRAT;
    const synced = (this.#state === 'LOCKED' || this.#state === 'HOLDOVER') && !tooDeep;
    if (!synced) {
      this.#lastStratum = MAXSTRAT;
      if (this.#serverState.leap !== LEAP.UNSYNCHRONISED) {
        this.#serverState = { ...UNSYNCHRONISED_STATE, precision: this.#o.precision };
      }
      return;
    }
    const entry = this.#selected !== undefined ? this.#sources.get(this.#selected) : undefined;
    if (status && entry?.last && this.#lastSample) {
      this.#lastStratum = Math.min(MAXSTRAT, status.stratum + 1);
      const s = this.#lastSample;
      const wall = this.#lastUpdateWallMs ?? this.#clock.now();
      const rootDisp = Math.max(
        MINDISP,
        status.rootDispersionS + s.dispersionS + s.jitterS + Math.abs(this.#lastResidual),
      );
      this.#serverState = {
        leap: status.leap === LEAP.UNSYNCHRONISED ? LEAP.NONE : status.leap,
        stratum: this.#lastStratum,
        precision: this.#o.precision,
        referenceId: status.referenceId,
        referenceTimestamp: unixToNtp(Math.floor(wall / 1000), (wall % 1000) * 1e6),
        rootDelayS: status.rootDelayS + s.delayS,
        rootDispersionS: rootDisp,
        updatedAtMs: this.#lastUpdateMs ?? this.#clock.monotonicMs(),
      };
    }
    // HOLDOVER keeps the last advertised fields; the responder grows the root dispersion with time.
  }

  snapshot(): ClockSnapshot {
    const now = this.#clock.monotonicMs();
    const sources: SourceSnapshot[] = [];
    for (const e of this.#sources.values()) {
      const st = e.source.status();
      sources.push({
        id: e.source.id,
        kind: e.source.kind,
        prefer: e.source.prefer,
        usable: st.usable,
        candidate: e.candidate,
        falseticker: e.falseticker,
        selected: this.#selected === e.source.id,
        stratum: st.stratum,
        offsetS: e.last ? e.last.offsetS - this.correctionAt(e.last.atMs) : undefined,
        jitterS: e.last?.jitterS,
        lastSampleMs: e.last?.atMs,
      });
    }
    const synced = this.#state === 'LOCKED' || this.#state === 'HOLDOVER';
    return {
      state: this.#state,
      offsetS: this.#lastResidual,
      offsetStddevS: stddev(this.#residuals),
      driftPpb: this.#freq * 1e9,
      stratum: synced ? this.#lastStratum : MAXSTRAT,
      selected: this.#selected,
      lastReference: this.#lastReference,
      jitterS: this.#lastJitter,
      lastUpdateMs: this.#lastUpdateMs,
      lastUpdateWallMs: this.#lastUpdateWallMs,
      holdoverStartedMs: this.#holdoverStartedMs,
      holdoverRemainingMs:
        this.#holdoverStartedMs === undefined
          ? undefined
          : Math.max(0, this.#o.holdoverTimeoutMs - (now - this.#holdoverStartedMs)),
      spikes: this.#spikes,
      sources,
    };
  }
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function stddev(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = values.reduce((a, b) => a + b, 0) / values.length;
  return Math.sqrt(values.reduce((a, b) => a + (b - m) ** 2, 0) / (values.length - 1));
}

/**
 * The refid for an upstream server at `address` (RFC 5905 §7.3): an IPv4 address as a u32, or the first
 * four octets of the MD5 hash of an IPv6 address.
 */
export function addressRefId(address: string): number {
  if (!address.includes(':')) return ipv4RefId(address);
  const bytes = Buffer.alloc(16);
  (expandIpv6(address) ?? []).forEach((g, i) => bytes.writeUInt16BE(g & 0xffff, i * 2));
  return createHash('md5').update(bytes).digest().readUInt32BE(0);
}

/** The refid for an IPv4 system peer (RFC 5905 §7.3): its address as a u32. */
export function ipv4RefId(address: string): number {
  const parts = address.split('.').map(Number);
  return (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
}
