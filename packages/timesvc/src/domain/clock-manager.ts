import type { Clock, TimerHandle } from '@broadcast-ops/core';
import { rootDispersionAt, type ServerSystemState } from './ntp-responder.ts';
import { Discipline } from './discipline.ts';
import { delayGate, runJitter } from './sample-run.ts';
import type {
  ClockManagerEvent,
  ClockSnapshot,
  Disagreement,
  ReferenceSample,
  ReferenceSource,
} from './reference-source.ts';
import { correctionAt, type Correction } from './correction.ts';
import type { PendingLeap } from './leap.ts';
import { LeapSchedule } from './leap-schedule.ts';
import { ServedCorrection } from './served-correction.ts';
import { CLOCK_STATES, nextState, type ClockState } from './clock-state.ts';
import { resolveOptions, type ClockManagerOptions, type ResolvedOptions } from './clock-manager-options.ts';
import {
  ReferenceSelection,
  holdoverReturn,
  localSource,
  unexplainedS,
  type SourceEntry,
} from './reference-selection.ts';
import { Advertiser } from './advertiser.ts';

export { delayGate, runJitter } from './sample-run.ts';
export { addressRefId, ipv4RefId } from './ip-address.ts';
export { STEPOUT_MS, type ClockManagerOptions } from './clock-manager-options.ts';
export { CLOCK_STATES, type ClockState };
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

/**
 * The clock manager: disciplines the *served* clock — never the system clock — from every registered
 * reference source (upstream NTP peers; a GPSDO or an NTS-authenticated peer plugs into the same
 * interface). A thin orchestrator over one module per concern:
 *
 * - reference selection (reference-selection.ts, selection.ts): which source is the reference (RFC 5905 §11.2);
 * - discipline (discipline.ts): the estimate of reference − raw clock, with its errors;
 * - state (clock-state.ts): INIT/SYNCING/LOCKED/HOLDOVER/FAULT;
 * - the served correction (served-correction.ts, correction.ts) and the leap schedule (leap-schedule.ts);
 * - the advertiser (advertiser.ts): stratum, leap indicator, root delay and dispersion, the PTP clock quality.
 *
 * Served = raw + c(t), stepped only while replies say "unsynchronised" (or forward beyond the step
 * threshold), otherwise slewed at a bounded rate so served time never runs backwards.
 */

/** Samples this close to the leap instant are left out (an exchange may straddle it), ms. */
const LEAP_GUARD_MS = 2000;
const LOCAL_ID = 'LOCAL';
/** Consecutive high-delay samples left out before they are taken as the path's new normal. */
const MAX_DELAY_REJECTS = 4;
/**
 * A tick this soon after an evaluation (a sample's) repeats it with the same inputs: skipped. The service's
 * tick (io/service-tick.ts) takes the GPSDO's sample just before the manager's tick, so without this the
 * selection and the evaluation ran twice a second at the same instant.
 */
const TICK_AFTER_EVALUATION_MS = 1;
/**
 * The longest the once-a-second tick skips its selection and evaluation while nothing but time changes
 * (`#quiet`): a safety net, not what keeps the transitions on time (docs/clock-discipline.md "Per second
 * and per sample").
 */
const QUIET_MAX_MS = 16_000;

export class ClockManager {
  readonly #clock: Clock;
  readonly #o: ResolvedOptions;
  readonly #leap: LeapSchedule;
  readonly #rawUnixMs: ((monoMs: number) => number) | undefined;
  readonly #local: ClockManagerOptions['local'];
  readonly #listeners: ((e: ClockManagerEvent) => void)[] = [];
  readonly #discipline: Discipline;
  readonly #served: ServedCorrection;
  readonly #selection: ReferenceSelection;
  readonly #advertiser: Advertiser;
  #state: ClockState = 'INIT';
  /** |residual| of a sample held back as a possible spike (0 when none). */
  #suspectS = 0;
  #holdoverStartedMs: number | undefined;
  #timer: TimerHandle | undefined;
  #spikes = 0;
  #delayRejects = 0;
  /** Samples of the selected reference since the estimate was last reset (delay-gated ones included). */
  #samplesSinceReset = 0;
  /** Monotonic ms of the last evaluation. */
  #evaluatedMs: number | undefined;
  /**
   * The correction changed and no event has said so yet: told once, at the end of the evaluation that
   * follows every replan (#evaluate), together with new reply fields when there are (one 'advertised'
   * event instead of 'update' then 'advertised'), so the served clock hands the native threads one new
   * piece per sample (docs/performance.md "Fourth pass").
   */
  #correctionChanged = false;
  /** The last tick found nothing but time changed (`#quiet`), and nothing has been evaluated since. */
  #quietTick = false;

  constructor(options: ClockManagerOptions) {
    this.#clock = options.clock;
    this.#rawUnixMs = options.rawUnixMs;
    this.#o = resolveOptions(options);
    this.#discipline = new Discipline({ window: this.#o.regressionWindow });
    this.#served = new ServedCorrection({
      slewRate: this.#o.maxSlewRate,
      stepThresholdS: this.#o.stepThresholdS,
      faultThresholdS: this.#o.faultThresholdS,
    });
    const emit = (e: ClockManagerEvent): void => {
      this.#emit(e);
    };
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
      emit,
    });
    this.#selection = new ReferenceSelection({ ...this.#o, clock: this.#clock, served: this.#served, emit });
    this.#advertiser = new Advertiser({
      ...this.#o,
      clock: this.#clock,
      served: this.#served,
      estimate: () => this.#discipline.estimate(),
      leap: this.#leap,
      servedUnixMs: (m) => this.#rawUnix(m) + correctionAt(this.correction, m) * 1000,
    });
    this.#local = options.local;
    if (this.#local) this.register(localSource(LOCAL_ID, this.#local));
  }

  get state(): ClockState {
    return this.#state;
  }

  /** The reply fields the NTP server sends; replaced (not mutated) on every change (advertiser.ts). */
  get serverState(): ServerSystemState {
    return this.#advertiser.serverState(this.#clock.monotonicMs());
  }

  /**
   * The last tick found that nothing but time had changed (no sample, no source's usability, LOCKED with no
   * slew: `#quiet`) and skipped its selection and evaluation, and nothing has been evaluated since: the
   * snapshot's sources, selection, state and stratum are what they were at the last evaluation (the web
   * layer's once-a-second reads skip the snapshot then, web-layer.ts).
   */
  get quietTick(): boolean {
    return this.#quietTick;
  }

  /** The advertised error bound now (the snapshot's `estimatedErrorS`) without the rest of the snapshot. */
  estimatedErrorS(): number {
    return this.#advertiser.estimatedErrorS(this.#clock.monotonicMs());
  }

  /** The root dispersion a reply sent now carries (the reply fields' value grown since `updatedAtMs`). */
  rootDispersionS(): number {
    return rootDispersionAt(this.serverState, this.#clock.monotonicMs());
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
    this.#selection.register(source);
  }

  unregister(id: string): void {
    if (!this.#selection.unregister(id)) return;
    this.#select();
    this.#evaluate();
  }

  /** Whether the last sample of source `id` was held back as a possible spike (no longer poll for it). */
  heldBack(id: string): boolean {
    return id === this.#selection.selected && this.#suspectS > 0;
  }

  /**
   * Whether source `id` may poll at `pollS` seconds: for the selected reference only once the estimate
   * is stable, i.e. its frequency error alone would not carry the served clock beyond the lock threshold
   * over that interval, and no sample is held back. Other sources do not steer the clock.
   */
  pollMayRise(id: string, pollS: number): boolean {
    if (id !== this.#selection.selected) return true;
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
    const entry = this.#selection.entry(id);
    if (entry === undefined) return;
    const leapAtMs = this.#leap.instant();
    if (entry.source.kind !== 'local') {
      // An exchange close to the leap instant may have been answered on either side of it: left out.
      if (leapAtMs !== undefined && Math.abs(sample.atMs - leapAtMs) < LEAP_GUARD_MS + sample.delayS * 1000)
        return;
      // The discipline works on the leap-free scale: a reference that has passed a leap second is measured
      // 1 s off the raw clock, which is the leap and not the oscillator (docs/leap-seconds.md).
      const leap = this.#leap.utcLeapAt(sample.atMs, leapAtMs);
      if (leap !== 0) sample = { ...sample, offsetS: sample.offsetS - leap };
    }
    const heldBack = this.#selection.addSample(entry, sample);
    if (this.#state === 'HOLDOVER' && id === this.#selection.lastReference && !heldBack) {
      // Not selected again before it has a run, but each sample already says how far the held-over clock
      // may be off: the advertised dispersion covers it.
      const residual = Math.abs(sample.offsetS - this.#served.at(sample.atMs));
      const bound = this.#ownErrorS(this.#clock.monotonicMs()) - this.#suspectS;
      if (residual > bound) this.#suspectS = Math.max(this.#suspectS, residual);
    }
    const changed = this.#select();
    // A newly selected reference was seeded with its run, this sample included.
    if (this.#selection.selected === id && !changed) this.#follow(entry, sample);
    this.#evaluate();
  }

  /** Periodic evaluation; the timer calls it, tests call it directly. */
  tick(): void {
    if (this.#local && this.#selection.entry(LOCAL_ID)) {
      const at = this.#clock.monotonicMs();
      const offsetS = this.#local.offsetS?.() ?? 0;
      this.addSample(LOCAL_ID, {
        offsetS,
        delayS: 0,
        dispersionS: 0,
        jitterS: 2 ** this.#o.precision,
        atMs: at,
      });
      return;
    }
    const now = this.#clock.monotonicMs();
    if (this.#evaluatedMs !== undefined && now - this.#evaluatedMs < TICK_AFTER_EVALUATION_MS) return;
    if (this.#quiet(now)) {
      this.#quietTick = true;
      return;
    }
    this.#select();
    this.#evaluate();
  }

  /**
   * Nothing the tick would do can change anything at `now` (docs/clock-discipline.md "Per second and per
   * sample"): LOCKED on a reference whose selection cannot change with time alone (ReferenceSelection
   * quiet: still usable, its run not lapsed, no other source with a current run, nothing held back), no
   * slew under way (the LOCKED → SYNCING rule reads the remaining slew), no sample held back as a spike, no
   * leap second planned (its announcement and smear are time-driven). The reply fields then only grow at
   * their rate from `updatedAtMs`, which every reply computes already (advertiser.ts update keeps them
   * likewise). Reads numbers only: allocates nothing.
   */
  #quiet(now: number): boolean {
    return (
      this.#state === 'LOCKED' &&
      this.#suspectS === 0 &&
      this.#evaluatedMs !== undefined &&
      now - this.#evaluatedMs < QUIET_MAX_MS &&
      this.#served.remaining(now) === 0 &&
      this.#leap.instant() === undefined &&
      this.#selection.quiet(now)
    );
  }

  /** The references held back at a level beyond the step threshold, with a recent sample. */
  disagreements(): Disagreement[] {
    return this.#selection.disagreements();
  }

  #emit(e: ClockManagerEvent): void {
    for (const l of this.#listeners) l(e);
  }

  #setState(to: ClockState, reason: string): void {
    if (to === this.#state) return;
    const from = this.#state;
    this.#state = to;
    this.#holdoverStartedMs = to === 'HOLDOVER' ? this.#clock.monotonicMs() : undefined;
    if (to === 'FAULT') {
      // Nothing of the old estimate is trusted: phase and frequency start again (README "Clock states").
      this.#discipline.reset(false);
      this.#samplesSinceReset = 0;
      this.#served.unsync();
      this.#suspectS = 0;
    }
    this.#emit({ type: 'state', from, to, reason });
  }

  /** Run selection; on a change of reference (also from or to none) reseed the estimate. */
  #select(): boolean {
    const now = this.#clock.monotonicMs();
    const change = this.#selection.select(now, this.#state);
    if (change === undefined) return false;
    this.#emit({ type: 'selected', from: change.from, to: change.to });
    if (change.entry) this.#reseed(change.entry, now, change.priorValid);
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
    const { run, seeds, jitterS } = this.#selection.seedRun(entry, now);
    for (const s of seeds) this.#discipline.add(s.atMs / 1000, s.offsetS, jitterS, s.delayS);
    this.#delayRejects = 0;
    this.#samplesSinceReset = run.length;
    const last = entry.samples[entry.samples.length - 1];
    if (last) this.#noteSample(entry, last, jitterS);
    if (this.#state === 'HOLDOVER' && this.#served.synced) {
      const diff = Math.abs(this.#discipline.predict(now / 1000) - this.#served.at(now));
      const t = holdoverReturn(entry.source.id, diff, errorBefore, this.#discipline.estimate());
      this.#setState(t.to, t.reason);
    }
    this.#replan(entry.source.id, now);
  }

  /** A further sample of the selected reference. */
  #follow(entry: SourceEntry, sample: ReferenceSample): void {
    // Jitter and delay gate from the samples before this one: a spike must not widen its own gate.
    // The run before this sample: its first `before` samples (read in place, not copied).
    const run = this.#selection.runSamples(entry, sample.atMs);
    const before = Math.max(0, run.length - 1);
    this.#samplesSinceReset++;
    const jitter = runJitter(run, 2 ** this.#o.precision, before);
    // A sample whose round trip is far above the run's best carries up to half of that as error (RFC 5905
    // §8): left out, unless that has become the normal delay (several in a row), and never when leaving it
    // out would let the estimate's age exceed two polls while replies arrive (the weighted fit gives such a
    // sample little weight anyway; docs/clock-discipline.md "Delay gate").
    const pollMs = 2 ** (entry.source.status().pollLog2 ?? 0) * 1000;
    const sinceUpdateMs = sample.atMs - (this.#advertiser.lastUpdateMs ?? sample.atMs);
    if (
      sample.delayS > delayGate(run, before) &&
      this.#delayRejects < MAX_DELAY_REJECTS &&
      sinceUpdateMs <= pollMs
    ) {
      this.#delayRejects++;
      return;
    }
    this.#delayRejects = 0;
    const out = this.#discipline.add(sample.atMs / 1000, sample.offsetS, jitter, sample.delayS);
    this.#noteSample(entry, sample, jitter);
    if (out.kind === 'spike') {
      // Held back, but until the next sample tells, the served clock may be this far off: advertise the part
      // of the residual that the exchange's own extra delay cannot explain (its delay is in the root delay
      // already; a sample's offset is uncertain by half its delay, RFC 5905 §8; chrony keeps the delay in
      // root delay, not root dispersion).
      this.#spikes++;
      this.#suspectS = unexplainedS(sample, out.residualS, this.#selection.runSamples(entry, sample.atMs));
      return;
    }
    this.#suspectS = 0;
    this.#replan(entry.source.id, this.#clock.monotonicMs());
  }

  #noteSample(entry: SourceEntry, sample: ReferenceSample, jitterS: number): void {
    const delays = this.#selection
      .runSamples(entry, sample.atMs)
      .slice(-8)
      .map((s) => s.delayS);
    this.#advertiser.noteSample(entry.source.status(), sample, delays, jitterS);
  }

  #rawUnix(monoMs: number): number {
    return this.#rawUnixMs
      ? this.#rawUnixMs(monoMs)
      : this.#clock.now() - (this.#clock.monotonicMs() - monoMs);
  }

  /** Plan the served correction towards the estimate (served-correction.ts). */
  #replan(id: string, now: number): void {
    const est = this.#discipline.estimate();
    if (est === undefined) return;
    const usable =
      this.#samplesSinceReset >=
      (this.#selection.entry(id)?.source.kind === 'local' ? 1 : this.#o.minSamples);
    const out = this.#served.plan(now, this.#discipline.predict(now / 1000), est.freq, usable);
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
    // Told at the end of the evaluation that follows (#evaluate): addSample, tick and unregister evaluate
    // after every selection and sample, the only ways here.
    this.#correctionChanged = true;
  }

  #lockThreshold(): number {
    return Math.max(this.#o.lockThresholdS, 3 * this.#advertiser.jitterS);
  }

  #ownErrorS(now: number): number {
    return this.#advertiser.ownErrorS(now, this.#state, this.#suspectS);
  }

  #evaluate(): void {
    const now = this.#clock.monotonicMs();
    this.#evaluatedMs = now;
    this.#quietTick = false;
    for (let i = 0; i < 4; i++) {
      const t = nextState(this.#state, {
        selected: this.#selection.selected !== undefined,
        synced: this.#served.synced,
        remainingS: Math.abs(this.#served.remaining(now)),
        suspect: this.#suspectS > 0,
        lockThresholdS: this.#lockThreshold(),
        advertisedBoundS: this.#advertiser.advertisedBoundS(now),
        holdoverExpired:
          this.#holdoverStartedMs !== undefined && now - this.#holdoverStartedMs > this.#o.holdoverTimeoutMs,
      });
      if (!t) break;
      this.#setState(t.to, t.reason);
    }
    // The leap plan votes with the selected sources' leap bits once synchronised (leap-schedule.ts).
    if (this.#leap.update(now, this.#served.synced, () => this.#selection.leapBits()))
      this.#correctionChanged = true;
    const changed = this.#advertiser.update(now, {
      state: this.#state,
      suspectS: this.#suspectS,
      selectionJitterS: this.#selection.jitterS,
      disagreementS: this.#selection.disagreementS(),
    });
    // One event for both: 'advertised' says the reply fields were replaced and, like every event, that
    // the correction may have changed (reference-source.ts ClockManagerEvent).
    const correctionChanged = this.#correctionChanged;
    this.#correctionChanged = false;
    if (changed) this.#emit({ type: 'advertised' });
    else if (correctionChanged) this.#emit({ type: 'update' });
  }

  /** The sources' part of `snapshot()` alone (what the source statistics follow, on every event). */
  sources(): ClockSnapshot['sources'] {
    return this.#selection.snapshot();
  }

  snapshot(): ClockSnapshot {
    const now = this.#clock.monotonicMs();
    const est = this.#discipline.estimate();
    const held = this.#holdoverStartedMs;
    return {
      state: this.#state,
      ...this.#advertiser.snapshot(now),
      offsetStddevS: est?.phaseErrorS ?? 0,
      driftPpb: this.#served.correction.freq * 1e9,
      driftErrorPpb: (est?.freqError ?? 0) * 1e9,
      remainingSlewS: this.#served.remaining(now),
      selected: this.#selection.selected,
      lastReference: this.#selection.lastReference,
      holdoverStartedMs: held,
      holdoverRemainingMs:
        held === undefined ? undefined : Math.max(0, this.#o.holdoverTimeoutMs - (now - held)),
      spikes: this.#spikes,
      steps: this.#served.steps,
      stepSuspects: this.#selection.stepSuspects,
      disagreements: this.disagreements(),
      sources: this.#selection.snapshot(),
    };
  }
}
