import type { Clock } from '@broadcast-ops/core';
import { LEAP, MAXDIST } from '../protocol/ntp-packet.ts';
import { K_SIGMA, type Estimate } from './discipline.ts';
import { delayGate, runJitter } from './sample-run.ts';
import { selectReference, type SelectionInput, type Verdict } from './selection.ts';
import type {
  ClockManagerEvent,
  Disagreement,
  ReferenceSample,
  ReferenceSource,
  SourceSnapshot,
} from './reference-source.ts';
import type { ClockState } from './clock-state.ts';

/**
 * Reference selection as the clock manager runs it (docs/clock-discipline.md): the registered sources and
 * their recent samples, each source's level judged against the served clock (the stepout of RFC 5905 §11.3),
 * the GPSDO's loss bridged in HOLDOVER (docs/gpsdo.md "Loss of the GPSDO"), and which source is selected
 * (selection.ts, RFC 5905 §11.2). It decides which reference steers the clock, and whether a reference coming
 * back to a clock in HOLDOVER finds it locked; the orchestrator (clock-manager.ts) acts on that.
 */

/** What selection reads of the served clock (served-correction.ts). */
export interface ServedLevel {
  /** The served correction at monotonic ms `tMs`, seconds. */
  at(tMs: number): number;
  /** The served clock has been set onto a usable estimate. */
  readonly synced: boolean;
}

export interface ReferenceSelectionOptions {
  clock: Clock;
  served: ServedLevel;
  emit: (e: ClockManagerEvent) => void;
  /** Samples a source needs before selection (an iburst's four). */
  minSamples: number;
  /** Our precision, log2 s: the jitter floor. */
  precision: number;
  /** A level beyond this from the served clock makes a source a step suspect, seconds. */
  stepThresholdS: number;
  /** How long a step suspect is held back unless confirmed (0 = follow at once). */
  stepoutMs: number;
  /** How long a lost GPSDO is bridged in HOLDOVER before NTP peers may be selected (0 = not at all). */
  primaryHoldoverMs: number;
}

export interface SourceEntry {
  source: ReferenceSource;
  samples: ReferenceSample[];
  verdict: Verdict;
  rootDistanceS: number | undefined;
  /** The source's level is beyond the step threshold from the served clock (a step suspect). */
  away: Away | undefined;
  /** Samples before this monotonic ms were at a level that was not followed: they seed nothing. */
  levelSinceMs: number;
  /** Counts the samples added (ReferenceSelection.addSample): what the cached run was cut from. */
  added: number;
  /** The source's `usable` at the last selection (ReferenceSelection quiet). */
  usableAtSelect: boolean;
}

/** A source's run as last cut (ReferenceSelection.runSamples), with what it was cut from. */
interface CutRun {
  added: number;
  levelSinceMs: number;
  gapMs: number;
  run: readonly ReferenceSample[];
}

/** A step suspect: since when the source has been at its new level, and that level (source − served). */
interface Away {
  sinceMs: number;
  offsetS: number;
  lastMs: number;
  /** Followed: the stepout passed or an independent source confirmed the level. */
  accepted: boolean;
}

/** A change of reference (also from or to none). */
export interface SelectionChange {
  from: string | undefined;
  to: string | undefined;
  /** The newly selected source, when one is. */
  entry: SourceEntry | undefined;
  /** The frequency learnt so far may seed the new reference (it was not measured against the host clock). */
  priorValid: boolean;
}

/**
 * Local-stratum mode: the host clock as a last-resort reference. Its status is one stratum below the
 * configured local stratum, so that the server, one below its reference, advertises that stratum.
 */
export function localSource(id: string, local: { stratum: number; referenceId: number }): ReferenceSource {
  return {
    id,
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
  };
}

/** Longest wait for other sources' bursts before choosing a reference from none. */
const MAX_BURST_WAIT_MS = 16_000;
const SAMPLE_HISTORY = 16;

/**
 * |residual| less what the sample's extra round trip over the run's best can explain: a reply delayed by d on
 * one path is off by up to d/2 (RFC 5905 §8) with the clock right. That delay is advertised in the root delay
 * already, so only the rest may be the clock's (or the reference's) error.
 */
export function unexplainedS(
  sample: ReferenceSample,
  residualS: number,
  run: readonly ReferenceSample[],
): number {
  const minDelayS = Math.min(sample.delayS, ...run.map((s) => s.delayS));
  return Math.max(0, Math.abs(residualS) - (sample.delayS - minDelayS) / 2);
}

/**
 * A reference selected again while the clock is in HOLDOVER: LOCKED at once when its estimate agrees with
 * the held-over clock within the error that clock was advertising (plus the new estimate's phase error),
 * otherwise SYNCING towards it.
 */
export function holdoverReturn(
  id: string,
  diffS: number,
  errorBeforeS: number,
  est: Estimate | undefined,
): { to: ClockState; reason: string } {
  const allowance = errorBeforeS + (est?.k ?? K_SIGMA) * (est?.phaseErrorS ?? 0);
  return diffS <= allowance
    ? { to: 'LOCKED', reason: `reference ${id} returned within the holdover error` }
    : { to: 'SYNCING', reason: `reference ${id} returned ${(diffS * 1e3).toFixed(3)} ms away` };
}

export class ReferenceSelection {
  readonly #o: ReferenceSelectionOptions;
  readonly #sources = new Map<string, SourceEntry>();
  #selected: string | undefined;
  #lastReference: string | undefined;
  /** Step suspects since start (sources that moved beyond the step threshold and were held back). */
  #stepSuspects = 0;
  /** Monotonic ms when the selected GPSDO was lost (while bridging its loss in HOLDOVER). */
  #primaryLostMs: number | undefined;
  /** Monotonic ms since when selection has been waiting for sources in their burst. */
  #waitingSinceMs: number | undefined;
  #jitterS = 0;
  /** Each source's run, cut again only when its samples, its level or its gap limit changed. */
  readonly #runs = new WeakMap<SourceEntry, CutRun>();
  /** Until when (monotonic ms) the last selection's outcome cannot change with time alone (`quiet`). */
  #quietUntilMs = Number.NEGATIVE_INFINITY;

  constructor(options: ReferenceSelectionOptions) {
    this.#o = options;
  }

  /** The selected reference, if any. */
  get selected(): string | undefined {
    return this.#selected;
  }

  /** The reference selected last (kept through HOLDOVER). */
  get lastReference(): string | undefined {
    return this.#lastReference;
  }

  get stepSuspects(): number {
    return this.#stepSuspects;
  }

  /**
   * Selection jitter of the last selection with a reference (selection.ts): losing every reference does not
   * make the servers agree, so it stays in the bound until a reference is selected again.
   */
  get jitterS(): number {
    return this.#jitterS;
  }

  entry(id: string | undefined): SourceEntry | undefined {
    return id === undefined ? undefined : this.#sources.get(id);
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
      added: 0,
      usableAtSelect: false,
    });
  }

  /** Forget source `id`; true when it was the selected reference. */
  unregister(id: string): boolean {
    this.#sources.delete(id);
    return this.#selected === id;
  }

  /** Keep a sample of `entry` and judge its level; true when the level is held back. */
  addSample(entry: SourceEntry, sample: ReferenceSample): boolean {
    entry.samples.push(sample);
    entry.added++;
    if (entry.samples.length > SAMPLE_HISTORY) entry.samples.shift();
    this.#judgeLevel(entry, sample);
    return entry.away !== undefined && !entry.away.accepted;
  }

  /** The leap bits of the selected and candidate sources (the leap vote, leap-schedule.ts). */
  leapBits(): number[] {
    const bits: number[] = [];
    for (const e of this.#sources.values()) {
      if (e.source.kind === 'local') continue;
      if (e.verdict === 'selected' || e.verdict === 'candidate') bits.push(e.source.status().leap);
    }
    return bits;
  }

  /**
   * Consecutive samples of a source with no silence longer than its gap limit, up to now. The run is cut
   * from the samples once and kept until a sample is added or the level or the gap limit changes (it was
   * cut afresh four to six times a sample: docs/performance.md "Fourth pass"); `now` only decides whether
   * the newest sample is recent enough for there to be a run at all. Shared: callers do not change it.
   */
  runSamples(entry: SourceEntry, now: number): readonly ReferenceSample[] {
    const gapMs = this.#gapMs(entry);
    const s = entry.samples;
    const newest = s[s.length - 1];
    if (newest === undefined || now - newest.atMs > gapMs) return [];
    const cut = this.#runs.get(entry);
    if (
      cut !== undefined &&
      cut.added === entry.added &&
      cut.levelSinceMs === entry.levelSinceMs &&
      cut.gapMs === gapMs
    )
      return cut.run;
    let i = s.length - 1;
    while (i > 0 && (s[i]?.atMs ?? 0) - (s[i - 1]?.atMs ?? 0) <= gapMs) i--;
    // A held-back level is not part of the run (nor the level before a followed step).
    const run = s.slice(i).filter((x) => x.atMs >= entry.levelSinceMs);
    this.#runs.set(entry, { added: entry.added, levelSinceMs: entry.levelSinceMs, gapMs, run });
    return run;
  }

  /** The longest silence within a run: max(8 s, 4 polls) (docs/clock-discipline.md "Selection"). */
  #gapMs(entry: SourceEntry): number {
    return Math.max(8000, 4 * 2 ** (entry.source.status().pollLog2 ?? 0) * 1000);
  }

  /**
   * Whether selecting again at `now` (with no sample since the last selection) would come to the same
   * outcome for certain: the selected reference is still usable and its run has not lapsed, no other
   * source has a current run (among several, the correctness intervals widen with the samples' age and the
   * intersection can move with time alone), no source became usable or unusable, nothing is held back at a
   * new level, no burst is waited for and no GPSDO loss is being bridged. The clock manager then skips its once-a-second selection
   * (docs/clock-discipline.md "Per second and per sample"). Allocates nothing.
   */
  quiet(now: number): boolean {
    if (now > this.#quietUntilMs) return false;
    // No source became usable or unusable since (the selected one losing its lock above all).
    for (const e of this.#sources.values()) if (e.source.status().usable !== e.usableAtSelect) return false;
    return true;
  }

  /** Set at each selection: until when its outcome stands with time alone (`quiet`), else −∞. */
  #quietDeadline(now: number): number {
    if (
      this.#selected === undefined ||
      this.#waitingSinceMs !== undefined ||
      this.#primaryLostMs !== undefined
    )
      return Number.NEGATIVE_INFINITY;
    let until = Number.POSITIVE_INFINITY;
    for (const e of this.#sources.values()) {
      if (e.away !== undefined && !e.away.accepted) return Number.NEGATIVE_INFINITY;
      const newest = e.samples[e.samples.length - 1];
      const current = this.runSamples(e, now).length > 0;
      if (e.source.id === this.#selected) {
        if (!current || newest === undefined) return Number.NEGATIVE_INFINITY;
        until = Math.min(until, newest.atMs + this.#gapMs(e));
      } else if (current || e.source.kind === 'local') {
        return Number.NEGATIVE_INFINITY;
      }
    }
    return until;
  }

  /** The run of `entry` at `now`, delay-gated, with its jitter: what seeds a newly selected reference. */
  seedRun(
    entry: SourceEntry,
    now: number,
  ): { run: readonly ReferenceSample[]; seeds: ReferenceSample[]; jitterS: number } {
    const run = this.runSamples(entry, now);
    return { run, seeds: run.filter((x) => x.delayS <= delayGate(run)), jitterS: this.#runJitter(run) };
  }

  #runJitter(run: readonly ReferenceSample[]): number {
    return runJitter(run, 2 ** this.#o.precision);
  }

  /**
   * No single reference decides whole seconds (docs/clock-discipline.md): a sample beyond the step
   * threshold from the served clock puts its source at a new level, held back from selection until the
   * level has persisted for the stepout or an independent source confirms it. The host clock (local
   * stratum) is exempt: it is the last resort, not a reference that can be outvoted.
   */
  #judgeLevel(entry: SourceEntry, sample: ReferenceSample): void {
    // Stepout 0: every level is followed at once, through the discipline's level-change rule alone.
    if (entry.source.kind === 'local' || this.#o.stepoutMs <= 0) return;
    if (!this.#o.served.synced) {
      // Unsynchronised (LI 3): there is no served level to hold, and the next usable estimate is followed.
      if (entry.away && !entry.away.accepted) entry.away = undefined;
      return;
    }
    const residual = sample.offsetS - this.#o.served.at(sample.atMs);
    const away = entry.away;
    // An exchange stalled on one path by d is off by up to d/2 with no level change behind it (RFC 5905 §8):
    // only the part of the residual its extra delay over the run's best cannot explain makes it a suspect.
    if (unexplainedS(sample, residual, this.runSamples(entry, sample.atMs)) <= this.#o.stepThresholdS) {
      if (away === undefined) return;
      entry.away = undefined;
      // Back at the served level: what it said meanwhile was not followed and seeds nothing.
      if (!away.accepted) {
        entry.levelSinceMs = sample.atMs;
        this.#o.emit({ type: 'suspect', phase: 'returned', source: entry.source.id, offsetS: residual });
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
    this.#o.emit({ type: 'suspect', phase: 'held', source: entry.source.id, offsetS: residual });
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
    if (now - a.sinceMs >= this.#o.stepoutMs) by = 'stepout';
    for (const o of this.#sources.values()) {
      if (by !== undefined) break;
      if (o === entry || o.source.kind === 'local' || !o.source.status().usable) continue;
      const last = o.samples[o.samples.length - 1];
      if (last === undefined || this.runSamples(o, now).length === 0) continue;
      const theirs = last.offsetS - this.#o.served.at(last.atMs);
      const margin = (o.rootDistanceS ?? MAXDIST) + (entry.rootDistanceS ?? MAXDIST);
      if (Math.abs(theirs - a.offsetS) <= Math.min(margin, this.#o.stepThresholdS)) by = o.source.id;
    }
    if (by === undefined) return false;
    a.accepted = true;
    this.#o.emit({ type: 'suspect', phase: 'followed', source: entry.source.id, offsetS: a.offsetS, by });
    return true;
  }

  /** The references held back at a level beyond the step threshold, with a recent sample. */
  disagreements(): Disagreement[] {
    const now = this.#o.clock.monotonicMs();
    const out: Disagreement[] = [];
    for (const e of this.#sources.values()) {
      const a = e.away;
      if (a === undefined || a.accepted || this.runSamples(e, now).length === 0) continue;
      out.push({
        source: e.source.id,
        offsetS: a.offsetS,
        sinceMs: a.sinceMs,
        stepoutEndsMs: a.sinceMs + this.#o.stepoutMs,
      });
    }
    return out;
  }

  /** The largest disagreement held back: the advertised bound includes it (the served clock may be wrong). */
  disagreementS(): number {
    let worst = 0;
    for (const d of this.disagreements()) worst = Math.max(worst, Math.abs(d.offsetS));
    return worst;
  }

  /** The selected (or held-over) GPSDO is lost and its HOLDOVER bridge has not run out yet. */
  #bridgingPrimary(now: number, state: ClockState): boolean {
    const id = this.#selected ?? (state === 'HOLDOVER' ? this.#lastReference : undefined);
    const entry = this.entry(id);
    if (this.#o.primaryHoldoverMs <= 0 || entry?.source.kind !== 'gpsdo' || entry.source.status().usable) {
      this.#primaryLostMs = undefined;
      return false;
    }
    this.#primaryLostMs ??= now;
    return now - this.#primaryLostMs < this.#o.primaryHoldoverMs;
  }

  /** Run selection at `now` in clock state `state`; the change of reference, if any. */
  select(now: number, state: ClockState): SelectionChange | undefined {
    const bridging = this.#bridgingPrimary(now, state);
    const inputs: SelectionInput[] = [];
    for (const entry of this.#sources.values()) {
      const st = entry.source.status();
      entry.usableAtSelect = st.usable;
      const last = entry.samples[entry.samples.length - 1];
      const run = this.runSamples(entry, now);
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
        jitterS: this.#runJitter(run),
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
    if (result.selected !== undefined || !this.#o.served.synced) this.#jitterS = result.selectionJitterS;
    for (const entry of this.#sources.values()) {
      entry.verdict = result.verdicts.get(entry.source.id) ?? 'unusable';
      entry.rootDistanceS = result.rootDistances.get(entry.source.id);
    }
    const id = result.selected;
    if (id === this.#selected) {
      this.#quietUntilMs = this.#quietDeadline(now);
      return undefined;
    }
    const from = this.#selected;
    this.#selected = id;
    this.#quietUntilMs = this.#quietDeadline(now);
    const entry = this.entry(id);
    // The frequency measured against the host clock (local stratum) says nothing about a real reference.
    const priorValid =
      this.#lastReference === undefined || this.entry(this.#lastReference)?.source.kind !== 'local';
    if (entry) this.#lastReference = id;
    return { from, to: id, entry, priorValid };
  }

  /** Each source as the status page and metrics show it; offsets are against the served clock. */
  snapshot(): SourceSnapshot[] {
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
        offsetS: last ? last.offsetS - this.#o.served.at(last.atMs) : undefined,
        jitterS: last?.jitterS,
        rootDistanceS: e.rootDistanceS,
        lastSampleMs: last?.atMs,
        authenticated: st.authenticated ?? false,
      });
    }
    return sources;
  }
}
