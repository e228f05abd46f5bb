/**
 * TSL UMD protocol v5.0 over UDP (TSL Products, "TSL UMD Protocol", section V5.0).
 *
 * Packet: PBC(u16) VER(u8) FLAGS(u8) SCREEN(u16) then one or more DMSG = INDEX(u16) CONTROL(u16)
 * LENGTH(u16) TEXT(LENGTH bytes). Every 16-bit field is little-endian. PBC counts the bytes that
 * follow it (total length − 2). VER is the minor version: 0 for v5.00. FLAGS bit 0 set means the text
 * is UTF-16LE, clear means ASCII. CONTROL bits 0–1 right-hand tally, 2–3 text tally, 4–5 left-hand tally
 * (0 off, 1 red, 2 green, 3 amber), bits 6–7 brightness (0–3), bit 15 clear for display data.
 * The DLE/STX wrapper of the document is for byte streams (TCP) only and is never used over UDP.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export const TSL_MAX_PACKET = 2048;
export const TSL_HEADER_BYTES = 6;
export const TSL_DMSG_HEADER_BYTES = 6;
export const TSL_BROADCAST_INDEX = 0xffff;

export type TallyColour = 'off' | 'red' | 'green' | 'amber';
const COLOUR_BITS: Record<TallyColour, number> = { off: 0, red: 1, green: 2, amber: 3 };

export interface TallyDisplay {
  /** Right-hand, text and left-hand tally. */
  rh: TallyColour;
  text: TallyColour;
  lh: TallyColour;
  /** 0–3. */
  brightness: number;
}

export interface TslMessage {
  index: number;
  display: TallyDisplay;
  text: string;
}

export function controlWord(d: TallyDisplay): number {
  const b = Math.max(0, Math.min(3, Math.trunc(d.brightness)));
  return COLOUR_BITS[d.rh] | (COLOUR_BITS[d.text] << 2) | (COLOUR_BITS[d.lh] << 4) | (b << 6);
}

/**
 * The monitor's tally mapping of device states (spec: play red brightness 3, rec amber brightness 3,
 * stop off, offline off and dimmed). The colour goes on the right-hand and text tallies; the left-hand
 * tally stays off. "Dimmed" is brightness 1.
 */
export function tallyForState(state: 'play' | 'rec' | 'stop' | 'offline'): TallyDisplay {
  return { ...STATE_DISPLAY[state] };
}

/** The colour on the right-hand and text tallies, the left-hand tally off. */
function display(colour: TallyColour, brightness = 3): TallyDisplay {
  return { rh: colour, text: colour, lh: 'off', brightness };
}

const STATE_DISPLAY = {
  play: display('red'),
  rec: display('amber'),
  stop: display('off'),
  offline: display('off', 1),
} as const;

/**
 * A mixer input's tally (docs/TALLY.md, "Outputs"): program red, preview green (both on the right-hand and
 * text tallies, brightness 3, as a device's play), off dark, unknown off and dimmed (brightness 1, as an
 * offline device). The left-hand tally stays off.
 */
export function tallyForInput(tally: 'program' | 'preview' | 'off' | 'unknown'): TallyDisplay {
  return { ...INPUT_DISPLAY[tally] };
}

const INPUT_DISPLAY = {
  program: display('red'),
  preview: display('green'),
  off: display('off'),
  unknown: display('off', 1),
} as const;

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** Text bytes and whether they are UTF-16LE (FLAGS bit 0). */
function textBytes(text: string, utf16: boolean): Buffer {
  return utf16 ? Buffer.from(text, 'utf16le') : Buffer.from(text, 'latin1');
}

export function needsUtf16(messages: readonly TslMessage[]): boolean {
  return messages.some((m) => !PRINTABLE_ASCII.test(m.text));
}

/**
 * Encode one packet. FLAGS is per packet, so a packet is UTF-16LE when any of its texts is not
 * printable ASCII. Throws when the packet would exceed 2048 bytes (use `encodeTslPackets` to split).
 */
export function encodeTslPacket(screen: number, messages: readonly TslMessage[]): Buffer {
  const utf16 = needsUtf16(messages);
  const texts = messages.map((m) => textBytes(m.text, utf16));
  const total = TSL_HEADER_BYTES + texts.reduce((n, t) => n + TSL_DMSG_HEADER_BYTES + t.length, 0);
  if (total > TSL_MAX_PACKET) throw new RangeError(`TSL packet of ${total} bytes exceeds ${TSL_MAX_PACKET}`);
  const buf = Buffer.alloc(total);
  buf.writeUInt16LE(total - 2, 0);
  buf.writeUInt8(0, 2);
  buf.writeUInt8(utf16 ? 0x01 : 0x00, 3);
  buf.writeUInt16LE(screen & 0xffff, 4);
  let off = TSL_HEADER_BYTES;
  messages.forEach((m, i) => {
    const t = texts[i] ?? Buffer.alloc(0);
    buf.writeUInt16LE(m.index & 0xffff, off);
    buf.writeUInt16LE(controlWord(m.display) & 0x7fff, off + 2);
    buf.writeUInt16LE(t.length, off + 4);
    t.copy(buf, off + 6);
    off += TSL_DMSG_HEADER_BYTES + t.length;
  });
  return buf;
}

/** Texts longer than this are cut (a UMD shows a few dozen characters; this keeps 12 devices in one packet). */
export const TSL_MAX_TEXT_CHARS = 64;

/** Encode any number of messages into as few packets of at most 2048 bytes as needed. */
export function encodeTslPackets(screen: number, messages: readonly TslMessage[]): Buffer[] {
  const packets: Buffer[] = [];
  let batch: TslMessage[] = [];
  let size = TSL_HEADER_BYTES;
  for (const raw of messages) {
    const m = { ...raw, text: Array.from(raw.text).slice(0, TSL_MAX_TEXT_CHARS).join('') };
    const cost = TSL_DMSG_HEADER_BYTES + m.text.length * 2; // worst case UTF-16
    if (batch.length > 0 && size + cost > TSL_MAX_PACKET) {
      packets.push(encodeTslPacket(screen, batch));
      batch = [];
      size = TSL_HEADER_BYTES;
    }
    batch.push(m);
    size += cost;
  }
  if (batch.length > 0) packets.push(encodeTslPacket(screen, batch));
  return packets;
}

export interface DecodedTslPacket {
  version: number;
  flags: number;
  screen: number;
  messages: { index: number; control: number; text: string }[];
}

export type TslErrorCode = 'short' | 'too-long' | 'bad-pbc' | 'scontrol' | 'truncated-dmsg' | 'dmsg-overrun';

/**
 * Decode a v5.0 UDP packet (used by the tests and the bench as a receiver). Anything that does not follow
 * the layout is refused with the offset of the fault; never throws.
 */
export function decodeTslPacket(buf: Uint8Array): Decoded<DecodedTslPacket, DecodeError<TslErrorCode>> {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < TSL_HEADER_BYTES) return reject('short', 'shorter than the header', b.length);
  if (b.length > TSL_MAX_PACKET) return reject('too-long', 'longer than 2048 bytes', TSL_MAX_PACKET);
  const pbc = b.readUInt16LE(0);
  if (pbc !== b.length - 2) return reject('bad-pbc', `PBC ${pbc} but ${b.length - 2} bytes follow`, 0);
  const flags = b.readUInt8(3);
  const out: DecodedTslPacket = { version: b.readUInt8(2), flags, screen: b.readUInt16LE(4), messages: [] };
  if (flags & 0x02) return reject('scontrol', 'SCONTROL packets are not decoded', 3);
  let off = TSL_HEADER_BYTES;
  while (off < b.length) {
    if (off + TSL_DMSG_HEADER_BYTES > b.length) return reject('truncated-dmsg', 'truncated DMSG header', off);
    const len = b.readUInt16LE(off + 4);
    if (off + TSL_DMSG_HEADER_BYTES + len > b.length) {
      return reject('dmsg-overrun', 'DMSG text runs past the packet', off);
    }
    const raw = b.subarray(off + 6, off + 6 + len);
    out.messages.push({
      index: b.readUInt16LE(off),
      control: b.readUInt16LE(off + 2),
      text: raw.toString(flags & 0x01 ? 'utf16le' : 'latin1'),
    });
    off += TSL_DMSG_HEADER_BYTES + len;
  }
  return decoded(out);
}
