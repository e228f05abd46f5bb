import { performance } from 'node:perf_hooks';
import { systemClock, type Clock } from '@broadcast-ops/core';
import { NTP_UNIX_OFFSET_S, type NtpTimestamp } from '../protocol/ntp-packet.ts';

/**
 * The served clock. Node's Date.now() has millisecond resolution, so realtime is anchored to the
 * high-resolution monotonic clock (performance.now(), CLOCK_MONOTONIC, which the kernel slews at the same
 * rate as CLOCK_REALTIME): spin to a Date.now() millisecond edge and record (epoch ms, performance.now()).
 * Raw realtime is then anchor + elapsed monotonic time, with sub-microsecond resolution (reference §3.13).
 * Re-anchored every `reanchorMs` and whenever a step of the system clock is detected.
 *
 * Served time = raw realtime + the clock manager's correction c(t). The system clock is never adjusted.
 */

/** The Clock handed to the domain: monotonic time is performance.now(), the same base as the served clock. */
export const hiresClock: Clock = {
  now: () => Date.now(),
  monotonicMs: () => performance.now(),
  monotonicNs: () => BigInt(Math.round(performance.now() * 1e6)),
  setTimer: (ms, fn) => systemClock.setTimer(ms, fn),
};

export interface Correction {
  phaseS: number;
  freq: number;
  t0Ms: number;
}

const TWO32 = 4_294_967_296;

export class ServedClock {
  #anchorSec = 0;
  /** Nanoseconds past #anchorSec at #anchorPerf. */
  #anchorNs = 0;
  #anchorPerf = 0;
  #correction: Correction = { phaseS: 0, freq: 0, t0Ms: 0 };
  #timer: NodeJS.Timeout | undefined;
  #steps = 0;
  #lastAnchorPerf = 0;
  #anchorWidthMs = Number.POSITIVE_INFINITY;
  readonly #reanchorMs: number;
  readonly #onStep: ((deltaMs: number) => void) | undefined;

  constructor(options: { reanchorMs?: number; onStep?: (deltaMs: number) => void } = {}) {
    this.#reanchorMs = options.reanchorMs ?? 64_000;
    this.#onStep = options.onStep;
    this.anchor();
  }

  /** Count of detected system-clock steps. */
  get steps(): number {
    return this.#steps;
  }

  /**
   * Find a Date.now() millisecond edge. The previous Date.now() call (between prevBefore and prevAfter)
   * returned the old millisecond and the current one (between before and after) the new one, so the edge
   * lies in (prevBefore, after). A preemption inside that window would widen it, so several edges are
   * observed and the narrowest bracket wins; it is normally well under a microsecond. Bounded to ~12 ms.
   */
  anchor(): void {
    let bestWidth = Number.POSITIVE_INFINITY;
    let bestEpoch = 0;
    let bestPerf = 0;
    const deadline = performance.now() + 12;
    let edges = 0;
    let prevBefore = performance.now();
    let prev = Date.now();
    let prevAfter = performance.now();
    while (edges < 4 && prevAfter < deadline) {
      const before = performance.now();
      const d = Date.now();
      const after = performance.now();
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
    if (bestWidth === Number.POSITIVE_INFINITY) {
      bestEpoch = Date.now();
      bestPerf = performance.now();
    }
    this.#anchorWidthMs = bestWidth;
    this.#setAnchor(bestEpoch, bestPerf);
  }

  /** Width of the last anchor's bracket, ms (its uncertainty). */
  get anchorUncertaintyMs(): number {
    return this.#anchorWidthMs;
  }

  #setAnchor(epochMs: number, perf: number): void {
    this.#anchorSec = Math.floor(epochMs / 1000);
    this.#anchorNs = (epochMs - this.#anchorSec * 1000) * 1e6;
    this.#anchorPerf = perf;
    this.#lastAnchorPerf = perf;
  }

  /** Check for a step of the system clock every second; re-anchor periodically. */
  start(): void {
    this.stop();
    this.#timer = setInterval(() => {
      // Normally raw − Date.now() is in [0, 1) ms because Date.now() truncates; outside (with a margin) the
      // system clock was stepped. A preemption between the two reads can fake that, so it must show twice.
      const outside = (): boolean => {
        const diffMs = this.rawUnixMs() - Date.now();
        return diffMs < -0.25 || diffMs > 1.25;
      };
      if (outside() && outside()) {
        const deltaMs = Date.now() - this.rawUnixMs();
        this.#steps++;
        this.anchor();
        this.#onStep?.(deltaMs);
      } else if (performance.now() - this.#lastAnchorPerf >= this.#reanchorMs) {
        this.anchor();
      }
    }, 1000);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  setCorrection(c: Correction): void {
    this.#correction = c;
  }

  /** Raw (uncorrected) realtime as Unix ms with a fractional part, for diagnostics. */
  rawUnixMs(perf = performance.now()): number {
    return this.#anchorSec * 1000 + this.#anchorNs / 1e6 + (perf - this.#anchorPerf);
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
    if (served) ns += this.#correctionS(perf) * 1e9;
    const whole = Math.floor(ns / 1e9);
    ns -= whole * 1e9;
    let seconds = (this.#anchorSec + whole + NTP_UNIX_OFFSET_S) % TWO32;
    if (seconds < 0) seconds += TWO32;
    return { seconds, fraction: Math.min(TWO32 - 1, Math.floor((ns * TWO32) / 1e9)) };
  }

  /** Served time as Unix ms (fractional). */
  servedUnixMs(perf = performance.now()): number {
    return this.rawUnixMs(perf) + this.#correctionS(perf) * 1000;
  }

  /** c(perf), seconds: served − raw time at monotonic `perf`. */
  #correctionS(perf: number): number {
    const c = this.#correction;
    return c.phaseS + (c.freq * (perf - c.t0Ms)) / 1000;
  }
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
