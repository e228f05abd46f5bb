import { decoded, reject, type Decoded } from '@broadcast-ops/core/decoded';

/**
 * SRT's cleartext packet header, as far as the relay reads it (docs/relay.md "What the relay measures").
 * Layouts: the SRT Internet-Draft (draft-sharabayko-srt-01) section 3.1 (the 16-byte header: F bit, then a
 * data packet's 31-bit sequence number and its PP|O|KK|R|message-number word, or a control packet's 15-bit
 * type, 16-bit subtype and 32-bit type-specific field), 3.2.4 (ACK: the type-specific field is the ACK
 * number; the CIF starts with the last acknowledged sequence number, the RTT and the RTT variance in
 * microseconds), 3.2.6 (ACKACK echoes the ACK number), and libsrt's srtcore/packet.h (`UDTMessageType`,
 * `MSGNO_REXMIT` = bit 26 of the second word) and core.h (`AckDataItem`: ACKD_RCVLASTACK = 0, ACKD_RTT = 1,
 * ACKD_RTTVAR = 2). Only the header and an ACK's first three CIF words are read: the payload of a data
 * packet is encrypted end to end and never looked at.
 *
 * Two ways in: the readers below (`srtKind`, `srtSequence`, ...) work on a Buffer without allocating, for
 * the relay's per-datagram path; `decodeSrtHeader` returns the same facts as a `Decoded` value.
 */

/** Bytes of the fixed header (draft section 3.1). */
export const SRT_HEADER_BYTES = 16;

/** Control types (draft section 3.2, libsrt packet.h `UDTMessageType`). */
export const SRT_CONTROL = {
  handshake: 0x0000,
  keepalive: 0x0001,
  ack: 0x0002,
  nak: 0x0003,
  congestion: 0x0004,
  shutdown: 0x0005,
  ackack: 0x0006,
  dropreq: 0x0007,
  peererror: 0x0008,
  user: 0x7fff,
} as const;

/** The classes the relay's meter tells apart; `other` is any other control packet. */
export const SrtKind = {
  tooShort: 0,
  data: 1,
  handshake: 2,
  ack: 3,
  ackack: 4,
  nak: 5,
  keepalive: 6,
  shutdown: 7,
  other: 8,
} as const;
export type SrtKind = (typeof SrtKind)[keyof typeof SrtKind];

/** Sequence numbers are 31 bits (draft section 3.1) and wrap. */
export const SEQ_MODULUS = 0x8000_0000;

const REXMIT_BIT = 1 << 26;

/** Byte `i` of `buf` (callers check the length first). */
function at(buf: Uint8Array, i: number): number {
  return buf[i] ?? 0;
}

/** The class of one datagram from its first word; `tooShort` below the 16-byte header. */
export function srtKind(buf: Uint8Array): SrtKind {
  if (buf.length < SRT_HEADER_BYTES) return SrtKind.tooShort;
  if ((at(buf, 0) & 0x80) === 0) return SrtKind.data;
  switch (((at(buf, 0) & 0x7f) << 8) | at(buf, 1)) {
    case SRT_CONTROL.handshake:
      return SrtKind.handshake;
    case SRT_CONTROL.ack:
      return SrtKind.ack;
    case SRT_CONTROL.ackack:
      return SrtKind.ackack;
    case SRT_CONTROL.nak:
      return SrtKind.nak;
    case SRT_CONTROL.keepalive:
      return SrtKind.keepalive;
    case SRT_CONTROL.shutdown:
      return SrtKind.shutdown;
    default:
      return SrtKind.other;
  }
}

function word(buf: Uint8Array, i: number): number {
  return ((at(buf, i) << 24) | (at(buf, i + 1) << 16) | (at(buf, i + 2) << 8) | at(buf, i + 3)) >>> 0;
}

/** A data packet's 31-bit sequence number (caller checked `srtKind` is data). */
export function srtSequence(buf: Uint8Array): number {
  return word(buf, 0) & 0x7fff_ffff;
}

/** A data packet's R flag: this is a retransmission (draft section 3.1; libsrt `MSGNO_REXMIT`). */
export function srtRetransmitted(buf: Uint8Array): boolean {
  return (word(buf, 4) & REXMIT_BIT) !== 0;
}

/** A control packet's type-specific field: the ACK number of an ACK or an ACKACK (draft 3.2.4, 3.2.6). */
export function srtTypeSpecific(buf: Uint8Array): number {
  return word(buf, 4);
}

/**
 * The RTT an ACK carries, in microseconds (CIF word 1, draft section 3.2.4), or -1 when the ACK is too short
 * to carry it (a light ACK has only the last acknowledged sequence number).
 */
export function srtAckRttMicros(buf: Uint8Array): number {
  return buf.length >= SRT_HEADER_BYTES + 8 ? word(buf, SRT_HEADER_BYTES + 4) : -1;
}

/** The RTT variance an ACK carries (CIF word 2), microseconds, or -1 when absent. */
export function srtAckRttVarMicros(buf: Uint8Array): number {
  return buf.length >= SRT_HEADER_BYTES + 12 ? word(buf, SRT_HEADER_BYTES + 8) : -1;
}

/** Distance from `from` to `to` forward on the 31-bit sequence circle, 0 .. 2^31 - 1. */
export function seqForward(from: number, to: number): number {
  return (to - from + SEQ_MODULUS) % SEQ_MODULUS;
}

export type SrtHeader =
  | { kind: 'data'; sequence: number; retransmitted: boolean; encrypted: boolean; destination: number }
  | {
      kind: 'control';
      type: number;
      subtype: number;
      typeSpecific: number;
      destination: number;
      /** ACK only, when its CIF carries them: the receiver's RTT and RTT variance, microseconds. */
      rttMicros?: number;
      rttVarMicros?: number;
    };

/** One datagram's SRT header, or why it is not one (shorter than 16 bytes). Never reads the payload. */
export function decodeSrtHeader(buf: Uint8Array): Decoded<SrtHeader> {
  if (buf.length < SRT_HEADER_BYTES)
    return reject('too-short', `an SRT header needs ${SRT_HEADER_BYTES} bytes, got ${buf.length}`, 0);
  const destination = word(buf, 12);
  if ((at(buf, 0) & 0x80) === 0) {
    const w1 = word(buf, 4);
    return decoded({
      kind: 'data',
      sequence: srtSequence(buf),
      retransmitted: (w1 & REXMIT_BIT) !== 0,
      // KK, bits 28-27 of the second word: 0 = not encrypted, 1 even key, 2 odd key (draft 3.1).
      encrypted: ((w1 >>> 27) & 0b11) !== 0,
      destination,
    });
  }
  const type = ((at(buf, 0) & 0x7f) << 8) | at(buf, 1);
  const header: SrtHeader = {
    kind: 'control',
    type,
    subtype: (at(buf, 2) << 8) | at(buf, 3),
    typeSpecific: srtTypeSpecific(buf),
    destination,
  };
  if (type === SRT_CONTROL.ack) {
    const rtt = srtAckRttMicros(buf);
    const rttVar = srtAckRttVarMicros(buf);
    if (rtt >= 0) header.rttMicros = rtt;
    if (rttVar >= 0) header.rttVarMicros = rttVar;
  }
  return decoded(header);
}
