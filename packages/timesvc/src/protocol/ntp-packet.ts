/**
 * NTPv4 packet codec (RFC 5905 §7.3, Figure 8) with RFC 7822 extension fields. Pure: bytes in, typed values
 * or a typed error out. Every field is kept in its wire form (u32 timestamps, 16.16 short format, raw refid),
 * so a decoded packet re-encodes byte for byte and the origin timestamp can be echoed bit for bit.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export const NTP_PORT = 123;
export const NTP_VERSION = 4;
export const NTP_HEADER_LENGTH = 48;
/** Seconds between 1900-01-01 (NTP era 0) and 1970-01-01 (Unix epoch). RFC 5905 §6. */
export const NTP_UNIX_OFFSET_S = 2_208_988_800;
/** RFC 5905 §7.2 constants. */
export const MINPOLL = 4;
export const MAXPOLL = 17;
export const MAXDISP = 16;
export const MAXDIST = 1;
export const MINDISP = 0.01;
export const PHI = 15e-6;
/** Stratum 16 = unsynchronised (RFC 5905 §7.3); on the wire it is sent as 0. */
export const MAXSTRAT = 16;

export const MODE = {
  RESERVED: 0,
  SYMMETRIC_ACTIVE: 1,
  SYMMETRIC_PASSIVE: 2,
  CLIENT: 3,
  SERVER: 4,
  BROADCAST: 5,
  CONTROL: 6,
  PRIVATE: 7,
} as const;

export const LEAP = { NONE: 0, ADD_SECOND: 1, DEL_SECOND: 2, UNSYNCHRONISED: 3 } as const;

/** A 64-bit NTP timestamp (32.32 seconds since 1900, era 0), as its two wire words. */
export interface NtpTimestamp {
  readonly seconds: number;
  readonly fraction: number;
}

export const ZERO_TIMESTAMP: NtpTimestamp = Object.freeze({ seconds: 0, fraction: 0 });

/** RFC 7822 extension field: type, and the value including its zero padding (the length is 4 + value). */
export interface ExtensionField {
  readonly type: number;
  readonly value: Uint8Array;
}

export interface NtpPacket {
  readonly leap: number;
  readonly version: number;
  readonly mode: number;
  readonly stratum: number;
  /** log2 seconds, signed. */
  readonly poll: number;
  /** log2 seconds, signed. */
  readonly precision: number;
  /** NTP short format (16.16 seconds), raw u32. */
  readonly rootDelay: number;
  /** NTP short format (16.16 seconds), raw u32. */
  readonly rootDispersion: number;
  /** Reference ID as a raw u32 (an IPv4 address, a hash, or 4 ASCII bytes). */
  readonly referenceId: number;
  readonly referenceTimestamp: NtpTimestamp;
  readonly originTimestamp: NtpTimestamp;
  readonly receiveTimestamp: NtpTimestamp;
  readonly transmitTimestamp: NtpTimestamp;
  readonly extensions: readonly ExtensionField[];
  /** Legacy MAC (key id + digest), or a 4-byte crypto-NAK; absent when the packet has none. */
  readonly mac?: Uint8Array;
}

export type NtpDecodeErrorCode = 'TOO_SHORT' | 'BAD_EXTENSION' | 'BAD_TRAILER';

/** Why a datagram is not an NTP packet; `offset` is the byte where the fault starts. */
export type NtpDecodeError = DecodeError<NtpDecodeErrorCode>;

/** Legacy MAC sizes (RFC 5905 §7.3: key id + MD5 = 20, key id + SHA-1 = 24) and the crypto-NAK (4). */
const MAC_LENGTHS = new Set([4, 20, 24]);

function readTimestamp(view: DataView, offset: number): NtpTimestamp {
  return { seconds: view.getUint32(offset), fraction: view.getUint32(offset + 4) };
}

/**
 * Decode a datagram. Extension fields follow RFC 7822 §7.5: a field is accepted when its length is a
 * multiple of 4, at least 4 (RFC 8915 allows short encrypted fields, so we do not insist on 16) and inside
 * the packet. Anything else is refused with an NtpDecodeError; never reads outside `buf`, never throws.
 */
export function decodeNtpPacket(buf: Uint8Array): Decoded<NtpPacket, NtpDecodeError> {
  if (buf.length < NTP_HEADER_LENGTH) {
    return reject('TOO_SHORT', `NTP packet of ${buf.length} bytes is shorter than 48`, buf.length);
  }
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const b0 = view.getUint8(0);
  const extensions: ExtensionField[] = [];
  let mac: Uint8Array | undefined;
  let at = NTP_HEADER_LENGTH;
  while (at < buf.length) {
    const remaining = buf.length - at;
    // chrony's rule (ntp_core.c parse_packet): 20 or 24 trailing bytes are a legacy MAC (key id + MD5 or
    // SHA-1 digest); 4 zero bytes are a crypto-NAK. Anything else must be a well-formed extension field.
    if (MAC_LENGTHS.has(remaining) && (remaining !== 4 || view.getUint32(at) === 0)) {
      mac = buf.slice(at);
      break;
    }
    if (remaining < 4) {
      return reject('BAD_TRAILER', `${remaining} stray bytes after byte ${at}`, at);
    }
    const type = view.getUint16(at);
    const length = view.getUint16(at + 2);
    if (length < 4 || length % 4 !== 0 || length > remaining) {
      return reject(
        'BAD_EXTENSION',
        `extension field at byte ${at} has length ${length} (${remaining} bytes left)`,
        at,
      );
    }
    extensions.push({ type, value: buf.slice(at + 4, at + length) });
    at += length;
  }
  const packet: NtpPacket = {
    leap: b0 >>> 6,
    version: (b0 >>> 3) & 0x07,
    mode: b0 & 0x07,
    stratum: view.getUint8(1),
    poll: view.getInt8(2),
    precision: view.getInt8(3),
    rootDelay: view.getUint32(4),
    rootDispersion: view.getUint32(8),
    referenceId: view.getUint32(12),
    referenceTimestamp: readTimestamp(view, 16),
    originTimestamp: readTimestamp(view, 24),
    receiveTimestamp: readTimestamp(view, 32),
    transmitTimestamp: readTimestamp(view, 40),
    extensions,
  };
  return decoded(mac === undefined ? packet : { ...packet, mac });
}

/** What follows the 48-byte header: nothing or extension fields only, a legacy MAC, or bytes that do not parse. */
export const TRAILER = { NONE: 0, MAC: 1, MALFORMED: 2 } as const;

/**
 * The trailer check of decodeNtpPacket without decoding (and without allocating): the same rules, applied
 * to `buf[offset, offset + length)`. For the server's hot path, which only needs to know whether a request
 * asks for a legacy MAC or is malformed.
 */
export function scanTrailer(buf: Uint8Array, offset: number, length: number): number {
  const end = offset + length;
  let at = offset + NTP_HEADER_LENGTH;
  while (at < end) {
    const remaining = end - at;
    if (remaining === 20 || remaining === 24) return TRAILER.MAC;
    if (
      remaining === 4 &&
      ((buf[at] ?? 0) | (buf[at + 1] ?? 0) | (buf[at + 2] ?? 0) | (buf[at + 3] ?? 0)) === 0
    )
      return TRAILER.MAC;
    if (remaining < 4) return TRAILER.MALFORMED;
    const fieldLength = ((buf[at + 2] ?? 0) << 8) | (buf[at + 3] ?? 0);
    if (fieldLength < 4 || fieldLength % 4 !== 0 || fieldLength > remaining) return TRAILER.MALFORMED;
    at += fieldLength;
  }
  return TRAILER.NONE;
}

export function encodedLength(packet: NtpPacket): number {
  let n = NTP_HEADER_LENGTH;
  for (const ef of packet.extensions) n += 4 + ef.value.length;
  return n + (packet.mac?.length ?? 0);
}

/** Encode a packet; the inverse of decodeNtpPacket for every packet it accepts. */
export function encodeNtpPacket(packet: NtpPacket): Buffer {
  const buf = Buffer.alloc(encodedLength(packet));
  writeHeader(buf, packet);
  let at = NTP_HEADER_LENGTH;
  for (const ef of packet.extensions) {
    const length = 4 + ef.value.length;
    if (length % 4 !== 0 || length > 0xffff) {
      throw new RangeError(`extension field length ${length} is not a multiple of 4 below 65536`);
    }
    buf.writeUInt16BE(ef.type & 0xffff, at);
    buf.writeUInt16BE(length, at + 2);
    buf.set(ef.value, at + 4);
    at += length;
  }
  if (packet.mac) buf.set(packet.mac, at);
  return buf;
}

/** Write the 48-byte header into `buf` at offset 0. */
export function writeHeader(buf: Buffer, p: NtpPacket): void {
  buf[0] = ((p.leap & 0x03) << 6) | ((p.version & 0x07) << 3) | (p.mode & 0x07);
  buf[1] = p.stratum & 0xff;
  buf.writeInt8(clampInt8(p.poll), 2);
  buf.writeInt8(clampInt8(p.precision), 3);
  buf.writeUInt32BE(p.rootDelay >>> 0, 4);
  buf.writeUInt32BE(p.rootDispersion >>> 0, 8);
  buf.writeUInt32BE(p.referenceId >>> 0, 12);
  writeTimestamp(buf, 16, p.referenceTimestamp);
  writeTimestamp(buf, 24, p.originTimestamp);
  writeTimestamp(buf, 32, p.receiveTimestamp);
  writeTimestamp(buf, 40, p.transmitTimestamp);
}

function clampInt8(v: number): number {
  return Math.max(-128, Math.min(127, Math.trunc(v)));
}

export function writeTimestamp(buf: Buffer, offset: number, ts: NtpTimestamp): void {
  buf.writeUInt32BE(ts.seconds >>> 0, offset);
  buf.writeUInt32BE(ts.fraction >>> 0, offset + 4);
}

export function timestampsEqual(a: NtpTimestamp, b: NtpTimestamp): boolean {
  return a.seconds === b.seconds && a.fraction === b.fraction;
}

export function isZeroTimestamp(ts: NtpTimestamp): boolean {
  return ts.seconds === 0 && ts.fraction === 0;
}

// ---------------------------------------------------------------------------------------------------------
// Time conversions

const TWO32 = 4_294_967_296;

/**
 * Unix time given as whole seconds plus nanoseconds -> NTP timestamp. The era is dropped (RFC 5905 §6:
 * timestamps are modulo 2^32 s), so 2036 and later map into era 1 as the wire format requires.
 */
export function unixToNtp(unixSeconds: number, nanoseconds: number): NtpTimestamp {
  const seconds = (unixSeconds + NTP_UNIX_OFFSET_S) % TWO32;
  // ns * 2^32 / 1e9, rounded down so a reading never points into the future.
  const fraction = Math.min(TWO32 - 1, Math.floor((nanoseconds * TWO32) / 1e9));
  return { seconds: seconds < 0 ? seconds + TWO32 : seconds, fraction };
}

/**
 * NTP timestamp -> Unix milliseconds (fractional). `pivotUnixMs` picks the era: the result is the value
 * nearest to the pivot (RFC 5905 §6), so era 1 (after 2036-02-07) decodes correctly.
 */
export function ntpToUnixMs(ts: NtpTimestamp, pivotUnixMs: number): number {
  const pivotNtpS = pivotUnixMs / 1000 + NTP_UNIX_OFFSET_S;
  const era = Math.floor(pivotNtpS / TWO32);
  let best = Number.NaN;
  for (const e of [era - 1, era, era + 1]) {
    const s = e * TWO32 + ts.seconds + ts.fraction / TWO32;
    if (Number.isNaN(best) || Math.abs(s - pivotNtpS) < Math.abs(best - pivotNtpS)) best = s;
  }
  return (best - NTP_UNIX_OFFSET_S) * 1000;
}

/**
 * a − b in seconds, computed on the wire words so nothing is lost to float precision; the seconds
 * difference is taken modulo 2^32 as a signed value, which is correct across an era boundary (RFC 5905 §6).
 */
export function timestampDiffSeconds(a: NtpTimestamp, b: NtpTimestamp): number {
  const ds = (a.seconds - b.seconds) | 0;
  return ds + (a.fraction - b.fraction) / TWO32;
}

/** Seconds -> NTP short format (16.16), saturating at the field's range. */
export function secondsToShort(seconds: number): number {
  if (!(seconds > 0)) return 0;
  return Math.min(0xffffffff, Math.round(seconds * 65536)) >>> 0;
}

export function shortToSeconds(raw: number): number {
  return (raw >>> 0) / 65536;
}

// ---------------------------------------------------------------------------------------------------------
// Reference IDs (RFC 5905 §7.3 "Reference ID")

/** 4 ASCII characters, left-justified and zero-padded (stratum 0 kiss codes and stratum 1 sources). */
export function asciiRefId(code: string): number {
  if (!/^[\x20-\x7e]{0,4}$/.test(code)) throw new RangeError(`refid "${code}" is not up to 4 ASCII chars`);
  let v = 0;
  for (let i = 0; i < 4; i++) v = (v << 8) | (i < code.length ? code.charCodeAt(i) : 0);
  return v >>> 0;
}

/** Inverse of asciiRefId, trailing NULs removed; non-printable bytes come out as `.`. */
export function refIdToAscii(refId: number): string {
  let s = '';
  for (let i = 3; i >= 0; i--) {
    const c = (refId >>> (i * 8)) & 0xff;
    if (c === 0) break;
    s += c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : '.';
  }
  return s;
}

/** Dotted-quad rendering of a refid (stratum ≥ 2 with an IPv4 system peer). */
export function refIdToIpv4(refId: number): string {
  return [24, 16, 8, 0].map((s) => (refId >>> s) & 0xff).join('.');
}

export const KISS_CODES = [
  'ACST',
  'AUTH',
  'AUTO',
  'BCST',
  'CRYP',
  'DENY',
  'DROP',
  'RSTR',
  'INIT',
  'MCST',
  'NKEY',
  'NTSN',
  'RATE',
  'RMOT',
  'STEP',
] as const;
export type KissCode = (typeof KISS_CODES)[number];

/** A reply is a Kiss-o'-Death when it is a server reply with stratum 0 (RFC 5905 §7.4). */
export function kissCode(packet: NtpPacket): string | undefined {
  if (packet.stratum !== 0 || packet.mode !== MODE.SERVER) return undefined;
  return refIdToAscii(packet.referenceId);
}
