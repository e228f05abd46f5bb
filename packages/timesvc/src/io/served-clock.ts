import { performance } from 'node:perf_hooks';
import { systemClock, type Clock } from '@broadcast-ops/core';
import { NTP_UNIX_OFFSET_S, type NtpTimestamp } from '../protocol/ntp-packet.ts';
import { ZERO_CORRECTION, correctionAt, type Correction } from '../domain/correction.ts';
import type { Ticker } from './service-tick.ts';

/**
 * The served clock. Node's Date.now() has millisecond resolution, so the raw clock is the high-resolution
 * monotonic clock (performance.now(), CLOCK_MONOTONIC) anchored once, at start, to a Date.now()
 * millisecond edge: raw = anchor + elapsed monotonic time, with sub-microsecond resolution.
 *
 * Served time = raw + the clock manager's correction c(t) (domain/correction.ts). Because raw follows the
 * monotonic clock, a step of the host's realtime clock changes nothing clients see: it is detected (checked
 * every second), counted and reported, and the host clock's offset from raw (`hostOffsetS`) is re-measured
 * for the local-stratum reference. The system clock is never adjusted.
 */

/** Where the served clock reads time: the host's realtime clock (ms) and the monotonic clock (ms). */
export interface TimeSource {
  wallMs: () => number;
  monoMs: () => number;
  /**
   * A kernel timestamp (the real CLOCK_REALTIME, Unix ms) on this source's realtime scale. The host's own
   * source needs none (kernel timestamps are its realtime). A test's simulated host gives one so that the
   * kernel timestamps of its sockets shift, step or leap with its realtime as a real host's would; a source
   * without it has kernel timestamps read against the real realtime clock, measured apart.
   */
  kernelStampMs?: (realtimeMs: number) => number;
}

/** One linear piece of the served clock (ServedClock.linearPiece). */
export interface LinearPiece {
  /** Monotonic ms (performance.now()) where the piece starts and where it ends (exclusive; may be Infinity). */
  p0: number;
  p1: number;
  /** Served NTP seconds (0 ≤ sec0 < 2³²) and nanoseconds past them at p0. */
  sec0: number;
  ns0: number;
  /** Served seconds per monotonic second over the piece. */
  rate: number;
}

export const hostTimeSource: TimeSource = { wallMs: () => Date.now(), monoMs: () => performance.now() };

/**
 * A `Clock` on the served clock's monotonic base: wall time and timers from `clock` (app.ts passes the
 * context's), monotonic time from `source` (performance.now() on the host), the base every sample, poll and
 * served instant is on (README "Clock"). The clock manager and the web layer run on it.
 */
export function servedBaseClock(clock: Clock, source: TimeSource = hostTimeSource): Clock {
  return {
    now: () => clock.now(),
    monotonicMs: () => source.monoMs(),
    monotonicNs: () => BigInt(Math.round(source.monoMs() * 1e6)),
    setTimer: (ms, fn) => clock.setTimer(ms, fn),
  };
}

/** The Clock handed to the domain by default: the system clock on the served clock's monotonic base. */
export const hiresClock: Clock = servedBaseClock(systemClock);

const TWO32 = 4_294_967_296;
/** A millisecond-edge bracket this narrow is good enough (normally reached at the first edges). */
const GOOD_EDGE_MS = 0.02;
/** A bracket this narrow ends a search at once: no later edge would be worth the spin. */
const NARROW_EDGE_MS = 0.002;
/**
 * How often good offset measurements are refreshed. They change only when the host clock steps (the kernel
 * slews CLOCK_REALTIME and CLOCK_MONOTONIC alike), and a step is found by the once-a-second check, which
 * measures again at once; so this is a safety net. Each refresh spins for a millisecond edge (up to 3 ms):
 * at 64 s it was a third of the idle tick's JavaScript (docs/performance.md "Fifth pass"), hence 1024 s.
 */
const REMEASURE_MS = 1_024_000;

/**
 * Find a millisecond edge of `wallMs`: the previous reading (between prevBefore and prevAfter on the
 * monotonic clock) returned the old millisecond and the current one (between before and after) the new
 * one, so the edge lies in (prevBefore, after). A preemption inside that window would widen it, so several
 * edges are observed and the narrowest bracket wins; it is normally well under a microsecond. Bounded to
 * about 12 ms. Returns (wall ms at the edge, monotonic ms of the edge, bracket width ms).
 */
export function findEdge(src: TimeSource, maxMs = 12): { wallMs: number; monoMs: number; widthMs: number } {
  let bestWidth = Number.POSITIVE_INFINITY;
  let bestEpoch = 0;
  let bestPerf = 0;
  const deadline = src.monoMs() + maxMs;
  let edges = 0;
  let prevBefore = src.monoMs();
  let prev = src.wallMs();
  let prevAfter = src.monoMs();
  while (prevAfter < deadline && (edges < 4 || bestWidth > GOOD_EDGE_MS)) {
    const before = src.monoMs();
    const d = src.wallMs();
    const after = src.monoMs();
    if (d !== prev) {
      const width = after - prevBefore;
      if (width < bestWidth) {
        bestWidth = width;
        bestEpoch = d;
        bestPerf = (prevBefore + after) / 2;
      }
      edges++;
      if (width < NARROW_EDGE_MS) break; // 2 µs: good enough, stop spinning
    }
    prevBefore = before;
    prev = d;
    prevAfter = after;
  }
  if (bestWidth === Number.POSITIVE_INFINITY)
    return { wallMs: src.wallMs(), monoMs: src.monoMs(), widthMs: 1 };
  return { wallMs: bestEpoch, monoMs: bestPerf, widthMs: bestWidth };
}

export class ServedClock {
  readonly #src: TimeSource;
  /**
   * The realtime clock kernel timestamps are on: the source itself, or the real host's (see TimeSource). When
   * it is the source, the kernel's offset from raw is the source's own and is not measured apart.
   */
  readonly #kernelSrc: TimeSource;
  /** Kernel timestamps not used because they lay outside their window (kernel-rx-timestamp.ts). */
  kernelStampsReplaced = 0;
  #anchorSec = 0;
  /** Nanoseconds past #anchorSec at #anchorPerf. */
  #anchorNs = 0;
  #anchorPerf = 0;
  #anchorWidthMs = Number.POSITIVE_INFINITY;
  #correction: Correction = ZERO_CORRECTION;
  #timer: NodeJS.Timeout | undefined;
  #offTick: (() => void) | undefined;
  #steps = 0;
  /** Host realtime (the time source's wall clock) − raw, ms; changes only when the host clock steps. */
  #hostOffsetMs = 0;
  /** The kernel's CLOCK_REALTIME − raw, ms (what kernel receive timestamps are in). */
  #kernelOffsetMs = 0;
  /** Bracket widths of those two measurements, ms (their uncertainty), and when they were taken. */
  #hostWidthMs = Number.POSITIVE_INFINITY;
  #kernelWidthMs = Number.POSITIVE_INFINITY;
  #measuredAt = 0;
  readonly #onStep: ((deltaMs: number) => void) | undefined;
  readonly #listeners: (() => void)[] = [];

  constructor(options: { source?: TimeSource; onStep?: (deltaMs: number) => void } = {}) {
    this.#src = options.source ?? hostTimeSource;
    const src = this.#src;
    this.#kernelSrc = src === hostTimeSource || src.kernelStampMs === undefined ? hostTimeSource : src;
    this.#onStep = options.onStep;
    // The first search may run cold (JIT) or be preempted and bracket the edge widely: then a second, and
    // the narrower wins. A narrow first bracket is kept; each search spins until a millisecond edge (up to a
    // millisecond, several on a busy machine), which a start pays (docs/performance.md "At rest").
    const first = findEdge(this.#src, 50);
    let edge = first;
    if (first.widthMs >= NARROW_EDGE_MS) {
      const second = findEdge(this.#src, 50);
      if (second.widthMs <= first.widthMs) edge = second;
    }
    this.#anchorWidthMs = edge.widthMs;
    this.#anchorSec = Math.floor(edge.wallMs / 1000);
    this.#anchorNs = (edge.wallMs - this.#anchorSec * 1000) * 1e6;
    this.#anchorPerf = edge.monoMs;
    // Raw is this source's wall clock at the anchor's edge, so the source's offset from raw is 0 within the
    // anchor's bracket: what a search of the next edge would measure, without its spin.
    this.#hostOffsetMs = 0;
    this.#hostWidthMs = edge.widthMs;
    if (this.#kernelSrc === this.#src) {
      this.#kernelOffsetMs = 0;
      this.#kernelWidthMs = edge.widthMs;
    } else {
      const kernel = measureOffset(this.#kernelSrc, this, 50);
      this.#kernelOffsetMs = kernel.offsetMs;
      this.#kernelWidthMs = kernel.widthMs;
    }
    this.#measuredAt = performance.now();
  }

  /**
   * Measure the host clock's and the kernel's offsets from raw (they differ from 0 by the anchor's error
   * and by host clock steps). A measurement replaces the current one when it is narrower, when the
   * current one is older than REMEASURE_MS and the new one is good, or when `force` (a step).
   */
  #remeasure(force: boolean): void {
    const now = performance.now();
    const stale = now - this.#measuredAt > REMEASURE_MS;
    if (!force && !stale && this.#hostWidthMs <= GOOD_EDGE_MS && this.#kernelWidthMs <= GOOD_EDGE_MS) return;
    const host = measureOffset(this.#src, this, force ? 50 : 3);
    if (force || host.widthMs < this.#hostWidthMs || (stale && host.widthMs <= GOOD_EDGE_MS)) {
      this.#hostOffsetMs = host.offsetMs;
      this.#hostWidthMs = host.widthMs;
    }
    const kernel =
      this.#kernelSrc === this.#src ? host : measureOffset(this.#kernelSrc, this, force ? 50 : 3);
    if (force || kernel.widthMs < this.#kernelWidthMs || (stale && kernel.widthMs <= GOOD_EDGE_MS)) {
      this.#kernelOffsetMs = kernel.offsetMs;
      this.#kernelWidthMs = kernel.widthMs;
    }
    if (stale || force) this.#measuredAt = now;
  }

  /** Count of detected host clock steps. */
  get steps(): number {
    return this.#steps;
  }

  /** Width of the anchor's bracket, ms (its uncertainty). */
  get anchorUncertaintyMs(): number {
    return this.#anchorWidthMs;
  }

  /** Width of the bracket of the kernel-stamp mapping's offset, ms (how exactly kernelStampMonoMs maps). */
  get kernelMappingUncertaintyMs(): number {
    return this.#kernelWidthMs;
  }

  /** Host realtime − raw clock, seconds (0 until the host clock steps). */
  hostOffsetS(): number {
    return this.#hostOffsetMs / 1000;
  }

  /** Check for host clock steps every second: on the service's tick when given (service-tick.ts). */
  start(tick?: Ticker): void {
    this.stop();
    if (tick) {
      this.#offTick = tick.every(() => this.checkHostClock());
      return;
    }
    this.#timer = setInterval(() => {
      this.checkHostClock();
    }, 1000);
    this.#timer.unref();
  }

  /**
   * Compare the host clock with raw. Normally raw + offset − wall is in [0, 1) ms because the wall clock
   * truncates to the millisecond; outside (with a margin) the host clock was stepped. A preemption between
   * the two reads can fake that, so it must show twice; then the offset is measured precisely.
   */
  checkHostClock(): void {
    // Two reads of each clock a second, no closure or object (docs/performance.md "Fifth pass").
    if (this.#hostOutside() && this.#hostOutside()) {
      const before = this.#hostOffsetMs;
      this.#remeasure(true);
      this.#steps++;
      this.#onStep?.(this.#hostOffsetMs - before);
      return;
    }
    if (
      this.#kernelSrc !== this.#src &&
      this.#outside(this.#kernelSrc, this.#kernelOffsetMs, this.#kernelWidthMs) &&
      this.#outside(this.#kernelSrc, this.#kernelOffsetMs, this.#kernelWidthMs)
    ) {
      this.#remeasure(true);
      return;
    }
    // A measurement taken on a busy machine may bracket the edge widely: improve it while it is.
    this.#remeasure(false);
  }

  #hostOutside(): boolean {
    return this.#outside(this.#src, this.#hostOffsetMs, this.#hostWidthMs);
  }

  /** The clock `src` is off raw + `offsetMs` beyond its truncation; the margin widens with the edge bracket. */
  #outside(src: TimeSource, offsetMs: number, widthMs: number): boolean {
    const diffMs = this.rawUnixMs(src.monoMs()) + offsetMs - src.wallMs();
    const margin = 0.25 + Math.min(widthMs, 5);
    return diffMs < -margin || diffMs > 1 + margin;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#offTick?.();
    this.#offTick = undefined;
  }

  setCorrection(c: Correction): void {
    this.#correction = c;
    for (const fn of this.#listeners) fn();
  }

  /** Call `fn` after every change of the correction (the native responder takes a new piece). */
  onCorrection(fn: () => void): () => void {
    this.#listeners.push(fn);
    return () => {
      const i = this.#listeners.indexOf(fn);
      if (i >= 0) this.#listeners.splice(i, 1);
    };
  }

  /**
   * The served clock from monotonic `perf` on as one linear piece, for the native responder
   * (docs/performance.md "Native responder"): served NTP time = sec0 s + ns0 + (t − p0)·1e6·rate ns for
   * t in [p0, p1), which is the arithmetic of write() wherever the correction is linear. The piece ends at
   * the next break of the correction (correction.ts: its start, the end of a slew, a leap second's instant
   * and the ends of its smear). Undefined for a time source other than the host's: the native side reads
   * the host's clocks, which a test's simulated host does not move.
   */
  linearPiece(perf = performance.now()): LinearPiece | undefined {
    if (this.#src !== hostTimeSource) return undefined;
    const c = this.#correction;
    const breaks = [c.t0Ms];
    if (c.slewS !== 0 && c.slewRate > 0) breaks.push(c.t0Ms + (Math.abs(c.slewS) / c.slewRate) * 1000);
    if (c.leap) {
      const l = c.leap;
      breaks.push(l.atMs);
      if (l.smearMs > 0) breaks.push(l.atMs - l.smearMs / 2, l.atMs + l.smearMs / 2);
    }
    let p1 = Number.POSITIVE_INFINITY;
    for (const b of breaks) if (b > perf && b < p1) p1 = b;
    // The slope from a point inside the piece (at p1 itself a step may already apply).
    const probe = Number.isFinite(p1) ? perf + (p1 - perf) / 2 : perf + 1000;
    const c0 = correctionAt(c, perf);
    const slope = probe > perf ? (correctionAt(c, probe) - c0) / ((probe - perf) / 1000) : 0;
    let ns = this.#anchorNs + (perf - this.#anchorPerf) * 1e6 + c0 * 1e9;
    const whole = Math.floor(ns / 1e9);
    ns -= whole * 1e9;
    let sec0 = (this.#anchorSec + whole + NTP_UNIX_OFFSET_S) % TWO32;
    if (sec0 < 0) sec0 += TWO32;
    return { p0: perf, p1, sec0, ns0: ns, rate: 1 + slope };
  }

  get correction(): Correction {
    return this.#correction;
  }

  /** Raw (uncorrected) time as Unix ms with a fractional part. */
  rawUnixMs(perf = performance.now()): number {
    return this.#anchorSec * 1000 + this.#anchorNs / 1e6 + (perf - this.#anchorPerf);
  }

  /** The kernel's CLOCK_REALTIME at monotonic `perf`, Unix ms (to read kernel receive timestamps). */
  kernelRealtimeMs(perf = performance.now()): number {
    return this.rawUnixMs(perf) + this.#kernelOffsetMs;
  }

  /** The kernel's CLOCK_REALTIME read directly now (whole ms), on the scale kernel timestamps map from. */
  kernelRealtimeNowMs(): number {
    return this.#kernelSrc.wallMs();
  }

  /**
   * A kernel timestamp (CLOCK_REALTIME, Unix ms, as the addons return it) as monotonic ms, through the
   * last measured realtime offset: right unless the host clock stepped since (then off by the step).
   */
  kernelStampMonoMs(realtimeMs: number): number {
    const wall = this.#src.kernelStampMs ? this.#src.kernelStampMs(realtimeMs) : realtimeMs;
    return this.#anchorPerf + (wall - this.#kernelOffsetMs - this.#anchorSec * 1000 - this.#anchorNs / 1e6);
  }

  /** Write the raw or served time at monotonic `perf` as an NTP timestamp into buf[offset..offset+8]. */
  write(buf: Uint8Array, offset: number, served: boolean, perf = performance.now()): void {
    // The arithmetic of read(), without the object (this runs once or twice per request).
    let ns = this.#anchorNs + (perf - this.#anchorPerf) * 1e6;
    if (served) ns += correctionAt(this.#correction, perf) * 1e9;
    const whole = Math.floor(ns / 1e9);
    ns -= whole * 1e9;
    let seconds = (this.#anchorSec + whole + NTP_UNIX_OFFSET_S) % TWO32;
    if (seconds < 0) seconds += TWO32;
    const fraction = Math.min(TWO32 - 1, Math.floor((ns * TWO32) / 1e9));
    buf[offset] = seconds >>> 24;
    buf[offset + 1] = seconds >>> 16;
    buf[offset + 2] = seconds >>> 8;
    buf[offset + 3] = seconds;
    buf[offset + 4] = fraction >>> 24;
    buf[offset + 5] = fraction >>> 16;
    buf[offset + 6] = fraction >>> 8;
    buf[offset + 7] = fraction;
  }

  /** The raw or served time at monotonic `perf` as an NTP timestamp. */
  read(served: boolean, perf = performance.now()): NtpTimestamp {
    let ns = this.#anchorNs + (perf - this.#anchorPerf) * 1e6;
    if (served) ns += correctionAt(this.#correction, perf) * 1e9;
    const whole = Math.floor(ns / 1e9);
    ns -= whole * 1e9;
    let seconds = (this.#anchorSec + whole + NTP_UNIX_OFFSET_S) % TWO32;
    if (seconds < 0) seconds += TWO32;
    return { seconds, fraction: Math.min(TWO32 - 1, Math.floor((ns * TWO32) / 1e9)) };
  }

  /** Served time as Unix ms (fractional). */
  servedUnixMs(perf = performance.now()): number {
    return this.rawUnixMs(perf) + correctionAt(this.#correction, perf) * 1000;
  }
}

/** `src`'s wall clock − the served clock's raw clock, ms, measured at a millisecond edge, with its width. */
function measureOffset(
  src: TimeSource,
  clock: ServedClock,
  maxMs = 12,
): { offsetMs: number; widthMs: number } {
  // Up to three searches, the narrowest wins: one preemption inside a bracket must not set the offset.
  let edge = findEdge(src, maxMs);
  for (let i = 0; i < 2 && edge.widthMs > GOOD_EDGE_MS; i++) {
    const next = findEdge(src, maxMs);
    if (next.widthMs < edge.widthMs) edge = next;
  }
  return { offsetMs: edge.wallMs - clock.rawUnixMs(edge.monoMs), widthMs: edge.widthMs };
}

/**
 * Precision (RFC 5905 §7.3, log2 s): the smallest step between two distinct readings of the clock,
 * rounded up, as ntpd and chrony measure it.
 */
export function measurePrecision(): number {
  let min = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 1000; i++) {
    const a = performance.now();
    let b = performance.now();
    while (b === a) b = performance.now();
    min = Math.min(min, b - a);
  }
  const log2 = Math.ceil(Math.log2(min / 1000));
  return Math.max(-30, Math.min(-6, log2));
}
