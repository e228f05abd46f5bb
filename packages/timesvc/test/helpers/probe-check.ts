/** The loop tests' judge: what a probe recorded, and the two properties every loop test asserts (pure). */

export interface ProbeRecord {
  /** Monotonic ms at which the request was sent. */
  atMs: number;
  /** Monotonic ms at which the reply was handled (after the server stamped T3). */
  recvMs: number;
  leap: number;
  stratum: number;
  /** Served transmit timestamp as a 64-bit NTP value. */
  t3: bigint;
  rootDelayS: number;
  rootDispersionS: number;
  /** Offset of the server under test from the truth (server − truth), seconds. */
  errorS: number;
  /** This probe's round-trip delay, seconds. */
  delayS: number;
  /** The reply's receive timestamp − the request's T1 (truth), and its transmit − receive timestamp, s. */
  t21S: number;
  t32S: number;
  /** Whether the truth had reached the server (OffsetUpstream.knowable). */
  knowable: boolean;
}

export interface ProbeCheck {
  replies: number;
  synchronised: number;
  /**
   * Largest shortfall of T3's rise between consecutive replies below the least the served clock may rise
   * in the time between them, seconds (0 = never). With `maxRate` 1 that is simply the largest decrease.
   */
  worstBackwardS: number;
  /** Largest |error| − bound among synchronised replies whose truth was knowable, seconds (≤ 0 = within). */
  worstBeyondBoundS: number;
  /** The reply with that worst excess, for messages. */
  worst: ProbeRecord | undefined;
}

/** Rounding of the served clock's NTP timestamps and of the probe's monotonic readings, seconds. */
const ROUNDING_S = 1e-6;

/**
 * The two properties every loop test asserts: served T3 never decreases between consecutive replies, and
 * whenever LI ≠ 3, |error| ≤ root delay/2 + root dispersion of the same reply. The probe's own measurement
 * is exact only to within half its round trip (RFC 5905 §8), so that half is added to the bound; replies
 * sent before the server could have heard of a change of the truth (a move, the end of an outage) are not
 * judged against it — no server can know a reference moved before it has measured it.
 *
 * Monotonicity: replies are ~200 ms apart, so a plain "T3 never decreased" would only catch backward steps
 * larger than that. A served clock whose rate never falls below 1 − `maxRate` (|frequency| + slew rate;
 * docs/clock-discipline.md "Guarantees") rises at least (1 − maxRate)·(send of b − receipt of a) between
 * T3 of a (stamped before a's reply was handled) and T3 of b (stamped after b's request was sent); a smaller
 * rise means served time went backwards (or slewed faster than documented) in between. `maxRate` 1 keeps
 * only "never decreases" (for servers whose rates are not known, e.g. chronyd's 83,333 ppm plus its frequency).
 */
export function checkProbe(records: readonly ProbeRecord[], maxRate = 1): ProbeCheck {
  let worstBackwardS = 0;
  let worstBeyondBoundS = Number.NEGATIVE_INFINITY;
  let worst: ProbeRecord | undefined;
  let synchronised = 0;
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    const prev = records[i - 1];
    if (prev) {
      const rise = Number(r.t3 - prev.t3) / 2 ** 32;
      const least = (Math.max(0, r.atMs - prev.recvMs) / 1000) * (1 - maxRate);
      const shortfall = least - rise - (maxRate < 1 ? ROUNDING_S : 0);
      if (shortfall > 0) worstBackwardS = Math.max(worstBackwardS, shortfall);
    }
    if (r.leap === 3) continue;
    synchronised++;
    if (!r.knowable) continue;
    const bound = r.rootDelayS / 2 + r.rootDispersionS + Math.max(0, r.delayS) / 2;
    const beyond = Math.abs(r.errorS) - bound;
    if (beyond > worstBeyondBoundS) {
      worstBeyondBoundS = beyond;
      worst = r;
    }
  }
  return { replies: records.length, synchronised, worstBackwardS, worstBeyondBoundS, worst };
}
