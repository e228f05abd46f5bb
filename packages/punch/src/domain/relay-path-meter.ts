import type { Clock } from '@broadcast-ops/core';
import {
  SEQ_MODULUS,
  SrtKind,
  seqForward,
  srtAckRttMicros,
  srtAckRttVarMicros,
  srtKind,
  srtRetransmitted,
  srtSequence,
  srtTypeSpecific,
} from '../protocol/srt-header.ts';
import type { Side } from './relay-allocations.ts';

/**
 * What the relay measures on one allocation from SRT's cleartext headers (docs/relay.md "What the relay
 * measures"); the payload is never read. Pure: time from the injected clock, read only on ACK and ACKACK.
 *
 * Figures are kept per media direction d (data packets arriving on side d, leaving towards the other side):
 * - data packets, and the sequence gaps among originals: loss upstream of the relay (between the sender
 *   and the relay). A retransmission (R flag) is not new loss; an original that arrives behind the
 *   expected number fills a gap counted before (`reordered`); a jump of `MAX_GAP` or more is a new
 *   sequence (a peer that restarted), not loss; a handshake starts a new connection on both directions.
 * - the sender leg: ACK n goes from the receiver (side 1 - d) through the relay to the sender, and the
 *   sender answers ACKACK n (draft-sharabayko-srt section 3.2.6); the time between the two at the relay is
 *   the relay ↔ sender round trip. Smoothed like SRT's own RTT (section 4.10: 7/8 old + 1/8 sample).
 * - the end-to-end RTT: the receiver's own smoothed RTT and variance, carried in each full ACK's CIF
 *   (section 3.2.4), as SRT measures it over the relayed path.
 * The receiver leg is the end-to-end RTT less the sender leg.
 */

/** A gap this large is a new sequence (a peer's new connection), not loss. */
export const MAX_GAP = 1 << 16;
/** ACKs waiting for their ACKACK per direction; libsrt sends a full ACK every 10 ms (`COMM_SYN_INTERVAL_US`). */
const ACK_RING = 64;
/** An RTT field above this (60 s) is not SRT's (a garbled or foreign packet); ignored. */
const MAX_RTT_US = 60_000_000;

export interface DirectionFigures {
  /** Data packets seen (originals and retransmissions). */
  packets: number;
  /** Originals missing from the sequence when they reached the relay: lost between the sender and here. */
  lost: number;
  /** Data packets flagged R (retransmitted by the sender). */
  retransmitted: number;
  /** Originals that arrived behind a later one (each took back one counted loss). */
  reordered: number;
  /** The receiver's end-to-end RTT from its last full ACK, ms; null before the first. */
  rttMs: number | null;
  rttVarMs: number | null;
  /** Relay ↔ sender round trip (ACK → ACKACK at the relay), smoothed, ms; null before the first pair. */
  senderLegMs: number | null;
  /** End-to-end less the sender leg (never below 0), ms; null until both are known. */
  receiverLegMs: number | null;
  /** Milliseconds since the last RTT figure of this direction (either kind); null before the first. */
  rttAgeMs: number | null;
}

/** Counters summed over every allocation of a relay, ended ones included (for `/metrics`). */
export interface PathTotals {
  packets: [number, number];
  lost: [number, number];
  retransmitted: [number, number];
}

export function emptyTotals(): PathTotals {
  return { packets: [0, 0], lost: [0, 0], retransmitted: [0, 0] };
}

class Direction {
  packets = 0;
  lost = 0;
  retransmitted = 0;
  reordered = 0;
  /** Next expected original sequence number; -1 before the first. */
  expected = -1;
  rttUs = -1;
  rttVarUs = -1;
  legMs = -1;
  lastRttMs = -1;
  readonly ackNo = new Float64Array(ACK_RING).fill(-1);
  readonly ackAt = new Float64Array(ACK_RING);
}

export class RelayPathMeter {
  readonly #clock: Clock;
  readonly #totals: PathTotals;
  readonly #d: [Direction, Direction] = [new Direction(), new Direction()];

  constructor(clock: Clock, totals: PathTotals = emptyTotals()) {
    this.#clock = clock;
    this.#totals = totals;
  }

  /** One datagram from the peer on `side`, on its way to the other side. Reads at most 28 bytes. */
  observe(side: Side, buf: Uint8Array): void {
    switch (srtKind(buf)) {
      case SrtKind.data:
        this.#data(side, buf);
        return;
      case SrtKind.ack:
        this.#ack(side, buf);
        return;
      case SrtKind.ackack:
        this.#ackack(side, buf);
        return;
      case SrtKind.handshake:
        // A new connection: new initial sequence numbers, new ACK numbers.
        for (const d of this.#d) {
          d.expected = -1;
          d.ackNo.fill(-1);
        }
        return;
      default:
        return;
    }
  }

  #data(side: Side, buf: Uint8Array): void {
    const d = this.#d[side];
    d.packets++;
    this.#totals.packets[side]++;
    if (srtRetransmitted(buf)) {
      d.retransmitted++;
      this.#totals.retransmitted[side]++;
      return;
    }
    const seq = srtSequence(buf);
    if (d.expected < 0) {
      d.expected = (seq + 1) % SEQ_MODULUS;
      return;
    }
    const ahead = seqForward(d.expected, seq);
    if (ahead < MAX_GAP) {
      d.lost += ahead;
      this.#totals.lost[side] += ahead;
      d.expected = (seq + 1) % SEQ_MODULUS;
    } else if (ahead > SEQ_MODULUS - MAX_GAP) {
      // Behind the expected number: a late original fills a gap counted as lost.
      d.reordered++;
      if (d.lost > 0) {
        d.lost--;
        this.#totals.lost[side]--;
      }
    } else {
      d.expected = (seq + 1) % SEQ_MODULUS;
    }
  }

  /** An ACK from the receiver on `side`: about the media flowing towards it, direction 1 - side. */
  #ack(side: Side, buf: Uint8Array): void {
    const d = this.#d[side === 0 ? 1 : 0];
    const n = srtTypeSpecific(buf);
    const rtt = srtAckRttMicros(buf);
    // A light ACK carries no ACK number (0) and no RTT: nothing to pair or read.
    if (n === 0 || rtt < 0) return;
    const now = this.#clock.monotonicMs();
    d.ackNo[n % ACK_RING] = n;
    d.ackAt[n % ACK_RING] = now;
    if (rtt <= MAX_RTT_US) {
      d.rttUs = rtt;
      const v = srtAckRttVarMicros(buf);
      d.rttVarUs = v >= 0 && v <= MAX_RTT_US ? v : -1;
      d.lastRttMs = now;
    }
  }

  /** An ACKACK from the sender on `side`: closes the relay ↔ sender round trip of direction `side`. */
  #ackack(side: Side, buf: Uint8Array): void {
    const d = this.#d[side];
    const n = srtTypeSpecific(buf);
    const slot = n % ACK_RING;
    if (n === 0 || d.ackNo[slot] !== n) return;
    d.ackNo[slot] = -1;
    const now = this.#clock.monotonicMs();
    const sample = now - (d.ackAt[slot] ?? now);
    d.legMs = d.legMs < 0 ? sample : d.legMs + (sample - d.legMs) / 8;
    d.lastRttMs = now;
  }

  figures(): [DirectionFigures, DirectionFigures] {
    const now = this.#clock.monotonicMs();
    const of = (d: Direction): DirectionFigures => {
      const rttMs = d.rttUs < 0 ? null : d.rttUs / 1000;
      const senderLegMs = d.legMs < 0 ? null : d.legMs;
      return {
        packets: d.packets,
        lost: d.lost,
        retransmitted: d.retransmitted,
        reordered: d.reordered,
        rttMs,
        rttVarMs: d.rttVarUs < 0 ? null : d.rttVarUs / 1000,
        senderLegMs,
        receiverLegMs: rttMs !== null && senderLegMs !== null ? Math.max(0, rttMs - senderLegMs) : null,
        rttAgeMs: d.lastRttMs < 0 ? null : now - d.lastRttMs,
      };
    };
    return [of(this.#d[0]), of(this.#d[1])];
  }
}

export type { RelayPathReport } from '../protocol/relay-path-view.ts';
