import type { Clock } from '@broadcast-ops/core';
import { LEAP, MAXSTRAT, PHI, unixToNtp } from '../protocol/ntp-packet.ts';
import { UNSYNCHRONISED_STATE, type ServerSystemState } from './ntp-responder.ts';
import { clockQuality, type ClockQuality } from './clock-quality.ts';
import { servesSynchronised, type ClockState } from './clock-state.ts';
import type { Estimate } from './discipline.ts';
import type { LeapSchedule } from './leap-schedule.ts';
import type { ClockSnapshot, ReferenceSample, ReferenceStatus } from './reference-source.ts';

/**
 * The advertiser: what the clock tells the world (docs/clock-discipline.md "The advertised bound"). From the
 * selected reference (kept through HOLDOVER) and the estimate's errors it builds the NTP reply fields
 * (stratum, reference id and timestamp, leap indicator, root delay and dispersion, RFC 5905 §7.3), the
 * estimated error the web status shows, and the PTP clock quality derived from the same state
 * (clock-quality.ts). The advertised dispersion always covers the clock's own error estimate: the remaining
 * slew, the estimate's errors, a held-back sample, disagreeing sources, and their growth with time.
 */

/** What is advertised, from the selected reference, kept through HOLDOVER. */
interface Advert {
  status: ReferenceStatus;
  delayS: number;
  dispersionS: number;
  jitterS: number;
}

/** What the advertiser reads of the served clock (served-correction.ts). */
export interface ServedError {
  at(tMs: number): number;
  remaining(tMs: number): number;
  readonly synced: boolean;
}

export interface AdvertiserOptions {
  clock: Clock;
  /** Our precision, log2 seconds. */
  precision: number;
  /** The raw clock's wander while a reference is followed (chrony's maxclockerror). */
  maxClockError: number;
  served: ServedError;
  /** The discipline's current estimate. */
  estimate: () => Estimate | undefined;
  leap: Pick<LeapSchedule, 'indicator' | 'smearDeviation'>;
  /** Served time as Unix ms at monotonic ms `monoMs` (the reference timestamp's scale). */
  servedUnixMs: (monoMs: number) => number;
}

/** The inputs of the reply fields besides time (Advertiser #inputs). */
interface Inputs {
  advert: Advert;
  state: ClockState;
  suspectS: number;
  selectionJitterS: number;
  disagreementS: number;
  leap: number;
  phaseTermS: number;
  growth: number;
}

/** What the orchestrator knows at an evaluation that the advertised state depends on. */
export interface AdvertFacts {
  state: ClockState;
  /** |residual| of a sample held back as a possible spike (0 when none), seconds. */
  suspectS: number;
  /** Selection jitter: the truechimers' disagreement with the selected reference, seconds. */
  selectionJitterS: number;
  /** The largest level held back as a step suspect, seconds. */
  disagreementS: number;
}

export class Advertiser {
  readonly #o: AdvertiserOptions;
  #advert: Advert | undefined;
  #serverState: ServerSystemState;
  /** The suspect share in the current server state's dispersion. */
  #advertisedSuspectS = 0;
  #lastResidual = 0;
  #lastSampleMs: number | undefined;
  #lastUpdateMs: number | undefined;
  #lastUpdateWallMs: number | undefined;
  /**
   * What the current reply fields were computed from, when that was all that can change them other than
   * their growth with time (no slew, no smear): an update with the same inputs would give the same fields
   * grown at `dispersionRateS` from `updatedAtMs`, which is what every reply computes from them already
   * (ntp-responder.ts), so the fields are kept (docs/performance.md "Fifth pass").
   */
  #inputs: Inputs | undefined;

  constructor(options: AdvertiserOptions) {
    this.#o = options;
    this.#serverState = this.#unsynchronised();
  }

  #unsynchronised(): ServerSystemState {
    return { ...UNSYNCHRONISED_STATE, precision: this.#o.precision };
  }

  /** The reply fields the NTP server sends at `now`; replaced (not mutated) on every change. */
  serverState(now: number): ServerSystemState {
    const s = this.#serverState;
    // A leap announced until its instant is cleared from that instant on, also before the timer set for it has
    // run (a busy event loop fires it late): clients must not see the announcement once the leap is passed
    // (RFC 5905 §7.3; docs/leap-seconds.md). Served time itself steps at the instant through the correction.
    if (
      (s.leap === LEAP.ADD_SECOND || s.leap === LEAP.DEL_SECOND) &&
      this.#o.leap.indicator(now) === LEAP.NONE
    ) {
      this.#serverState = { ...s, leap: LEAP.NONE };
    }
    return this.#serverState;
  }

  /** The jitter of the followed reference's run, seconds (0 before any sample). */
  get jitterS(): number {
    return this.#advert?.jitterS ?? 0;
  }

  /** A sample of the followed reference: it is now what is advertised. */
  noteSample(
    status: ReferenceStatus,
    sample: ReferenceSample,
    runDelaysS: readonly number[],
    jitterS: number,
  ): void {
    this.#advert = {
      status,
      delayS: Math.max(sample.delayS, ...runDelaysS),
      dispersionS: sample.sampleDispersionS ?? sample.dispersionS,
      jitterS,
    };
    this.#lastSampleMs = sample.atMs;
    this.#lastResidual = sample.offsetS - this.#o.served.at(sample.atMs);
    this.#lastUpdateMs = sample.atMs;
    this.#lastUpdateWallMs = this.#o.servedUnixMs(sample.atMs);
  }

  /** Monotonic ms of the last sample followed. */
  get lastUpdateMs(): number | undefined {
    return this.#lastUpdateMs;
  }

  /**
   * Our own error estimate at `now` (without the reference's root distance): the correction still to be
   * slewed, the phase error, a suspect sample, and the growth since the last sample (growthRate).
   */
  ownErrorS(now: number, state: ClockState, suspectS: number): number {
    const est = this.#o.estimate();
    if (est === undefined || this.#lastSampleMs === undefined) return 0;
    const age = Math.max(0, now - this.#lastSampleMs) / 1000;
    return (
      Math.abs(this.#o.served.remaining(now)) +
      est.kPhase * est.phaseErrorS +
      suspectS +
      this.growthRate(est, state) * age
    );
  }

  /**
   * How fast the error grows without a sample (docs/clock-discipline.md "The advertised bound"): the
   * frequency error at its coverage, plus the raw clock's wander, chrony's maxclockerror (1 ppm), while a
   * reference is followed (chrony's root dispersion grows at skew + |residual frequency| + maxclockerror,
   * reference.c); in HOLDOVER the RFC 5905 tolerance PHI (15 ppm, §11.3), as nothing checks the wander.
   */
  growthRate(est: Estimate, state: ClockState): number {
    return (state === 'HOLDOVER' ? PHI : this.#o.maxClockError) + est.k * est.freqError;
  }

  /**
   * root delay / 2 + root dispersion of the current server state without a held-back sample's share (0
   * while unsynchronised): the hysteresis of LOCKED. A suspect sample widens the bound only until the next
   * sample decides; a level change it announced must still leave LOCKED.
   */
  advertisedBoundS(now: number): number {
    const s = this.#serverState;
    if (s.leap === LEAP.UNSYNCHRONISED) return 0;
    // Grown to `now` as the replies grow it: the fields are kept while only time changes them (update).
    const grown = ((s.dispersionRateS ?? PHI) * Math.max(0, now - s.updatedAtMs)) / 1000;
    return Math.max(0, s.rootDelayS / 2 + s.rootDispersionS + grown - this.#advertisedSuspectS);
  }

  /** Recompute the reply fields at `now`; true when they were replaced. */
  update(now: number, f: AdvertFacts): boolean {
    const before = this.#serverState;
    const adv = this.#advert;
    const est = this.#o.estimate();
    // A stratum-15 reference would make us 16, which RFC 5905 §7.3 defines as unsynchronised.
    const tooDeep = adv !== undefined && adv.status.stratum + 1 >= MAXSTRAT;
    if (!servesSynchronised(f.state, this.#o.served.synced) || tooDeep || !adv || !est) {
      this.#inputs = undefined;
      if (this.#serverState.leap !== LEAP.UNSYNCHRONISED) this.#serverState = this.#unsynchronised();
      return this.#serverState !== before;
    }
    // Only time changes the fields when nothing else did and no slew or smear is under way: kept.
    const leap = this.#o.leap.indicator(now);
    const phaseTermS = est.kPhase * est.phaseErrorS;
    const growth = this.growthRate(est, f.state);
    const moving = this.#o.served.remaining(now) !== 0 || this.#o.leap.smearDeviation(now) !== 0;
    const i = this.#inputs;
    if (
      !moving &&
      i !== undefined &&
      i.advert === adv &&
      i.state === f.state &&
      i.suspectS === f.suspectS &&
      i.selectionJitterS === f.selectionJitterS &&
      i.disagreementS === f.disagreementS &&
      i.leap === leap &&
      i.phaseTermS === phaseTermS &&
      i.growth === growth
    )
      return false;
    this.#inputs = moving
      ? undefined
      : {
          advert: adv,
          state: f.state,
          suspectS: f.suspectS,
          selectionJitterS: f.selectionJitterS,
          disagreementS: f.disagreementS,
          leap,
          phaseTermS,
          growth,
        };
    const wall = this.#lastUpdateWallMs ?? this.#o.servedUnixMs(now);
    this.#serverState = {
      // The leap bits are ours (docs/leap-seconds.md): the vote or the list, announced in the last day.
      leap,
      stratum: Math.min(MAXSTRAT, adv.status.stratum + 1),
      precision: this.#o.precision,
      referenceId: adv.status.referenceId,
      referenceTimestamp: unixToNtp(Math.floor(wall / 1000), (wall % 1000) * 1e6),
      rootDelayS: adv.status.rootDelayS + adv.delayS,
      rootDispersionS:
        adv.status.rootDispersionS +
        adv.dispersionS +
        // Not the reference's jitter: the phase estimate's error (in ownErrorS) is the regression's, whose
        // residuals are that jitter; adding it again would count the same noise twice (chrony adds the
        // regression's offset SD, not a jitter; docs/clock-discipline.md "The advertised bound").
        f.selectionJitterS +
        this.ownErrorS(now, f.state, f.suspectS) +
        this.#o.leap.smearDeviation(now) +
        f.disagreementS,
      dispersionRateS: growth,
      updatedAtMs: now,
    };
    this.#advertisedSuspectS = f.suspectS + f.disagreementS;
    return true;
  }

  /** root delay / 2 + root dispersion grown at the advertised rate to `now`; infinite while unsynchronised. */
  estimatedErrorS(now: number): number {
    const s = this.#serverState;
    if (s.leap === LEAP.UNSYNCHRONISED) return Number.POSITIVE_INFINITY;
    return (
      s.rootDelayS / 2 +
      s.rootDispersionS +
      ((s.dispersionRateS ?? PHI) * Math.max(0, now - s.updatedAtMs)) / 1000
    );
  }

  /**
   * The advertised part of the snapshot: the estimated error (root delay / 2 + root dispersion grown at the
   * advertised rate since; infinite while unsynchronised) and the stratum clients see.
   */
  snapshot(
    now: number,
  ): Pick<
    ClockSnapshot,
    'offsetS' | 'estimatedErrorS' | 'stratum' | 'jitterS' | 'lastUpdateMs' | 'lastUpdateWallMs'
  > {
    const s = this.#serverState;
    const synced = s.leap !== LEAP.UNSYNCHRONISED;
    return {
      offsetS: this.#lastResidual,
      estimatedErrorS: this.estimatedErrorS(now),
      stratum: synced ? s.stratum : MAXSTRAT,
      jitterS: this.jitterS,
      lastUpdateMs: this.#lastUpdateMs,
      lastUpdateWallMs: this.#lastUpdateWallMs,
    };
  }
}

/** The PTP side of the clock-quality model's configuration (`ptp.clock_class`, `ptp.clock_accuracy`, …). */
export interface QualityConfig {
  freeRunningClass: number;
  freeRunningAccuracy: number;
  holdoverMaxErrorS: number;
}

/**
 * One clock-quality model (docs/ptp.md "Clock quality"): NTP's stratum/LI and PTP's class, accuracy and time
 * source from the same snapshot and served leap indicator. The reference is the selected one, or in
 * HOLDOVER the one held over.
 */
export function advertisedQuality(snap: ClockSnapshot, leap: number, config: QualityConfig): ClockQuality {
  const ref = snap.selected ?? (snap.state === 'HOLDOVER' ? snap.lastReference : undefined);
  const kind = ref === undefined ? undefined : snap.sources.find((x) => x.id === ref)?.kind;
  return clockQuality({
    state: snap.state,
    referenceKind: kind,
    estimatedErrorS: snap.estimatedErrorS,
    leap: leap === LEAP.UNSYNCHRONISED ? 0 : leap,
    ...config,
  });
}
