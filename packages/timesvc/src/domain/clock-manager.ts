import { createHash } from 'node:crypto';
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { LEAP, MAXDIST, MAXSTRAT, PHI, unixToNtp } from '../protocol/ntp-packet.ts';
import { UNSYNCHRONISED_STATE, type ServerSystemState } from './ntp-responder.ts';
import { expandIpv6 } from './ip-address.ts';
import { selectReference, type SelectionInput, type Verdict } from './selection.ts';
export { delayGate, runJitter } from './sample-run.ts';
import { Discipline, K_SIGMA, type Estimate } from './discipline.ts';
import { delayGate, runJitter } from './sample-run.ts';
import type {
  ClockManagerEvent,
  ClockSnapshot,
  Disagreement,
  ReferenceSample,
  ReferenceSource,
  ReferenceStatus,
  SourceSnapshot,
} from './reference-source.ts';
import { correctionAt, type Correction } from './correction.ts';
import { DAY_MS, type LeapMode, type LeapSecondsList, type PendingLeap } from './leap.ts';
import { LeapSchedule } from './leap-schedule.ts';
import { ServedCorrection } from './served-correction.ts';
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

export type {
  ClockManagerEvent,
  ClockSnapshot,
  Disagreement,
  ReferenceSample,
  ReferenceSource,
  ReferenceStatus,
  SourceKind,
  SourceSnapshot,
} from './reference-source.ts';

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
   * Wander of the raw clock between samples while a reference is followed (chrony's maxclockerror, 1 ppm):
   * with the frequency error's coverage, the growth rate of the advertised dispersion. HOLDOVER grows at
   * PHI (15 ppm, RFC 5905) instead (docs/clock-discipline.md "The advertised bound").
   */
  maxClockError?: number;
  /**
   * Unix ms of the served clock's raw timescale at a monotonic instant (io/served-clock.ts rawUnixMs).
   * The reference timestamp is served time, so a step of the host's realtime clock must not reach it
   * (RFC 5905 §A.5.1.1: a reference timestamp after the transmit timestamp makes the reply invalid).
   * Default: the injected clock's wall time at that instant.
   */
  rawUnixMs?: (monoMs: number) => number;
  /**
   * Local-stratum mode: the host clock is a last-resort reference with this stratum. `offsetS` reads
   * host realtime − raw clock (0 when not given).
   */
  local?: { stratum: number; referenceId: number; offsetS?: () => number } | undefined;
  /**
   * When the selected GPSDO (kind `gpsdo`) loses lock, stay in HOLDOVER on it this long before NTP peers may
   * be selected (0 = fall back at once). docs/gpsdo.md "Loss of the GPSDO".
   */
  primaryHoldoverMs?: number;
  /** How served time passes a leap second (docs/leap-seconds.md): `step` (default) or `smear`. */
  leapMode?: LeapMode;
  /** Length of the smear window, centred on the leap, ms (24 h: 11.6 ppm). */
  leapSmearMs?: number;
  /** The leap-seconds list, when one is configured and readable (io/leap-list.ts). */
  leapList?: () => LeapSecondsList | undefined;
  /**
   * A source whose level moved beyond the step threshold from the served clock is held back this long
   * unless an independent source confirms the new level (the stepout of RFC 5905 §11.3; 300 s as in ntpd
   * 4.2.8; 0 = follow at once). docs/clock-discipline.md "No single reference decides whole seconds".
   */
  stepoutMs?: number;
}

/** Samples this close to the leap instant are left out (an exchange may straddle it), ms. */
const LEAP_GUARD_MS = 2000;

interface SourceEntry {
  source: ReferenceSource;
  samples: ReferenceSample[];
  verdict: Verdict;
  rootDistanceS: number | undefined;
  /** The source's level is beyond the step threshold from the served clock (a step suspect). */
  away: Away | undefined;
  /** Samples before this monotonic ms were at a level that was not followed: they seed nothing. */
  levelSinceMs: number;
}

/** A step suspect: since when the source has been at its new level, and that level (source − served). */
interface Away {
  sinceMs: number;
  offsetS: number;
  lastMs: number;
  /** Followed: the stepout passed or an independent source confirmed the level. */
  accepted: boolean;
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
/** The stepout (RFC 5905 §11.3; ntpd's `tinker stepout`, 300 s): a step is followed once it persisted this long. */
export const STEPOUT_MS = 300_000;

/**
 * |residual| less what the sample's extra round trip over the run's best can explain: a reply delayed by d on
 * one path is off by up to d/2 (RFC 5905 §8) with the clock right. That delay is advertised in the root delay
 * already, so only the rest may be the clock's (or the reference's) error.
 */
function unexplainedS(sample: ReferenceSample, residualS: number, run: readonly ReferenceSample[]): number {
  const minDelayS = Math.min(sample.delayS, ...run.map((s) => s.delayS));
  return Math.max(0, Math.abs(residualS) - (sample.delayS - minDelayS) / 2);
}

export class ClockManager {
  readonly #clock: Clock;
  readonly #o: Required<
    Omit<
      ClockManagerOptions,
      'clock' | 'local' | 'rawUnixMs' | 'primaryHoldoverMs' | 'leapList' | 'stepoutMs'
    >
  >;
  readonly #primaryHoldoverMs: number;
  readonly #stepoutMs: number;
  /** Step suspects since start (sources that moved beyond the step threshold and were held back). */
  #stepSuspects = 0;
  /** Monotonic ms when the selected GPSDO was lost (while bridging its loss in HOLDOVER). */
  #primaryLostMs: number | undefined;
  /** Leap seconds passed since start (seconds, UTC − the discipline's leap-free scale). */
  readonly #leap: LeapSchedule;
  readonly #rawUnixMs: ((monoMs: number) => number) | undefined;
  readonly #local: ClockManagerOptions['local'];
  readonly #sources = new Map<string, SourceEntry>();
  readonly #listeners: ((e: ClockManagerEvent) => void)[] = [];
  readonly #discipline: Discipline;
  readonly #served: ServedCorrection;
  #state: ClockState = 'INIT';
  #selected: string | undefined;
  #lastReference: string | undefined;
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
  #selectionJitterS = 0;
  #delayRejects = 0;
  /** Samples of the selected reference since the estimate was last reset (delay-gated ones included). */
  #samplesSinceReset = 0;
  /** Monotonic ms since when selection has been waiting for sources in their burst. */
  #waitingSinceMs: number | undefined;

  constructor(options: ClockManagerOptions) {
    this.#clock = options.clock;
    this.#rawUnixMs = options.rawUnixMs;
    this.#primaryHoldoverMs = options.primaryHoldoverMs ?? 0;
    this.#stepoutMs = options.stepoutMs ?? STEPOUT_MS;
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
      maxClockError: options.maxClockError ?? 1e-6,
      leapMode: options.leapMode ?? 'step',
      leapSmearMs: options.leapSmearMs ?? DAY_MS,
    };
    this.#discipline = new Discipline({ window: this.#o.regressionWindow });
    this.#served = new ServedCorrection({
      slewRate: this.#o.maxSlewRate,
      stepThresholdS: this.#o.stepThresholdS,
      faultThresholdS: this.#o.faultThresholdS,
    });
    this.#leap = new LeapSchedule({
      clock: this.#clock,
      list: options.leapList,
      mode: this.#o.leapMode,
      smearMs: this.#o.leapSmearMs,
      tickMs: this.#o.tickMs,
      leapFreeUnixMs: (m) => this.#rawUnix(m) + this.#served.at(m) * 1000,
      onInstant: () => {
        this.#evaluate();
      },
      emit: (e) => {
        this.#emit(e);
      },
    });
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
    const s = this.#serverState;
    // A leap announced until its instant is cleared from that instant on, also before the timer set for it has
    // run (a busy event loop fires it late): clients must not see the announcement once the leap is passed
    // (RFC 5905 §7.3; docs/leap-seconds.md). Served time itself steps at the instant through the correction.
    if (
      (s.leap === LEAP.ADD_SECOND || s.leap === LEAP.DEL_SECOND) &&
      this.#leap.indicator(this.#clock.monotonicMs()) === LEAP.NONE
    ) {
      this.#serverState = { ...s, leap: LEAP.NONE };
    }
    return this.#serverState;
  }

  /** The served clock's correction (correction.ts), with the leap-second terms. */
  get correction(): Correction {
    return this.#leap.withLeapTerms(this.#served.correction);
  }

  /** c(t) in seconds at monotonic milliseconds `tMs`, leap seconds included. */
  correctionAt(tMs: number): number {
    return correctionAt(this.correction, tMs);
  }

  /** The leap second planned or being passed (docs/leap-seconds.md), for status and metrics. */
  get pendingLeap(): (PendingLeap & { atMs: number | undefined }) | undefined {
    return this.#leap.pending();
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
      away: undefined,
      levelSinceMs: Number.NEGATIVE_INFINITY,
    });
  }

  unregister(id: string): void {
    this.#sources.delete(id);
    if (this.#selected === id) {
      this.#select();
      this.#evaluate();
    }
  }

  /**
   * Whether the last sample of source `id` was held back as a possible spike (it must not count towards
   * a longer poll interval).
   */
  heldBack(id: string): boolean {
    return id === this.#selected && this.#suspectS > 0;
  }

  /**
   * Whether source `id` may poll at `pollS` seconds: for the selected reference only once the estimate
   * is stable, i.e. its frequency error alone would not carry the served clock beyond the lock threshold
   * over that interval, and no sample is held back. Other sources do not steer the clock.
   */
  pollMayRise(id: string, pollS: number): boolean {
    if (id !== this.#selected) return true;
    if (this.#suspectS > 0) return false;
    const est = this.#discipline.estimate();
    if (est === undefined) return false;
    return est.k * est.freqError * pollS <= this.#lockThreshold();
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
    const leapAtMs = this.#leap.instant();
    // An exchange close to the leap instant may have been answered on either side of it: left out.
    if (
      leapAtMs !== undefined &&
      entry.source.kind !== 'local' &&
      Math.abs(sample.atMs - leapAtMs) < LEAP_GUARD_MS + sample.delayS * 1000
    ) {
      return;
    }
    // The discipline works on the leap-free scale: a reference that has passed a leap second is measured
    // 1 s off the raw clock, which is the leap and not the oscillator (docs/leap-seconds.md).
    if (entry.source.kind !== 'local') {
      const leap = this.#leap.utcLeapAt(sample.atMs, leapAtMs);
      if (leap !== 0) sample = { ...sample, offsetS: sample.offsetS - leap };
    }
    entry.samples.push(sample);
    if (entry.samples.length > SAMPLE_HISTORY) entry.samples.shift();
    this.#judgeLevel(entry, sample);
    const heldBack = entry.away !== undefined && !entry.away.accepted;
    if (this.#state === 'HOLDOVER' && id === this.#lastReference && !heldBack) this.#holdoverSuspect(sample);
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
      this.#served.unsync();
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
    // A held-back level is not part of the run (nor the level before a followed step).
    return s.slice(i).filter((x) => x.atMs >= entry.levelSinceMs);
  }

  /**
   * No single reference decides whole seconds (docs/clock-discipline.md): a sample beyond the step
   * threshold from the served clock puts its source at a new level, held back from selection until the
   * level has persisted for the stepout or an independent source confirms it. The host clock (local
   * stratum) is exempt: it is the last resort, not a reference that can be outvoted.
   */
  #judgeLevel(entry: SourceEntry, sample: ReferenceSample): void {
    // Stepout 0: every level is followed at once, through the discipline's level-change rule alone.
    if (entry.source.kind === 'local' || this.#stepoutMs <= 0) return;
    if (!this.#served.synced) {
      // Unsynchronised (LI 3): there is no served level to hold, and the next usable estimate is followed.
      if (entry.away && !entry.away.accepted) entry.away = undefined;
      return;
    }
    const residual = sample.offsetS - this.#served.at(sample.atMs);
    const away = entry.away;
    // An exchange stalled on one path by d is off by up to d/2 with no level change behind it (RFC 5905 §8):
    // only the part of the residual its extra delay over the run's best cannot explain makes it a suspect.
    if (unexplainedS(sample, residual, this.#runSamples(entry, sample.atMs)) <= this.#o.stepThresholdS) {
      if (away === undefined) return;
      entry.away = undefined;
      // Back at the served level: what it said meanwhile was not followed and seeds nothing.
      if (!away.accepted) {
        entry.levelSinceMs = sample.atMs;
        this.#emit({ type: 'suspect', phase: 'returned', source: entry.source.id, offsetS: residual });
      }
      return;
    }
    if (
      away !== undefined &&
      (away.accepted || Math.abs(residual - away.offsetS) <= this.#o.stepThresholdS)
    ) {
      away.offsetS = residual;
      away.lastMs = sample.atMs;
      return;
    }
    entry.away = { sinceMs: sample.atMs, offsetS: residual, lastMs: sample.atMs, accepted: false };
    entry.levelSinceMs = sample.atMs;
    this.#stepSuspects++;
    this.#emit({ type: 'suspect', phase: 'held', source: entry.source.id, offsetS: residual });
  }

  /**
   * Whether a source's current level may be followed: it is not a step suspect, or its suspect level has
   * persisted for the stepout, or another source (not the same one) measures the same level within the
   * two root distances.
   */
  #levelFollowed(entry: SourceEntry, now: number): boolean {
    const a = entry.away;
    if (a === undefined || a.accepted) return true;
    let by: string | undefined;
    if (now - a.sinceMs >= this.#stepoutMs) by = 'stepout';
    for (const o of this.#sources.values()) {
      if (by !== undefined) break;
      if (o === entry || o.source.kind === 'local' || !o.source.status().usable) continue;
      const last = o.samples[o.samples.length - 1];
      if (last === undefined || this.#runSamples(o, now).length === 0) continue;
      const theirs = last.offsetS - this.#served.at(last.atMs);
      const margin = (o.rootDistanceS ?? MAXDIST) + (entry.rootDistanceS ?? MAXDIST);
      if (Math.abs(theirs - a.offsetS) <= Math.min(margin, this.#o.stepThresholdS)) by = o.source.id;
    }
    if (by === undefined) return false;
    a.accepted = true;
    this.#emit({ type: 'suspect', phase: 'followed', source: entry.source.id, offsetS: a.offsetS, by });
    return true;
  }

  /** The references held back at a level beyond the step threshold, with a recent sample. */
  disagreements(): Disagreement[] {
    const now = this.#clock.monotonicMs();
    const out: Disagreement[] = [];
    for (const e of this.#sources.values()) {
      const a = e.away;
      if (a === undefined || a.accepted || this.#runSamples(e, now).length === 0) continue;
      out.push({
        source: e.source.id,
        offsetS: a.offsetS,
        sinceMs: a.sinceMs,
        stepoutEndsMs: a.sinceMs + this.#stepoutMs,
      });
    }
    return out;
  }

  /** The largest disagreement held back: the advertised bound includes it (the served clock may be wrong). */
  #disagreementS(): number {
    let worst = 0;
    for (const d of this.disagreements()) worst = Math.max(worst, Math.abs(d.offsetS));
    return worst;
  }

  /** The selected (or held-over) GPSDO is lost and its HOLDOVER bridge has not run out yet. */
  #bridgingPrimary(now: number): boolean {
    const id = this.#selected ?? (this.#state === 'HOLDOVER' ? this.#lastReference : undefined);
    const entry = id === undefined ? undefined : this.#sources.get(id);
    if (this.#primaryHoldoverMs <= 0 || entry?.source.kind !== 'gpsdo' || entry.source.status().usable) {
      this.#primaryLostMs = undefined;
      return false;
    }
    this.#primaryLostMs ??= now;
    return now - this.#primaryLostMs < this.#primaryHoldoverMs;
  }

  /** Run selection; on a change of reference (also from or to none) reseed the estimate. */
  #select(): boolean {
    const now = this.#clock.monotonicMs();
    const bridging = this.#bridgingPrimary(now);
    const inputs: SelectionInput[] = [];
    for (const entry of this.#sources.values()) {
      const st = entry.source.status();
      const last = entry.samples[entry.samples.length - 1];
      const run = this.#runSamples(entry, now);
      inputs.push({
        id: entry.source.id,
        kind: entry.source.kind,
        prefer: entry.source.prefer,
        usable: st.usable && last !== undefined && (!bridging || entry.source.kind === 'gpsdo'),
        held: !this.#levelFollowed(entry, now),
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
    // Losing every reference (HOLDOVER) does not make the servers agree: the last selection jitter stays in
    // the bound until a reference is selected again.
    if (result.selected !== undefined || !this.#served.synced) {
      this.#selectionJitterS = result.selectionJitterS;
    }
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
      this.#discipline.add(s.atMs / 1000, s.offsetS, jitter, s.delayS);
    }
    this.#delayRejects = 0;
    this.#samplesSinceReset = run.length;
    const last = entry.samples[entry.samples.length - 1];
    if (last) this.#noteSample(entry, last, jitter);
    if (this.#state === 'HOLDOVER' && this.#served.synced) {
      const diff = Math.abs(this.#target(now) - this.#served.at(now));
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
    const residual = Math.abs(sample.offsetS - this.#served.at(sample.atMs));
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
    // §8): left out, unless that has become the normal delay (several in a row), and never when leaving it
    // out would let the estimate's age exceed two polls while replies arrive (the weighted fit gives such a
    // sample little weight anyway; docs/clock-discipline.md "Delay gate").
    const pollMs = 2 ** (entry.source.status().pollLog2 ?? 0) * 1000;
    const sinceUpdateMs = sample.atMs - (this.#lastUpdateMs ?? sample.atMs);
    if (sample.delayS > delayGate(run) && this.#delayRejects < MAX_DELAY_REJECTS && sinceUpdateMs <= pollMs) {
      this.#delayRejects++;
      return;
    }
    this.#delayRejects = 0;
    const out = this.#discipline.add(sample.atMs / 1000, sample.offsetS, jitter, sample.delayS);
    this.#noteSample(entry, sample, jitter);
    if (out.kind === 'spike') {
      // Held back, but until the next sample tells, the served clock may be this far off: advertise it —
      // the part of the residual that the exchange's own extra delay cannot explain. An exchange stalled on
      // one path by d (a busy host, a queue) is off by up to d/2 with nothing wrong with the clock, and its
      // delay is already in the advertised root delay (#noteSample); only the rest may be the clock's error
      // (a sample's offset is uncertain by half its delay, RFC 5905 §8; chrony's dispersion keeps the delay
      // in root delay, not root dispersion).
      this.#spikes++;
      this.#suspectS = unexplainedS(sample, out.residualS, this.#runSamples(entry, sample.atMs));
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
      dispersionS: sample.sampleDispersionS ?? sample.dispersionS,
      jitterS,
    };
    this.#lastSampleMs = sample.atMs;
    this.#lastResidual = sample.offsetS - this.#served.at(sample.atMs);
    this.#lastUpdateMs = sample.atMs;
    this.#lastUpdateWallMs = this.#servedUnixMs(sample.atMs);
  }

  /** Served time (raw + correction) as Unix ms at monotonic ms `monoMs`: the reference timestamp's scale. */
  #servedUnixMs(monoMs: number): number {
    return this.#rawUnix(monoMs) + correctionAt(this.correction, monoMs) * 1000;
  }

  #rawUnix(monoMs: number): number {
    return this.#rawUnixMs
      ? this.#rawUnixMs(monoMs)
      : this.#clock.now() - (this.#clock.monotonicMs() - monoMs);
  }

  /** The leap schedule's plan at `now`, voting with the selected sources' leap bits once synchronised. */
  #updateLeap(now: number): boolean {
    return this.#leap.update(now, this.#served.synced, () => {
      const bits: number[] = [];
      for (const e of this.#sources.values()) {
        if (e.source.kind === 'local') continue;
        if (e.verdict === 'selected' || e.verdict === 'candidate') bits.push(e.source.status().leap);
      }
      return bits;
    });
  }

  /** The estimate of reference − raw at monotonic ms `now`. */
  #target(now: number): number {
    return this.#discipline.predict(now / 1000);
  }

  #minSamplesFor(id: string): number {
    return this.#sources.get(id)?.source.kind === 'local' ? 1 : this.#o.minSamples;
  }

  /** Plan the served correction towards the estimate (served-correction.ts). */
  #replan(id: string, now: number): void {
    const est = this.#discipline.estimate();
    if (est === undefined) return;
    const usable = this.#samplesSinceReset >= this.#minSamplesFor(id);
    const out = this.#served.plan(now, this.#target(now), est.freq, usable);
    switch (out.kind) {
      case 'wait':
        return;
      case 'fault':
        this.#setState(
          'FAULT',
          `estimate ${out.diffS.toFixed(6)} s from the served clock exceeds the fault threshold`,
        );
        return;
      case 'backward':
        // Replies say LI 3 from now on; the step waits for a usable estimate at the new level.
        this.#samplesSinceReset = est.samples;
        if (this.#state !== 'SYNCING') this.#setState('SYNCING', 'backward step needed');
        return;
      case 'step':
        this.#emit({ type: 'step', source: id, offsetS: out.stepS });
        break;
      case 'slew':
        break;
    }
    this.#emit({ type: 'update' });
  }

  #lockThreshold(): number {
    return Math.max(this.#o.lockThresholdS, 3 * (this.#advert?.jitterS ?? 0));
  }

  /**
   * Our own error estimate at `now` (without the reference's root distance): the correction still to be
   * slewed, the phase error, a suspect sample, and the growth since the last sample (#growthRate).
   */
  #ownErrorS(now: number): number {
    const est = this.#discipline.estimate();
    if (est === undefined || this.#lastSampleMs === undefined) return 0;
    const age = Math.max(0, now - this.#lastSampleMs) / 1000;
    return (
      Math.abs(this.#served.remaining(now)) +
      est.kPhase * est.phaseErrorS +
      this.#suspectS +
      this.#growthRate(est) * age
    );
  }

  /**
   * How fast the error grows without a sample (docs/clock-discipline.md "The advertised bound"): the
   * frequency error at its coverage, plus the raw clock's wander, chrony's maxclockerror (1 ppm), while a
   * reference is followed (chrony's root dispersion grows at skew + |residual frequency| + maxclockerror,
   * reference.c); in HOLDOVER the RFC 5905 tolerance PHI (15 ppm, §11.3), as nothing checks the wander.
   */
  #growthRate(est: Estimate): number {
    return (this.#state === 'HOLDOVER' ? PHI : this.#o.maxClockError) + est.k * est.freqError;
  }

  #evaluate(): void {
    const now = this.#clock.monotonicMs();
    for (let i = 0; i < 4; i++) {
      const t = nextState(this.#state, {
        selected: this.#selected !== undefined,
        synced: this.#served.synced,
        remainingS: Math.abs(this.#served.remaining(now)),
        suspect: this.#suspectS > 0,
        lockThresholdS: this.#lockThreshold(),
        advertisedBoundS: this.#advertisedBound(),
        holdoverExpired:
          this.#holdoverStartedMs !== undefined && now - this.#holdoverStartedMs > this.#o.holdoverTimeoutMs,
      });
      if (!t) break;
      this.#setState(t.to, t.reason);
    }
    this.#updateServerState(now);
  }

  /**
   * root delay / 2 + root dispersion of the current server state without a held-back sample's share (0
   * while unsynchronised): the hysteresis of LOCKED. A suspect sample widens the bound only until the next
   * sample decides; a level change it announced must still leave LOCKED.
   */
  #advertisedBound(): number {
    const s = this.#serverState;
    if (s.leap === LEAP.UNSYNCHRONISED) return 0;
    return Math.max(0, s.rootDelayS / 2 + s.rootDispersionS - this.#advertisedSuspectS);
  }

  /** The suspect share in the current server state's dispersion. */
  #advertisedSuspectS = 0;

  #updateServerState(now: number): void {
    const before = this.#serverState;
    this.#computeServerState(now);
    if (this.#serverState !== before) this.#emit({ type: 'advertised' });
  }

  #computeServerState(now: number): void {
    if (this.#updateLeap(now)) this.#emit({ type: 'update' });
    const adv = this.#advert;
    const est = this.#discipline.estimate();
    // A stratum-15 reference would make us 16, which RFC 5905 §7.3 defines as unsynchronised.
    const tooDeep = adv !== undefined && adv.status.stratum + 1 >= MAXSTRAT;
    if (!servesSynchronised(this.#state, this.#served.synced) || tooDeep || !adv || !est) {
      if (this.#serverState.leap !== LEAP.UNSYNCHRONISED) {
        this.#serverState = { ...UNSYNCHRONISED_STATE, precision: this.#o.precision };
      }
      return;
    }
    const wall = this.#lastUpdateWallMs ?? this.#servedUnixMs(now);
    const disagreementS = this.#disagreementS();
    this.#serverState = {
      // The leap bits are ours (docs/leap-seconds.md): the vote or the list, announced in the last day.
      leap: this.#leap.indicator(now),
      stratum: Math.min(MAXSTRAT, adv.status.stratum + 1),
      precision: this.#o.precision,
      referenceId: adv.status.referenceId,
      referenceTimestamp: unixToNtp(Math.floor(wall / 1000), (wall % 1000) * 1e6),
      rootDelayS: adv.status.rootDelayS + adv.delayS,
      rootDispersionS:
        adv.status.rootDispersionS +
        adv.dispersionS +
        // Not the reference's jitter: the phase estimate's error (in #ownErrorS) is the regression's, whose
        // residuals are that jitter; adding it again would count the same noise twice (chrony adds the
        // regression's offset SD, not a jitter; docs/clock-discipline.md "The advertised bound").
        this.#selectionJitterS +
        this.#ownErrorS(now) +
        this.#leap.smearDeviation(now) +
        disagreementS,
      dispersionRateS: this.#growthRate(est),
      updatedAtMs: now,
    };
    this.#advertisedSuspectS = this.#suspectS + disagreementS;
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
        offsetS: last ? last.offsetS - this.#served.at(last.atMs) : undefined,
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
      driftPpb: this.#served.correction.freq * 1e9,
      driftErrorPpb: (est?.freqError ?? 0) * 1e9,
      remainingSlewS: this.#served.remaining(now),
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
      steps: this.#served.steps,
      stepSuspects: this.#stepSuspects,
      disagreements: this.disagreements(),
      sources,
    };
  }
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
