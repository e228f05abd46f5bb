import { performance } from 'node:perf_hooks';
import { systemClock, type Clock } from '@broadcast-ops/core';
import { NTP_UNIX_OFFSET_S, type NtpTimestamp } from '../protocol/ntp-packet.ts';
import { ZERO_CORRECTION, correctionAt, type Correction } from '../domain/correction.ts';

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
}

export const hostTimeSource: TimeSource = { wallMs: () => Date.now(), monoMs: () => performance.now() };

/** The Clock handed to the domain: monotonic time is performance.now(), the same base as the served clock. */
export const hiresClock: Clock = {
  now: () => Date.now(),
  monotonicMs: () => performance.now(),
  monotonicNs: () => BigInt(Math.round(performance.now() * 1e6)),
  setTimer: (ms, fn) => systemClock.setTimer(ms, fn),
};

const TWO32 = 4_294_967_296;

/**
 * Find a millisecond edge of `wallMs`: the previous reading (between prevBefore and prevAfter on the
 * monotonic clock) returned the old millisecond and the current one (between before and after) the new
 * one, so the edge lies in (prevBefore, after). A preemption inside that window would widen it, so several
 * edges are observed and the narrowest bracket wins; it is normally well under a microsecond. Bounded to
 * about 12 ms. Returns (wall ms at the edge, monotonic ms of the edge, bracket width ms).
 */
export function findEdge(src: TimeSource): { wallMs: number; monoMs: number; widthMs: number } {
  let bestWidth = Number.POSITIVE_INFINITY;
  let bestEpoch = 0;
  let bestPerf = 0;
  const deadline = src.monoMs() + 12;
  let edges = 0;
  let prevBefore = src.monoMs();
  let prev = src.wallMs();
  let prevAfter = src.monoMs();
  while (edges < 4 && prevAfter < deadline) {
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
      if (width < 0.002) break; // 2 µs: good enough, stop spinning
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
  #anchorSec = 0;
  /** Nanoseconds past #anchorSec at #anchorPerf. */
  #anchorNs = 0;
  #anchorPerf = 0;
  #anchorWidthMs = Number.POSITIVE_INFINITY;
  #correction: Correction = ZERO_CORRECTION;
  #timer: NodeJS.Timeout | undefined;
  #steps = 0;
  /** Host realtime (the time source's wall clock) − raw, ms; changes only when the host clock steps. */
  #hostOffsetMs = 0;
  /** The kernel's CLOCK_REALTIME − raw, ms (what kernel receive timestamps are in). */
  #kernelOffsetMs = 0;
  readonly #onStep: ((deltaMs: number) => void) | undefined;

  constructor(options: { source?: TimeSource; onStep?: (deltaMs: number) => void } = {}) {
    this.#src = options.source ?? hostTimeSource;
    this.#onStep = options.onStep;
    // Two searches, the narrower wins: the first may run cold (JIT) and bracket the edge widely.
    const first = findEdge(this.#src);
    const second = findEdge(this.#src);
    const edge = second.widthMs <= first.widthMs ? second : first;
    this.#anchorWidthMs = edge.widthMs;
    this.#anchorSec = Math.floor(edge.wallMs / 1000);
    this.#anchorNs = (edge.wallMs - this.#anchorSec * 1000) * 1e6;
    this.#anchorPerf = edge.monoMs;
    // A second, warm measurement: the first edge search may run cold and bracket the edge widely.
    this.#hostOffsetMs = measureOffset(this.#src, this);
    this.#kernelOffsetMs =
      this.#src === hostTimeSource ? this.#hostOffsetMs : measureOffset(hostTimeSource, this);
  }

  /** Count of detected host clock steps. */
  get steps(): number {
    return this.#steps;
  }

  /** Width of the anchor's bracket, ms (its uncertainty). */
  get anchorUncertaintyMs(): number {
    return this.#anchorWidthMs;
  }

  /** Host realtime − raw clock, seconds (0 until the host clock steps). */
  hostOffsetS(): number {
    return this.#hostOffsetMs / 1000;
  }

  /** Check for host clock steps every second. */
  start(): void {
    this.stop();
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
    const outside = (src: TimeSource, offsetMs: number): boolean => {
      const diffMs = this.rawUnixMs(src.monoMs()) + offsetMs - src.wallMs();
      return diffMs < -0.25 || diffMs > 1.25;
    };
    if (outside(this.#src, this.#hostOffsetMs) && outside(this.#src, this.#hostOffsetMs)) {
      const before = this.#hostOffsetMs;
      this.#hostOffsetMs = measureOffset(this.#src, this);
      if (this.#src === hostTimeSource) this.#kernelOffsetMs = this.#hostOffsetMs;
      this.#steps++;
      this.#onStep?.(this.#hostOffsetMs - before);
    }
    if (this.#src !== hostTimeSource && outside(hostTimeSource, this.#kernelOffsetMs)) {
      if (outside(hostTimeSource, this.#kernelOffsetMs))
        this.#kernelOffsetMs = measureOffset(hostTimeSource, this);
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  setCorrection(c: Correction): void {
    this.#correction = c;
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

  /** Write the raw or served time at monotonic `perf` as an NTP timestamp into buf[offset..offset+8]. */
  write(buf: Buffer, offset: number, served: boolean, perf = performance.now()): void {
    const { seconds, fraction } = this.read(served, perf);
    buf.writeUInt32BE(seconds, offset);
    buf.writeUInt32BE(fraction, offset + 4);
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

/** `src`'s wall clock − the served clock's raw clock, ms, measured at a millisecond edge. */
function measureOffset(src: TimeSource, clock: ServedClock): number {
  const edge = findEdge(src);
  return edge.wallMs - clock.rawUnixMs(edge.monoMs);
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
