import type { Clock } from '@broadcast-ops/core';
import { LEAP } from '../protocol/ntp-packet.ts';
import type { Correction } from './correction.ts';
import {
  DAY_MS,
  leapTerm,
  nextListedLeap,
  nextMonthStartUnixMs,
  voteLeap,
  type LeapMode,
  type LeapSecondsList,
  type PendingLeap,
} from './leap.ts';
import type { ClockManagerEvent } from './reference-source.ts';

/** A leap second planned or being passed; `atMs` is fixed once it is close (LEAP_LOCK_MS). */
interface LeapState {
  pending: PendingLeap;
  atMs: number | undefined;
}

/** Fix the leap instant this long before it (or before a smear window opens), ms. */
const LEAP_LOCK_MS = 2000;
/** Farthest ahead a listed leap is planned (its LI is announced only in the last day anyway). */
const LEAP_HORIZON_MS = 32 * DAY_MS;

export type LeapEvent = Extract<ClockManagerEvent, { type: 'leap' }>;

export interface LeapScheduleOptions {
  clock: Clock;
  /** The leap-seconds list, when one is configured and read (leap.ts). */
  list: (() => LeapSecondsList | undefined) | undefined;
  mode: LeapMode;
  /** The smear window in smear mode, ms. */
  smearMs: number;
  /** The owner's evaluation period: the instant's timer is armed within 1.5 ticks of it. */
  tickMs: number;
  /** Served time on the leap-free scale, Unix ms, at monotonic ms `monoMs` (raw clock + correction). */
  leapFreeUnixMs: (monoMs: number) => number;
  /** At a locked leap instant: the owner evaluates again (the announcement must end at it). */
  onInstant: () => void;
  emit: (event: LeapEvent) => void;
}

/**
 * The leap-second schedule of the served clock (docs/leap-seconds.md): which leap is pending (from the
 * list, else the majority of the selected sources' leap bits, only in the last day of a month), its
 * instant on the monotonic scale, the leap indicator served before it (RFC 5905 §7.3), the correction's
 * leap terms (a step, or a smear over the window), and the leaps already passed (`baseS`, UTC − the
 * leap-free scale). Time comes from the injected clock; the instant's timer is the clock's.
 */
export class LeapSchedule {
  readonly #o: LeapScheduleOptions;
  #baseS = 0;
  #leap: LeapState | undefined;
  #timerArmed = false;

  constructor(options: LeapScheduleOptions) {
    this.#o = options;
  }

  /** UTC − the leap-free scale for the leaps already passed, seconds. */
  get baseS(): number {
    return this.#baseS;
  }

  /** The leap second planned or being passed, with its instant (computed until it is fixed). */
  pending(): (PendingLeap & { atMs: number }) | undefined {
    const l = this.#leap;
    return l ? { ...l.pending, atMs: this.#instantOf(l) } : undefined;
  }

  /** The pending leap's instant on the monotonic scale, ms. */
  instant(): number | undefined {
    return this.#leap ? this.#instantOf(this.#leap) : undefined;
  }

  /** `served` with the leap terms (passed leaps, the pending one with its smear), as correction.ts reads them. */
  withLeapTerms(served: Correction): Correction {
    const l = this.#leap;
    const atMs = this.instant();
    if (this.#baseS === 0 && (l === undefined || atMs === undefined)) return served;
    return {
      ...served,
      leapBaseS: this.#baseS,
      ...(l && atMs !== undefined
        ? { leap: { atMs, deltaS: l.pending.deltaS, smearMs: this.#smearMs() } }
        : {}),
    };
  }

  /** UTC − the leap-free scale at monotonic `tMs`: the leaps passed, the pending one from its instant. */
  utcLeapAt(tMs: number, leapAtMs: number | undefined): number {
    const l = this.#leap;
    return this.#baseS + (l && leapAtMs !== undefined && tMs >= leapAtMs ? l.pending.deltaS : 0);
  }

  /**
   * Decide the pending leap second (list, else the majority of `leapBits()`, the selected sources' bits, once
   * `synced`), fix its instant when it is close, arm a timer for the instant (LI must be cleared at it), and
   * fold it into the base once it has passed. Returns whether the plan changed (the served clock must be
   * updated).
   */
  update(now: number, synced: boolean, leapBits: () => number[]): boolean {
    const l = this.#leap;
    if (l?.atMs !== undefined) {
      if (now >= l.atMs + Math.max(LEAP_LOCK_MS, this.#smearMs() / 2)) {
        this.#baseS += l.pending.deltaS;
        this.#leap = undefined;
        this.#timerArmed = false;
        this.#emit('passed', l.pending);
        return true;
      }
      this.#armTimer(now, l.atMs);
      return false;
    }
    const servedNow = this.#servedUnixMs(now);
    let pending: PendingLeap | undefined;
    const list = this.#o.list?.();
    if (list && list.expiresUnixMs > servedNow) {
      const next = nextListedLeap(list, servedNow);
      if (next && next.epochUnixMs - servedNow <= LEAP_HORIZON_MS) pending = next;
    } else if (synced) {
      // Leap bits count only in the last day of a month, the only time a leap can follow (as chrony
      // accepts them only on a leap-second day): an upstream still announcing a passed leap plans nothing.
      const monthEnd = nextMonthStartUnixMs(servedNow);
      const delta = monthEnd - servedNow <= DAY_MS ? voteLeap(leapBits()) : 0;
      if (delta !== 0) pending = { epochUnixMs: monthEnd, deltaS: delta, source: 'sources' };
    }
    const same = pending?.epochUnixMs === l?.pending.epochUnixMs && pending?.deltaS === l?.pending.deltaS;
    if (pending === undefined) {
      this.#leap = undefined;
      if (l) this.#emit('cancelled', l.pending);
      return l !== undefined;
    }
    const atMs = this.#instantOfEpoch(pending);
    const lock = atMs - now <= LEAP_LOCK_MS + this.#smearMs() / 2;
    this.#leap = { pending, atMs: lock ? atMs : undefined };
    if (!same) this.#emit('planned', pending);
    if (lock) this.#armTimer(now, atMs);
    return !same || lock;
  }

  /** The leap indicator served now (RFC 5905 §7.3): only in step mode, in the last day before the leap. */
  indicator(now: number): number {
    const l = this.#leap;
    if (!l || this.#o.mode !== 'step') return LEAP.NONE;
    const atMs = this.#instantOf(l);
    if (now >= atMs || atMs - now > DAY_MS) return LEAP.NONE;
    return l.pending.deltaS < 0 ? LEAP.ADD_SECOND : LEAP.DEL_SECOND;
  }

  /** Smear mode: how far served time is from UTC because of the smear, over the next tick, seconds. */
  smearDeviation(now: number): number {
    const l = this.#leap;
    const smear = this.#smearMs();
    if (!l || smear <= 0) return 0;
    const atMs = this.#instantOf(l);
    const d = l.pending.deltaS;
    const dev = (t: number): number => Math.abs(leapTerm(t, atMs, d, smear) - leapTerm(t, atMs, d, 0));
    const horizon = 1.5 * this.#o.tickMs;
    let worst = Math.max(dev(now), dev(now + horizon));
    if (atMs >= now && atMs <= now + horizon) worst = Math.max(worst, dev(atMs), Math.abs(d) / 2);
    return worst;
  }

  #smearMs(): number {
    return this.#o.mode === 'smear' ? this.#o.smearMs : 0;
  }

  /** Served time with the leaps passed, Unix ms, at monotonic `monoMs`. */
  #servedUnixMs(monoMs: number): number {
    return this.#o.leapFreeUnixMs(monoMs) + this.#baseS * 1000;
  }

  #instantOf(l: LeapState): number {
    return l.atMs ?? this.#instantOfEpoch(l.pending);
  }

  /**
   * The monotonic instant at which served time (before the leap) reaches the leap epoch, from the current
   * correction (two fixed-point iterations: the correction's rate differs from 1 by far less than 1e-3).
   */
  #instantOfEpoch(p: PendingLeap): number {
    let t = this.#o.clock.monotonicMs();
    for (let i = 0; i < 3; i++) t += p.epochUnixMs - this.#servedUnixMs(t);
    return t;
  }

  #armTimer(now: number, atMs: number): void {
    if (this.#timerArmed || atMs < now || atMs - now > 1.5 * this.#o.tickMs) return;
    this.#timerArmed = true;
    this.#o.clock.setTimer(Math.max(0, atMs - now) + 1, () => {
      this.#o.onInstant();
    });
  }

  #emit(phase: LeapEvent['phase'], p: PendingLeap): void {
    this.#o.emit({ type: 'leap', phase, deltaS: p.deltaS, epochUnixMs: p.epochUnixMs });
  }
}
