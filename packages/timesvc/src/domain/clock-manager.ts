import { createHash } from 'node:crypto';
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { LEAP, MAXSTRAT, PHI, unixToNtp } from '../protocol/ntp-packet.ts';
import { UNSYNCHRONISED_STATE, type ServerSystemState } from './ntp-responder.ts';
import { expandIpv6 } from './ip-address.ts';
import { selectReference, type SelectionInput, type Verdict } from './selection.ts';
import { Discipline, K_SIGMA, median } from './discipline.ts';
import {
  ZERO_CORRECTION,
  correctionAt,
  remainingSlew,
  slewTowards,
  stepTo,
  type Correction,
} from './correction.ts';
import { CLOCK_STATES, nextState, servesSynchronised, type ClockState } from './clock-state.ts';

export { CLOCK_STATES, type ClockState };

/**
 * The clock manager: disciplines the *served* clock — never the system clock — from every registered
 * reference source (upstream NTP peers; a GPSDO or an NTS-authenticated peer plugs into the same
 * interface). It wires three concerns, each in its own module:
 *
 * - selection (selection.ts): which source is the reference (RFC 5905 §11.2);
 * - discipline (discipline.ts): the estimate of reference − raw clock, with its errors;
 * - state (clock-state.ts): INIT/SYNCING/LOCKED/HOLDOVER/FAULT;
 *
 * and plans the served clock's correction (correction.ts): served = raw + c(t), stepped only while
 * replies say "unsynchronised" (or forward beyond the step threshold), otherwise slewed at a bounded rate
 * so served time never runs backwards. What it advertises (root delay and dispersion) always covers its
 * own error estimate: the remaining slew, the estimate's errors, and their growth with time.
 */

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
  /** Poll interval, log2 s (sets how long a silence may last before the source counts as gone). */
  pollLog2?: number;
  /** The samples are cryptographically authenticated (NTS); shown in status, selection treats all alike. */
  authenticated?: boolean;
}

export interface ReferenceSource {
  /** `NTP:<host>:<port>`, `GPSDO:Dummy`, `GPSDO:SerialPPS`, `LOCAL`. */
  readonly id: string;
  readonly kind: SourceKind;
  readonly prefer: boolean;
  status(): ReferenceStatus;
}

/**
 * One measurement from a source: the offset (reference − raw local clock) and delay of this exchange, the
 * source's filter dispersion and jitter, at monotonic time atMs (the middle of the exchange).
 */
export interface ReferenceSample {
  offsetS: number;
  delayS: number;
  dispersionS: number;
  jitterS: number;
  atMs: number;
}

export interface ClockManagerOptions {
  clock: Clock;
  /** Tick period (1 s). */
  tickMs?: number;
  /** Lock threshold floor (100 µs); the effective threshold is max(this, 3 × jitter). */
  lockThresholdS?: number;
  /** Samples a source needs before selection, and the estimate before it is served (4, an iburst). */
  minSamples?: number;
  /** |estimate − served| above which the clock is in FAULT (1 s). */
  faultThresholdS?: number;
  /** Longest HOLDOVER before FAULT (4 h). */
  holdoverTimeoutMs?: number;
  /** Samples in the least-squares window. */
  regressionWindow?: number;
  /** Corrections beyond this are stepped (forward) or served as LI 3 and then stepped (backward) (128 ms). */
  stepThresholdS?: number;
  /** Largest slew rate of the served clock (5000 ppm = 5 ms/s). */
  maxSlewRate?: number;
  /** Our precision, log2 seconds. */
  precision?: number;
  /**
   * Local-stratum mode: the host clock is a last-resort reference with this stratum. `offsetS` reads
   * host realtime − raw clock (0 when not given).
   */
  local?: { stratum: number; referenceId: number; offsetS?: () => number } | undefined;
}

export interface SourceSnapshot {
  id: string;
  kind: SourceKind;
  prefer: boolean;
  usable: boolean;
  candidate: boolean;
  falseticker: boolean;
  selected: boolean;
  verdict: Verdict;
  stratum: number;
  offsetS: number | undefined;
  jitterS: number | undefined;
  rootDistanceS: number | undefined;
  lastSampleMs: number | undefined;
  authenticated: boolean;
}

export interface ClockSnapshot {
  state: ClockState;
  /** Reference − served clock for the last sample of the selected source, seconds. */
  offsetS: number;
  /** Standard error of the phase estimate, seconds. */
  offsetStddevS: number;
  /** Frequency estimate: served − raw rate, parts per billion. */
  driftPpb: number;
  /** Standard error of the frequency estimate, ppb. */
  driftErrorPpb: number;
  /** Correction still being slewed in, seconds. */
  remainingSlewS: number;
  /** What the server advertises now: root delay / 2 + root dispersion (∞ while unsynchronised). */
  estimatedErrorS: number;
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
  /** Samples held back as possible spikes since start. */
  spikes: number;
  /** Steps of the served clock since start. */
  steps: number;
  sources: SourceSnapshot[];
}

export type ClockManagerEvent =
  | { type: 'state'; from: ClockState; to: ClockState; reason: string }
  | { type: 'selected'; from: string | undefined; to: string | undefined }
  | { type: 'step'; source: string; offsetS: number }
  /** The correction changed: the served clock must take `manager.correction`. */
  | { type: 'update' };

interface SourceEntry {
  source: ReferenceSource;
  samples: ReferenceSample[];
  verdict: Verdict;
  rootDistanceS: number | undefined;
}

/** What is advertised, from the selected reference, kept through HOLDOVER. */
interface Advert {
  status: ReferenceStatus;
  delayS: number;
  dispersionS: number;
  jitterS: number;
}

const LOCAL_ID = 'LOCAL';
/** Consecutive high-delay samples left out before they are taken as the path's new normal. */
const MAX_DELAY_REJECTS = 4;
/** Longest wait for other sources' bursts before choosing a reference from none. */
const MAX_BURST_WAIT_MS = 16_000;
const SAMPLE_HISTORY = 16;

export class ClockManager {
  readonly #clock: Clock;
  readonly #o: Required<Omit<ClockManagerOptions, 'clock' | 'local'>>;
  readonly #local: ClockManagerOptions['local'];
  readonly #sources = new Map<string, SourceEntry>();
  readonly #listeners: ((e: ClockManagerEvent) => void)[] = [];
  readonly #discipline: Discipline;
  #state: ClockState = 'INIT';
  #selected: string | undefined;
  #lastReference: string | undefined;
  #correction: Correction = ZERO_CORRECTION;
  /** The served clock has been put onto a usable estimate since INIT/FAULT. */
  #synced = false;
  /** |residual| of a sample held back as a possible spike (0 when none). */
  #suspectS = 0;
  #lastResidual = 0;
  #lastSampleMs: number | undefined;
  #lastUpdateMs: number | undefined;
  #lastUpdateWallMs: number | undefined;
  #holdoverStartedMs: number | undefined;
  #advert: Advert | undefined;
  #serverState: ServerSystemState;
  #timer: TimerHandle | undefined;
  #spikes = 0;
  #steps = 0;
  #selectionJitterS = 0;
  #delayRejects = 0;
  /** Samples of the selected reference since the estimate was last reset (delay-gated ones included). */
  #samplesSinceReset = 0;
  /** Monotonic ms since when selection has been waiting for sources in their burst. */
  #waitingSinceMs: number | undefined;

  constructor(options: ClockManagerOptions) {
    this.#clock = options.clock;
    this.#o = {
      tickMs: options.tickMs ?? 1000,
      lockThresholdS: options.lockThresholdS ?? 100e-6,
      minSamples: options.minSamples ?? 4,
      faultThresholdS: options.faultThresholdS ?? 1,
      holdoverTimeoutMs: options.holdoverTimeoutMs ?? 4 * 3600_000,
      regressionWindow: options.regressionWindow ?? 32,
      stepThresholdS: options.stepThresholdS ?? 0.128,
      maxSlewRate: options.maxSlewRate ?? 5000e-6,
      precision: options.precision ?? -20,
    };
    this.#discipline = new Discipline({ window: this.#o.regressionWindow });
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

  /** The served clock's correction (correction.ts). */
  get correction(): Correction {
    return this.#correction;
  }

  /** c(t) in seconds at monotonic milliseconds `tMs`. */
  correctionAt(tMs: number): number {
    return correctionAt(this.#correction, tMs);
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
    this.#sources.set(source.id, {
      source,
      samples: [],
      verdict: 'too_few_samples',
      rootDistanceS: undefined,
    });
  }

  unregister(id: string): void {
    this.#sources.delete(id);
    if (this.#selected === id) {
      this.#select();
      this.#evaluate();
    }
  }

  /** Start the periodic tick (selection, state, advertised dispersion, local reference). */
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
    entry.samples.push(sample);
    if (entry.samples.length > SAMPLE_HISTORY) entry.samples.shift();
    if (this.#state === 'HOLDOVER' && id === this.#lastReference) this.#holdoverSuspect(sample);
    const changed = this.#select();
    // A newly selected reference was seeded with its run, this sample included.
    if (this.#selected === id && !changed) this.#discipline1(sample);
    this.#evaluate();
  }

  /** Periodic evaluation; the timer calls it, tests call it directly. */
  tick(): void {
    const local = this.#local;
    const entry = this.#sources.get(LOCAL_ID);
    if (local && entry) {
      const now = this.#clock.monotonicMs();
      const precisionS = 2 ** this.#o.precision;
      const sample = {
        offsetS: local.offsetS?.() ?? 0,
        delayS: 0,
        dispersionS: 0,
        jitterS: precisionS,
        atMs: now,
      };
      this.addSample(LOCAL_ID, sample);
      return;
    }
    this.#select();
    this.#evaluate();
  }

  #emit(e: ClockManagerEvent): void {
    for (const l of this.#listeners) l(e);
  }

  #setState(to: ClockState, reason: string): void {
    if (to === this.#state) return;
    const from = this.#state;
    this.#state = to;
    const now = this.#clock.monotonicMs();
    this.#holdoverStartedMs = to === 'HOLDOVER' ? now : undefined;
    if (to === 'FAULT') {
      // Nothing of the old estimate is trusted: phase and frequency start again (README "Clock states").
      this.#discipline.reset(false);
      this.#samplesSinceReset = 0;
      this.#synced = false;
      this.#suspectS = 0;
    }
    this.#emit({ type: 'state', from, to, reason });
  }

  /** Consecutive samples of a source with no silence longer than its gap limit, up to now. */
  #runSamples(entry: SourceEntry, now: number): ReferenceSample[] {
    const pollS = 2 ** (entry.source.status().pollLog2 ?? 0);
    const gapMs = Math.max(8000, 4 * pollS * 1000);
    const s = entry.samples;
    const newest = s[s.length - 1];
    if (newest === undefined || now - newest.atMs > gapMs) return [];
    let i = s.length - 1;
    while (i > 0 && (s[i]?.atMs ?? 0) - (s[i - 1]?.atMs ?? 0) <= gapMs) i--;
    return s.slice(i);
  }

  /** Run selection; on a change of reference (also from or to none) reseed the estimate. */
  #select(): boolean {
    const now = this.#clock.monotonicMs();
    const inputs: SelectionInput[] = [];
    for (const entry of this.#sources.values()) {
      const st = entry.source.status();
      const last = entry.samples[entry.samples.length - 1];
      const run = this.#runSamples(entry, now);
      inputs.push({
        id: entry.source.id,
        kind: entry.source.kind,
        prefer: entry.source.prefer,
        usable: st.usable && last !== undefined,
        stratum: st.stratum,
        leap: st.leap,
        rootDelayS: st.rootDelayS,
        rootDispersionS: st.rootDispersionS,
        offsetS: last?.offsetS ?? 0,
        delayS: last?.delayS ?? 0,
        dispersionS: last?.dispersionS ?? 0,
        jitterS: runJitter(run, 2 ** this.#o.precision),
        atMs: last?.atMs ?? now,
        runSamples: run.length,
        pollLog2: st.pollLog2 ?? 0,
      });
    }
    const result = selectReference(inputs, {
      minSamples: this.#o.minSamples,
      nowMs: now,
      current: this.#selected,
      // The wait for bursts is bounded: a source that never completes one does not hold the others.
      waitForBursts: this.#waitingSinceMs === undefined || now - this.#waitingSinceMs < MAX_BURST_WAIT_MS,
      waitForSilent: this.#lastReference === undefined,
    });
    if (result.selected !== undefined) this.#waitingSinceMs = undefined;
    else if (result.waiting) this.#waitingSinceMs ??= now;
    this.#selectionJitterS = result.selectionJitterS;
    for (const entry of this.#sources.values()) {
      entry.verdict = result.verdicts.get(entry.source.id) ?? 'unusable';
      entry.rootDistanceS = result.rootDistances.get(entry.source.id);
    }
    const id = result.selected;
    if (id === this.#selected) return false;
    const from = this.#selected;
    this.#selected = id;
    this.#emit({ type: 'selected', from, to: id });
    const entry = id === undefined ? undefined : this.#sources.get(id);
    if (entry) {
      // The frequency measured against the host clock (local stratum) says nothing about a real reference.
      const priorValid =
        this.#lastReference === undefined || this.#sources.get(this.#lastReference)?.source.kind !== 'local';
      this.#lastReference = id;
      this.#reseed(entry, now, priorValid);
    }
    return true;
  }

  /**
   * A reference was (re)selected: a new reference, or the same one after a silence. The fit restarts from
   * this reference's current run of samples; coming back from HOLDOVER, the clock is LOCKED at once when
   * the new estimate agrees with the held-over clock within the error it was advertising.
   */
  #reseed(entry: SourceEntry, now: number, priorValid: boolean): void {
    // The held-over clock's error estimate, without what its returning reference already suggested.
    const errorBefore = this.#ownErrorS(now) - this.#suspectS;
    this.#discipline.reset(priorValid && this.#state !== 'FAULT' && this.#state !== 'INIT');
    // The host clock runs at the raw clock's rate exactly (the kernel slews both alike).
    if (entry.source.kind === 'local') this.#discipline.assumeFrequency(0, 0);
    this.#suspectS = 0;
    const run = this.#runSamples(entry, now);
    const jitter = runJitter(run, 2 ** this.#o.precision);
    for (const s of run.filter((x) => x.delayS <= delayGate(run))) {
      this.#discipline.add(s.atMs / 1000, s.offsetS, jitter);
    }
    this.#delayRejects = 0;
    this.#samplesSinceReset = run.length;
    const last = entry.samples[entry.samples.length - 1];
    if (last) this.#noteSample(entry, last, jitter);
    if (this.#state === 'HOLDOVER' && this.#synced) {
      const diff = Math.abs(this.#target(now) - correctionAt(this.#correction, now));
      const est = this.#discipline.estimate();
      const allowance = errorBefore + (est?.k ?? K_SIGMA) * (est?.phaseErrorS ?? 0);
      if (diff <= allowance) {
        this.#setState('LOCKED', `reference ${entry.source.id} returned within the holdover error`);
      } else {
        this.#setState('SYNCING', `reference ${entry.source.id} returned ${(diff * 1e3).toFixed(3)} ms away`);
      }
    }
    this.#replan(entry.source.id, now);
  }

  /**
   * In HOLDOVER the returning reference is not selected again before it has a run of samples, but each of
   * them already says how far the held-over clock may be off: the advertised dispersion covers it.
   */
  #holdoverSuspect(sample: ReferenceSample): void {
    const now = this.#clock.monotonicMs();
    const residual = Math.abs(sample.offsetS - correctionAt(this.#correction, sample.atMs));
    if (residual > this.#ownErrorS(now) - this.#suspectS) this.#suspectS = Math.max(this.#suspectS, residual);
  }

  /** A further sample of the selected reference. */
  #discipline1(sample: ReferenceSample): void {
    const id = this.#selected;
    const entry = id === undefined ? undefined : this.#sources.get(id);
    if (id === undefined || entry === undefined) return;
    // Jitter and delay gate from the samples before this one: a spike must not widen its own gate.
    const run = this.#runSamples(entry, sample.atMs).slice(0, -1);
    this.#samplesSinceReset++;
    const jitter = runJitter(run, 2 ** this.#o.precision);
    // A sample whose round trip is far above the run's best carries up to half of that as error (RFC 5905
    // §8): left out, unless that has become the normal delay (several in a row).
    if (sample.delayS > delayGate(run) && this.#delayRejects < MAX_DELAY_REJECTS) {
      this.#delayRejects++;
      return;
    }
    this.#delayRejects = 0;
    const out = this.#discipline.add(sample.atMs / 1000, sample.offsetS, jitter);
    this.#noteSample(entry, sample, jitter);
    if (out.kind === 'spike') {
      // Held back, but until the next sample tells, the served clock may be this far off: advertise it.
      this.#spikes++;
      this.#suspectS = Math.abs(out.residualS);
      return;
    }
    this.#suspectS = 0;
    this.#replan(id, this.#clock.monotonicMs());
  }

  #noteSample(entry: SourceEntry, sample: ReferenceSample, jitterS: number): void {
    const delays = this.#runSamples(entry, sample.atMs)
      .slice(-8)
      .map((s) => s.delayS);
    this.#advert = {
      status: entry.source.status(),
      delayS: Math.max(sample.delayS, ...delays),
      dispersionS: sample.dispersionS,
      jitterS,
    };
    this.#lastSampleMs = sample.atMs;
    this.#lastResidual = sample.offsetS - correctionAt(this.#correction, sample.atMs);
    this.#lastUpdateMs = sample.atMs;
    this.#lastUpdateWallMs = this.#clock.now() - (this.#clock.monotonicMs() - sample.atMs);
  }

  /** The estimate of reference − raw at monotonic ms `now`. */
  #target(now: number): number {
    return this.#discipline.predict(now / 1000);
  }

  #minSamplesFor(id: string): number {
    return this.#sources.get(id)?.source.kind === 'local' ? 1 : this.#o.minSamples;
  }

  /** Plan the served correction towards the estimate: step where allowed, else slew (correction.ts). */
  #replan(id: string, now: number): void {
    const est = this.#discipline.estimate();
    if (est === undefined) return;
    const target = this.#target(now);
    const diff = target - correctionAt(this.#correction, now);
    const rate = this.#o.maxSlewRate;
    if (!this.#synced) {
      // Replies say "unsynchronised" (LI 3): the served clock may step, in either direction.
      if (this.#samplesSinceReset < this.#minSamplesFor(id)) return;
      this.#step(id, now, target, est.freq);
      this.#synced = true;
    } else if (Math.abs(diff) > this.#o.faultThresholdS) {
      this.#setState(
        'FAULT',
        `estimate ${diff.toFixed(6)} s from the served clock exceeds the fault threshold`,
      );
      return;
    } else if (diff > this.#o.stepThresholdS) {
      this.#step(id, now, target, est.freq); // forward: served time still never decreases
    } else if (diff < -this.#o.stepThresholdS) {
      // Backwards beyond the step threshold: tell clients "unsynchronised" first; the next sample steps.
      this.#synced = false;
      // The step waits for a usable estimate at the new level, as at start-up.
      this.#samplesSinceReset = est.samples;
      if (this.#state !== 'SYNCING') this.#setState('SYNCING', 'backward step needed');
      return;
    } else {
      this.#correction = slewTowards(this.#correction, now, target, est.freq, rate);
    }
    this.#emit({ type: 'update' });
  }

  #step(id: string, now: number, target: number, freq: number): void {
    const before = correctionAt(this.#correction, now);
    this.#correction = stepTo(now, target, freq, this.#o.maxSlewRate);
    this.#steps++;
    this.#emit({ type: 'step', source: id, offsetS: target - before });
  }

  #lockThreshold(): number {
    return Math.max(this.#o.lockThresholdS, 3 * (this.#advert?.jitterS ?? 0));
  }

  /**
   * Our own error estimate at `now` (without the reference's root distance): the correction still to be
   * slewed, the phase error, a suspect sample, and the growth since the last sample with PHI (RFC 5905
   * §11.3) plus the frequency error.
   */
  #ownErrorS(now: number): number {
    const est = this.#discipline.estimate();
    if (est === undefined || this.#lastSampleMs === undefined) return 0;
    const age = Math.max(0, now - this.#lastSampleMs) / 1000;
    return (
      Math.abs(remainingSlew(this.#correction, now)) +
      est.k * est.phaseErrorS +
      this.#suspectS +
      (PHI + est.k * est.freqError) * age
    );
  }

  #evaluate(): void {
    const now = this.#clock.monotonicMs();
    for (let i = 0; i < 4; i++) {
      const t = nextState(this.#state, {
        selected: this.#selected !== undefined,
        synced: this.#synced,
        remainingS: Math.abs(remainingSlew(this.#correction, now)),
        suspect: this.#suspectS > 0,
        lockThresholdS: this.#lockThreshold(),
        holdoverExpired:
          this.#holdoverStartedMs !== undefined && now - this.#holdoverStartedMs > this.#o.holdoverTimeoutMs,
      });
      if (!t) break;
      this.#setState(t.to, t.reason);
    }
    this.#updateServerState(now);
  }

  #updateServerState(now: number): void {
    const adv = this.#advert;
    const est = this.#discipline.estimate();
    // A stratum-15 reference would make us 16, which RFC 5905 §7.3 defines as unsynchronised.
    const tooDeep = adv !== undefined && adv.status.stratum + 1 >= MAXSTRAT;
    if (!servesSynchronised(this.#state, this.#synced) || tooDeep || !adv || !est) {
      if (this.#serverState.leap !== LEAP.UNSYNCHRONISED) {
        this.#serverState = { ...UNSYNCHRONISED_STATE, precision: this.#o.precision };
      }
      return;
    }
    const wall = this.#lastUpdateWallMs ?? this.#clock.now();
    this.#serverState = {
      leap: adv.status.leap === LEAP.UNSYNCHRONISED ? LEAP.NONE : adv.status.leap,
      stratum: Math.min(MAXSTRAT, adv.status.stratum + 1),
      precision: this.#o.precision,
      referenceId: adv.status.referenceId,
      referenceTimestamp: unixToNtp(Math.floor(wall / 1000), (wall % 1000) * 1e6),
      rootDelayS: adv.status.rootDelayS + adv.delayS,
      rootDispersionS:
        adv.status.rootDispersionS +
        adv.dispersionS +
        adv.jitterS +
        this.#selectionJitterS +
        this.#ownErrorS(now),
      dispersionRateS: PHI + est.k * est.freqError,
      updatedAtMs: now,
    };
  }

  snapshot(): ClockSnapshot {
    const now = this.#clock.monotonicMs();
    const sources: SourceSnapshot[] = [];
    for (const e of this.#sources.values()) {
      const st = e.source.status();
      const last = e.samples[e.samples.length - 1];
      sources.push({
        id: e.source.id,
        kind: e.source.kind,
        prefer: e.source.prefer,
        usable: st.usable,
        candidate: e.verdict === 'candidate' || e.verdict === 'selected',
        falseticker: e.verdict === 'falseticker',
        selected: this.#selected === e.source.id,
        verdict: e.verdict,
        stratum: st.stratum,
        offsetS: last ? last.offsetS - correctionAt(this.#correction, last.atMs) : undefined,
        jitterS: last?.jitterS,
        rootDistanceS: e.rootDistanceS,
        lastSampleMs: last?.atMs,
        authenticated: st.authenticated ?? false,
      });
    }
    const synced = this.#serverState.leap !== LEAP.UNSYNCHRONISED;
    const s = this.#serverState;
    const est = this.#discipline.estimate();
    return {
      state: this.#state,
      offsetS: this.#lastResidual,
      offsetStddevS: est?.phaseErrorS ?? 0,
      driftPpb: this.#correction.freq * 1e9,
      driftErrorPpb: (est?.freqError ?? 0) * 1e9,
      remainingSlewS: remainingSlew(this.#correction, now),
      estimatedErrorS: synced
        ? s.rootDelayS / 2 +
          s.rootDispersionS +
          ((s.dispersionRateS ?? PHI) * Math.max(0, now - s.updatedAtMs)) / 1000
        : Number.POSITIVE_INFINITY,
      stratum: synced ? s.stratum : MAXSTRAT,
      selected: this.#selected,
      lastReference: this.#lastReference,
      jitterS: this.#advert?.jitterS ?? 0,
      lastUpdateMs: this.#lastUpdateMs,
      lastUpdateWallMs: this.#lastUpdateWallMs,
      holdoverStartedMs: this.#holdoverStartedMs,
      holdoverRemainingMs:
        this.#holdoverStartedMs === undefined
          ? undefined
          : Math.max(0, this.#o.holdoverTimeoutMs - (now - this.#holdoverStartedMs)),
      spikes: this.#spikes,
      steps: this.#steps,
      sources,
    };
  }
}

/** Samples with a delay above this are left out of the estimate: three times the run's lowest + 500 µs. */
export function delayGate(run: readonly ReferenceSample[]): number {
  let min = Number.POSITIVE_INFINITY;
  for (const s of run.slice(-8)) min = Math.min(min, s.delayS);
  return Number.isFinite(min) ? 3 * min + 500e-6 : Number.POSITIVE_INFINITY;
}

/**
 * Jitter of a run of samples (the noise of its offsets; RFC 5905 §10 peer jitter plays this role), over the
 * current run only so that samples from before a silence do not count. Estimated robustly, from the median
 * of the successive differences, so that a level change or a single spike does not pass for noise (which
 * would widen the spike gate and the root distance exactly when they matter).
 */
export function runJitter(run: readonly ReferenceSample[], floorS: number): number {
  const recent = run.slice(-8);
  if (recent.length < 2) return Math.max(floorS, recent[0]?.jitterS ?? floorS);
  const diffs: number[] = [];
  recent.forEach((s, i) => {
    const prev = recent[i - 1];
    if (prev) diffs.push(Math.abs(s.offsetS - prev.offsetS));
  });
  return Math.max(floorS, (1.4826 * median(diffs)) / Math.SQRT2);
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
