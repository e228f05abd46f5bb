import { decoded, reject, type Decoded, type DecodeError } from '@broadcast-ops/core/decoded';
import { NTP_HEADER_LENGTH } from './ntp-packet.ts';

/**
 * NTS extension fields in NTP packets (RFC 8915 §5.3–§5.7) on top of the RFC 7822 field layout
 * (type u16 | length u16 incl. header and padding, a multiple of 4 | value). Pure. The authenticator's
 * associated data is a byte range of the packet, so the scanner keeps the offset of every field.
 * See docs/nts.md "NTS in NTP packets".
 */

export const EF = {
  UNIQUE_IDENTIFIER: 0x0104,
  COOKIE: 0x0204,
  COOKIE_PLACEHOLDER: 0x0304,
  AUTHENTICATOR: 0x0404,
} as const;

/** A client's Unique Identifier must hold at least 32 random bytes (RFC 8915 §5.3). */
export const UID_MIN_LENGTH = 32;
/** Minimum nonce for a nonce-unlimited AEAD such as SIV: min(16, N_MAX) = 16 (RFC 8915 §5.6). */
export const NONCE_MIN_LENGTH = 16;
const TAG_LENGTH = 16;

export interface ScannedField {
  readonly type: number;
  /** Offset of the field's header in the packet. */
  readonly offset: number;
  /** Whole field length, header included. */
  readonly length: number;
  readonly value: Uint8Array;
}

export interface Authenticator {
  readonly nonce: Uint8Array;
  readonly ciphertext: Uint8Array;
}

export interface NtsPacketView {
  readonly uid: Uint8Array | undefined;
  readonly cookies: Uint8Array[];
  /** Body lengths of the Cookie Placeholder fields. */
  readonly placeholders: number[];
  readonly authenticator: Authenticator | undefined;
  /** Bytes 0..adEnd are the associated data (everything before the authenticator). */
  readonly adEnd: number;
  /** Fields before the authenticator (authenticated); fields after it are ignored (RFC 8915 §5.6). */
  readonly fields: ScannedField[];
}

/** Why an extension-field layout was refused (RFC 7822 §3: the fields fill the packet, lengths multiples of 4). */
export type FieldScanError = DecodeError<'stray-bytes' | 'field-length'>;

/**
 * Why a packet's NTS fields were refused. `ntsMalformed`: the extension fields are well formed but their NTS
 * content is not (an authenticator whose nonce or ciphertext length runs past its field, a second UID): a
 * malformed NTS request, not a plain one.
 */
export interface NtsScanError extends DecodeError<
  FieldScanError['code'] | 'short' | 'authenticator' | 'two-uids'
> {
  ntsMalformed?: boolean;
}

export type ScanResult = Decoded<NtsPacketView, NtsScanError>;

function pad4(n: number): number {
  return (n + 3) & ~3;
}

/** Split `buf` (from `start`) into extension fields; strict: the fields must fill the packet exactly. */
export function scanFields(
  buf: Uint8Array,
  start = NTP_HEADER_LENGTH,
): Decoded<ScannedField[], FieldScanError> {
  const fields: ScannedField[] = [];
  let at = start;
  while (at < buf.length) {
    if (buf.length - at < 4) return reject('stray-bytes', `${buf.length - at} stray bytes at ${at}`, at);
    const type = ((buf[at] ?? 0) << 8) | (buf[at + 1] ?? 0);
    const length = ((buf[at + 2] ?? 0) << 8) | (buf[at + 3] ?? 0);
    if (length < 4 || length % 4 !== 0 || at + length > buf.length) {
      return reject('field-length', `extension field at ${at} has length ${length}`, at);
    }
    fields.push({ type, offset: at, length, value: buf.subarray(at + 4, at + length) });
    at += length;
  }
  return decoded(fields);
}

/** Decode the body of an Authenticator and Encrypted Extension Fields field (RFC 8915 §5.6). */
export function parseAuthenticator(value: Uint8Array): Decoded<Authenticator> {
  if (value.length < 4) return reject('short', 'authenticator body shorter than its two length fields', 0);
  const nonceLength = ((value[0] ?? 0) << 8) | (value[1] ?? 0);
  const ctLength = ((value[2] ?? 0) << 8) | (value[3] ?? 0);
  if (4 + pad4(nonceLength) + pad4(ctLength) > value.length) {
    return reject('length', 'nonce and ciphertext lengths run past the field', 4);
  }
  return decoded({
    nonce: value.subarray(4, 4 + nonceLength),
    ciphertext: value.subarray(4 + pad4(nonceLength), 4 + pad4(nonceLength) + ctLength),
  });
}

/** A malformed NTS request (well-formed fields, bad NTS content). */
function malformed(
  code: NtsScanError['code'],
  message: string,
  offset: number,
): { ok: false; error: NtsScanError } {
  return { ok: false, error: { code, message, offset, ntsMalformed: true } };
}

/** Read the NTS fields of a packet: UID, cookies, placeholders, authenticator and the AD boundary. */
export function scanNtsPacket(buf: Uint8Array): ScanResult {
  if (buf.length < NTP_HEADER_LENGTH) return reject('short', 'shorter than an NTP header', buf.length);
  const scan = scanFields(buf);
  if (!scan.ok) return scan;
  let uid: Uint8Array | undefined;
  const cookies: Uint8Array[] = [];
  const placeholders: number[] = [];
  let authenticator: Authenticator | undefined;
  let adEnd = buf.length;
  const fields: ScannedField[] = [];
  for (const f of scan.value) {
    if (f.type === EF.AUTHENTICATOR) {
      const parsed = parseAuthenticator(f.value);
      if (!parsed.ok) return malformed('authenticator', 'malformed authenticator', f.offset);
      authenticator = parsed.value;
      adEnd = f.offset;
      break;
    }
    fields.push(f);
    if (f.type === EF.UNIQUE_IDENTIFIER) {
      if (uid !== undefined) return malformed('two-uids', 'two Unique Identifier fields', f.offset);
      uid = f.value;
    } else if (f.type === EF.COOKIE) cookies.push(f.value);
    else if (f.type === EF.COOKIE_PLACEHOLDER) placeholders.push(f.value.length);
  }
  return decoded({ uid, cookies, placeholders, authenticator, adEnd, fields });
}

/** One extension field with zero padding to a multiple of 4. */
export function encodeField(type: number, value: Uint8Array): Buffer {
  const length = 4 + pad4(value.length);
  if (length > 0xffff) throw new RangeError(`extension field of ${length} bytes`);
  const out = Buffer.alloc(length);
  out.writeUInt16BE(type, 0);
  out.writeUInt16BE(length, 2);
  out.set(value, 4);
  return out;
}

/** An Authenticator field holding `nonce` and `ciphertext` (V ‖ C for SIV). */
export function encodeAuthenticator(nonce: Uint8Array, ciphertext: Uint8Array): Buffer {
  const body = Buffer.alloc(4 + pad4(nonce.length) + pad4(ciphertext.length));
  body.writeUInt16BE(nonce.length, 0);
  body.writeUInt16BE(ciphertext.length, 2);
  body.set(nonce, 4);
  body.set(ciphertext, 4 + pad4(nonce.length));
  return encodeField(EF.AUTHENTICATOR, body);
}

/** Wire size of an Authenticator field for a nonce and a plaintext of the given lengths (SIV adds 16). */
export function authenticatorLength(nonceLength: number, plaintextLength: number): number {
  return 4 + 4 + pad4(nonceLength) + pad4(plaintextLength + TAG_LENGTH);
}

/**
 * Seal: associated data = packet[0..adEnd) as one S2V component, then the nonce (RFC 8915 §5.6 with RFC
 * 5297's nonce-as-last-component convention).
 */
export function authenticatorInputs(packet: Uint8Array, adEnd: number, nonce: Uint8Array): Uint8Array[] {
  return [packet.subarray(0, adEnd), nonce];
}

/**
 * The NTS fields of a request as offsets into the packet: what `scanNtsPacket` finds, for the server's hot
 * path, without an object or a view per field. One instance is reused for every request
 * (`newNtsRequestFields`); `scanNtsRequest` fills it.
 */
export interface NtsRequestFields {
  /** Any NTS field (UID, cookie or authenticator) present. */
  nts: boolean;
  /** Set when the scan failed on NTS content in well-formed fields (ScanResult `ntsMalformed`). */
  ntsMalformed: boolean;
  /** Offset of the first UID's value, -1 when absent; its length (padding included, as scanNtsPacket gives). */
  uidOffset: number;
  uidLength: number;
  /** Cookie fields before the authenticator; the first one's value offset and length. */
  cookies: number;
  cookieOffset: number;
  cookieLength: number;
  /** Body lengths of the Cookie Placeholder fields (the first `placeholders` entries). */
  placeholders: number;
  readonly placeholderLengths: Int32Array;
  /** Authenticator present; adEnd = its field offset (else the packet length). */
  authenticator: boolean;
  adEnd: number;
  nonceOffset: number;
  nonceLength: number;
  ciphertextOffset: number;
  ciphertextLength: number;
}

/** Most placeholder lengths recorded; an NTP packet of the server's largest slot (2 KB) holds at most 511. */
const MAX_PLACEHOLDERS = 512;

export function newNtsRequestFields(): NtsRequestFields {
  return {
    nts: false,
    ntsMalformed: false,
    uidOffset: -1,
    uidLength: 0,
    cookies: 0,
    cookieOffset: -1,
    cookieLength: 0,
    placeholders: 0,
    placeholderLengths: new Int32Array(MAX_PLACEHOLDERS),
    authenticator: false,
    adEnd: 0,
    nonceOffset: 0,
    nonceLength: 0,
    ciphertextOffset: 0,
    ciphertextLength: 0,
  };
}

/**
 * Fill `f` from `buf` with the rules of `scanNtsPacket` (strict RFC 7822 layout over the whole packet;
 * fields up to the first authenticator count; a malformed authenticator or a second UID fails). Returns
 * false where scanNtsPacket returns { ok: false }. Allocates nothing.
 */
export function scanNtsRequest(buf: Uint8Array, f: NtsRequestFields): boolean {
  const end = buf.length;
  f.ntsMalformed = false;
  if (end < NTP_HEADER_LENGTH) return false;
  // Strict layout first, over every field (also those after the authenticator), as scanFields does.
  for (let at = NTP_HEADER_LENGTH; at < end;) {
    if (end - at < 4) return false;
    const length = ((buf[at + 2] ?? 0) << 8) | (buf[at + 3] ?? 0);
    if (length < 4 || length % 4 !== 0 || at + length > end) return false;
    at += length;
  }
  f.nts = false;
  f.uidOffset = -1;
  f.uidLength = 0;
  f.cookies = 0;
  f.cookieOffset = -1;
  f.cookieLength = 0;
  f.placeholders = 0;
  f.authenticator = false;
  f.adEnd = end;
  for (let at = NTP_HEADER_LENGTH; at < end;) {
    const type = ((buf[at] ?? 0) << 8) | (buf[at + 1] ?? 0);
    const length = ((buf[at + 2] ?? 0) << 8) | (buf[at + 3] ?? 0);
    const value = at + 4;
    const valueLength = length - 4;
    if (type === EF.AUTHENTICATOR) {
      const nonceLength = valueLength < 4 ? 0 : ((buf[value] ?? 0) << 8) | (buf[value + 1] ?? 0);
      const ctLength = valueLength < 4 ? 0 : ((buf[value + 2] ?? 0) << 8) | (buf[value + 3] ?? 0);
      if (valueLength < 4 || 4 + pad4(nonceLength) + pad4(ctLength) > valueLength) {
        f.ntsMalformed = true;
        return false;
      }
      f.authenticator = true;
      f.nts = true;
      f.adEnd = at;
      f.nonceOffset = value + 4;
      f.nonceLength = nonceLength;
      f.ciphertextOffset = value + 4 + pad4(nonceLength);
      f.ciphertextLength = ctLength;
      return true;
    }
    if (type === EF.UNIQUE_IDENTIFIER) {
      if (f.uidOffset >= 0) {
        f.ntsMalformed = true;
        return false;
      }
      f.uidOffset = value;
      f.uidLength = valueLength;
      f.nts = true;
    } else if (type === EF.COOKIE) {
      if (f.cookies === 0) {
        f.cookieOffset = value;
        f.cookieLength = valueLength;
      }
      f.cookies++;
      f.nts = true;
    } else if (type === EF.COOKIE_PLACEHOLDER && f.placeholders < MAX_PLACEHOLDERS) {
      f.placeholderLengths[f.placeholders++] = valueLength;
    }
    at += length;
  }
  return true;
}

/** Write an extension field header (type, length) at `at`; the caller writes the value. */
export function writeFieldHeader(out: Uint8Array, at: number, type: number, length: number): void {
  out[at] = type >>> 8;
  out[at + 1] = type & 0xff;
  out[at + 2] = length >>> 8;
  out[at + 3] = length & 0xff;
}

/** Padded field length for a value of `valueLength` bytes (RFC 7822: a multiple of 4). */
export function fieldLength(valueLength: number): number {
  return 4 + pad4(valueLength);
}
