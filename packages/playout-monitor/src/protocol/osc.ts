/**
 * OSC 1.0 codec (pure): datagram bytes in, typed packets or typed errors out, and back.
 * Wire format per the OSC 1.0 specification (opensoundcontrol.org, "OSC 1.0 spec"): OSC-strings are
 * NUL-terminated and padded to a multiple of 4; arguments are big-endian; a bundle is "#bundle\0", an
 * 8-byte timetag and int32-size-prefixed elements that may themselves be bundles.
 *
 * CasparCG sends int64 (`h`) for int32 values on 2.0.x/2.1 and uint32/int64 on every version, booleans as
 * `T`/`F` and doubles as `f` (protocol/osc/client.cpp at each tag), so all of those are first-class here.
 * Errors are caught per bundle element: one bad element does not lose the rest of the datagram.
 */
import { decoded, reject, rejected, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export type OscArg =
  | { type: 'i'; value: number }
  | { type: 'f'; value: number }
  | { type: 'd'; value: number }
  | { type: 'h'; value: bigint }
  | { type: 't'; value: bigint }
  | { type: 's'; value: string }
  | { type: 'S'; value: string }
  | { type: 'b'; value: Uint8Array }
  | { type: 'T' }
  | { type: 'F' }
  | { type: 'N' }
  | { type: 'I' };

export interface OscMessage {
  kind: 'message';
  address: string;
  args: OscArg[];
}

export interface OscBundle {
  kind: 'bundle';
  /** NTP-format timetag; 1n means "immediately" (OSC 1.0). CasparCG 2.2+ uses a counter here. */
  timetag: bigint;
  elements: OscPacket[];
}

export type OscPacket = OscMessage | OscBundle;

export type OscErrorCode =
  | 'empty'
  | 'too-large'
  | 'not-aligned'
  | 'bad-string'
  | 'bad-address'
  | 'bad-type-tags'
  | 'unknown-type-tag'
  | 'truncated'
  | 'bad-bundle-element'
  | 'too-deep';

export class OscDecodeError extends Error {
  readonly code: OscErrorCode;
  constructor(code: OscErrorCode, message: string) {
    super(message);
    this.name = 'OscDecodeError';
    this.code = code;
  }
}

/** A datagram that decoded: its packet, and the bundle elements skipped on the way, each with why. */
export interface OscDatagram {
  packet: OscPacket;
  skipped: DecodeError<OscErrorCode>[];
}

/** The datagram, or why it is unusable as a whole. */
export type OscDecodeResult = Decoded<OscDatagram, DecodeError<OscErrorCode>>;

function plain(e: OscDecodeError): DecodeError<OscErrorCode> {
  return { code: e.code, message: e.message };
}

/** Largest UDP payload over IPv4; anything bigger cannot be one datagram. */
export const OSC_MAX_DATAGRAM = 65_507;
/** Nested bundles deeper than this are refused (bounded recursion on hostile input). */
export const OSC_MAX_BUNDLE_DEPTH = 8;
const BUNDLE_TAG = '#bundle';
const TIMETAG_IMMEDIATE = 1n;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function readString(buf: Uint8Array, offset: number): { value: string; next: number } {
  let end = offset;
  while (end < buf.length && buf[end] !== 0) end++;
  if (end >= buf.length) throw new OscDecodeError('bad-string', `unterminated string at ${offset}`);
  const next = (end + 4) & ~3;
  if (next > buf.length) throw new OscDecodeError('truncated', `string padding past the end at ${offset}`);
  let value: string;
  try {
    value = utf8.decode(buf.subarray(offset, end));
  } catch {
    throw new OscDecodeError('bad-string', `string at ${offset} is not UTF-8`);
  }
  return { value, next };
}

function need(buf: Uint8Array, offset: number, n: number, what: string): void {
  if (offset + n > buf.length) throw new OscDecodeError('truncated', `${what} at ${offset} needs ${n} bytes`);
}

function decodeMessage(buf: Uint8Array, view: DataView): OscMessage {
  const addr = readString(buf, 0);
  if (!addr.value.startsWith('/')) throw new OscDecodeError('bad-address', 'address must start with "/"');
  // OSC 1.0 says a message without type tags is legal for old senders; treat it as no arguments.
  if (addr.next >= buf.length) return { kind: 'message', address: addr.value, args: [] };
  const tags = readString(buf, addr.next);
  if (!tags.value.startsWith(',')) throw new OscDecodeError('bad-type-tags', 'type tags must start with ","');
  let offset = tags.next;
  const args: OscArg[] = [];
  for (const tag of tags.value.slice(1)) {
    switch (tag) {
      case 'i':
        need(buf, offset, 4, 'int32');
        args.push({ type: 'i', value: view.getInt32(offset) });
        offset += 4;
        break;
      case 'f':
        need(buf, offset, 4, 'float32');
        args.push({ type: 'f', value: view.getFloat32(offset) });
        offset += 4;
        break;
      case 'd':
        need(buf, offset, 8, 'float64');
        args.push({ type: 'd', value: view.getFloat64(offset) });
        offset += 8;
        break;
      case 'h':
        need(buf, offset, 8, 'int64');
        args.push({ type: 'h', value: view.getBigInt64(offset) });
        offset += 8;
        break;
      case 't':
        need(buf, offset, 8, 'timetag');
        args.push({ type: 't', value: view.getBigUint64(offset) });
        offset += 8;
        break;
      case 's':
      case 'S': {
        const s = readString(buf, offset);
        args.push({ type: tag, value: s.value });
        offset = s.next;
        break;
      }
      case 'b': {
        need(buf, offset, 4, 'blob size');
        const size = view.getInt32(offset);
        if (size < 0) throw new OscDecodeError('truncated', `negative blob size at ${offset}`);
        const padded = (size + 3) & ~3;
        need(buf, offset + 4, padded, 'blob');
        args.push({ type: 'b', value: buf.slice(offset + 4, offset + 4 + size) });
        offset += 4 + padded;
        break;
      }
      case 'T':
      case 'F':
      case 'N':
      case 'I':
        args.push({ type: tag });
        break;
      default:
        throw new OscDecodeError('unknown-type-tag', `unknown type tag "${tag}" in ${addr.value}`);
    }
  }
  return { kind: 'message', address: addr.value, args };
}

function isBundle(buf: Uint8Array): boolean {
  // "#bundle\0"
  return (
    buf.length >= 8 &&
    buf[0] === 0x23 &&
    buf[1] === 0x62 &&
    buf[2] === 0x75 &&
    buf[3] === 0x6e &&
    buf[4] === 0x64 &&
    buf[5] === 0x6c &&
    buf[6] === 0x65 &&
    buf[7] === 0
  );
}

function decodePacket(buf: Uint8Array, depth: number, errors: OscDecodeError[]): OscPacket {
  if (buf.length === 0) throw new OscDecodeError('empty', 'empty packet');
  if (buf.length % 4 !== 0)
    throw new OscDecodeError('not-aligned', `packet size ${buf.length} is not a multiple of 4`);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (!isBundle(buf)) return decodeMessage(buf, view);
  if (depth >= OSC_MAX_BUNDLE_DEPTH) throw new OscDecodeError('too-deep', 'bundles nested too deep');
  need(buf, 8, 8, 'bundle timetag');
  const timetag = view.getBigUint64(8);
  const elements: OscPacket[] = [];
  let offset = 16;
  while (offset < buf.length) {
    need(buf, offset, 4, 'bundle element size');
    const size = view.getInt32(offset);
    if (size < 0 || offset + 4 + size > buf.length) {
      // The size is the only framing there is: past a bad size nothing further can be trusted.
      errors.push(
        new OscDecodeError('bad-bundle-element', `element size ${size} at ${offset} overruns the bundle`),
      );
      break;
    }
    try {
      elements.push(decodePacket(buf.subarray(offset + 4, offset + 4 + size), depth + 1, errors));
    } catch (err) {
      errors.push(
        err instanceof OscDecodeError ? err : new OscDecodeError('bad-bundle-element', String(err)),
      );
    }
    offset += 4 + size;
  }
  return { kind: 'bundle', timetag, elements };
}

/** Decode one datagram. Never throws: a bad datagram is refused, bad bundle elements are listed as skipped. */
export function decodeOsc(datagram: Uint8Array): OscDecodeResult {
  const errors: OscDecodeError[] = [];
  if (datagram.length > OSC_MAX_DATAGRAM) {
    return reject('too-large', `datagram of ${datagram.length} bytes`);
  }
  try {
    const packet = decodePacket(datagram, 0, errors);
    return decoded({ packet, skipped: errors.map(plain) });
  } catch (err) {
    return rejected(
      plain(err instanceof OscDecodeError ? err : new OscDecodeError('truncated', String(err))),
    );
  }
}

/** All messages of a packet, depth first, in wire order. */
export function oscMessages(packet: OscPacket | undefined, out: OscMessage[] = []): OscMessage[] {
  if (!packet) return out;
  if (packet.kind === 'message') out.push(packet);
  else for (const e of packet.elements) oscMessages(e, out);
  return out;
}

// ---- encoding (simulators and round-trip tests) ----

const utf8Encoder = new TextEncoder();

function padded(len: number): number {
  return (len + 4) & ~3;
}

function encodeString(s: string): Uint8Array {
  const bytes = utf8Encoder.encode(s);
  const out = new Uint8Array(padded(bytes.length));
  out.set(bytes);
  return out;
}

function encodeArg(arg: OscArg): Uint8Array {
  switch (arg.type) {
    case 'i': {
      const b = new Uint8Array(4);
      new DataView(b.buffer).setInt32(0, arg.value);
      return b;
    }
    case 'f': {
      const b = new Uint8Array(4);
      new DataView(b.buffer).setFloat32(0, arg.value);
      return b;
    }
    case 'd': {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setFloat64(0, arg.value);
      return b;
    }
    case 'h': {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigInt64(0, arg.value);
      return b;
    }
    case 't': {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, arg.value);
      return b;
    }
    case 's':
    case 'S':
      return encodeString(arg.value);
    case 'b': {
      const b = new Uint8Array(4 + ((arg.value.length + 3) & ~3));
      new DataView(b.buffer).setInt32(0, arg.value.length);
      b.set(arg.value, 4);
      return b;
    }
    case 'T':
    case 'F':
    case 'N':
    case 'I':
      return new Uint8Array(0);
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  let len = 0;
  for (const p of parts) len += p.length;
  const out = new Uint8Array(len);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function encodeOscMessage(message: Omit<OscMessage, 'kind'>): Uint8Array {
  return concat([
    encodeString(message.address),
    encodeString(',' + message.args.map((a) => a.type).join('')),
    ...message.args.map(encodeArg),
  ]);
}

export function encodeOsc(packet: OscPacket): Uint8Array {
  if (packet.kind === 'message') return encodeOscMessage(packet);
  const head = new Uint8Array(16);
  head.set(utf8Encoder.encode(BUNDLE_TAG));
  new DataView(head.buffer).setBigUint64(8, packet.timetag);
  const parts: Uint8Array[] = [head];
  for (const e of packet.elements) {
    const body = encodeOsc(e);
    const size = new Uint8Array(4);
    new DataView(size.buffer).setInt32(0, body.length);
    parts.push(size, body);
  }
  return concat(parts);
}

export function oscBundle(elements: OscPacket[], timetag: bigint = TIMETAG_IMMEDIATE): OscBundle {
  return { kind: 'bundle', timetag, elements };
}

export function oscMessage(address: string, args: OscArg[] = []): OscMessage {
  return { kind: 'message', address, args };
}

/** Numeric value of a numeric argument (int64 beyond 2^53 loses precision, fine for frame counts). */
export function oscNumber(arg: OscArg | undefined): number | undefined {
  if (!arg) return undefined;
  switch (arg.type) {
    case 'i':
    case 'f':
    case 'd':
      return arg.value;
    case 'h':
      return Number(arg.value);
    default:
      return undefined;
  }
}

export function oscBool(arg: OscArg | undefined): boolean | undefined {
  if (!arg) return undefined;
  if (arg.type === 'T') return true;
  if (arg.type === 'F') return false;
  // Tolerate senders that encode booleans as numbers.
  const n = oscNumber(arg);
  return n === undefined ? undefined : n !== 0;
}

export function oscString(arg: OscArg | undefined): string | undefined {
  if (!arg) return undefined;
  return arg.type === 's' || arg.type === 'S' ? arg.value : undefined;
}
