/**
 * S101 framing (Lawo "Ember+ Documentation", section "S101 Framing"): frames are delimited by BOF 0xFE and
 * EOF 0xFF; bytes >= 0xF8 inside a frame are escaped as 0xFD followed by the byte XOR 0x20. The unescaped
 * frame is: slot 0x00, message type 0x0E (Ember), command (0x00 EmBER, 0x01 keep-alive request, 0x02
 * keep-alive response), version 0x01, then for EmBER: flags, DTD 0x01 (Glow), the count of application
 * bytes and those bytes (Glow DTD minor, major), the payload, and a CRC-16/CCITT (reflected polynomial
 * 0x8408, initial 0xFFFF, complemented, little endian) over everything from slot on.
 *
 * The decoder is bounded: a frame (escaped) may not exceed `S101_MAX_FRAME_BYTES`, a multi-packet message
 * may not exceed `S101_MAX_MESSAGE_BYTES`, and every byte is looked at a constant number of times.
 * Anything it cannot accept is an `S101Error` (the provider disconnects that consumer).
 */

export const S101_BOF = 0xfe;
export const S101_EOF = 0xff;
const S101_CE = 0xfd;
const S101_XOR = 0x20;
const S101_INV = 0xf8;
const CMD_EMBER = 0x00;
const CMD_KEEPALIVE_REQ = 0x01;
const CMD_KEEPALIVE_RESP = 0x02;
const FLAG_FIRST = 0x80;
const FLAG_LAST = 0x40;
const FLAG_EMPTY = 0x20;
/** Payload bytes per outgoing packet before a message is split into a multi-packet message. */
const OUT_PACKET_BYTES = 1024;

/** One escaped frame, BOF to EOF. Consumers send requests of a few hundred bytes. */
export const S101_MAX_FRAME_BYTES = 64 * 1024;
/** One reassembled multi-packet EmBER message. */
export const S101_MAX_MESSAGE_BYTES = 256 * 1024;

export class S101Error extends Error {
  override readonly name = 'S101Error';
}

const CRC_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x8408 : c >>> 1;
    t[n] = c;
  }
  return t;
})();

export function crc16(buf: Uint8Array, start = 0, end = buf.length): number {
  let crc = 0xffff;
  for (let i = start; i < end; i++) crc = (crc >>> 8) ^ (CRC_TABLE[(crc ^ (buf[i] ?? 0)) & 0xff] ?? 0);
  return crc & 0xffff;
}

export type S101Message =
  | { kind: 'keepalive-request' }
  | { kind: 'keepalive-response' }
  /** A complete EmBER payload (a multi-packet message reassembled). */
  | { kind: 'ember'; payload: Buffer };

/** Incremental decoder for one consumer's byte stream. */
export class S101Decoder {
  /** Unescaped bytes of the frame being read; undefined between frames. */
  #frame: number[] | undefined;
  #escaped = false;
  #frameBytes = 0;
  #multi: Buffer[] | undefined;
  #multiBytes = 0;

  /** Feed bytes; returns the messages completed by them. Throws `S101Error` on anything invalid. */
  push(chunk: Uint8Array): S101Message[] {
    const out: S101Message[] = [];
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i] ?? 0;
      if (b === S101_BOF) {
        if (this.#frame) throw new S101Error('BOF inside a frame');
        this.#frame = [];
        this.#escaped = false;
        this.#frameBytes = 0;
        continue;
      }
      if (!this.#frame) throw new S101Error(`byte 0x${b.toString(16)} outside a frame`);
      if (++this.#frameBytes > S101_MAX_FRAME_BYTES)
        throw new S101Error(`frame over ${S101_MAX_FRAME_BYTES} bytes`);
      if (b === S101_EOF) {
        if (this.#escaped) throw new S101Error('escape before EOF');
        const frame = Buffer.from(this.#frame);
        this.#frame = undefined;
        const message = this.#frameDone(frame);
        if (message) out.push(message);
        continue;
      }
      if (this.#escaped) {
        this.#frame.push(b ^ S101_XOR);
        this.#escaped = false;
      } else if (b === S101_CE) {
        this.#escaped = true;
      } else if (b >= S101_INV) {
        throw new S101Error(`unescaped byte 0x${b.toString(16)} inside a frame`);
      } else {
        this.#frame.push(b);
      }
    }
    return out;
  }

  #frameDone(f: Buffer): S101Message | undefined {
    if (f.length < 6) throw new S101Error(`frame of ${f.length} bytes is too short`);
    if (crc16(f) !== 0xf0b8) throw new S101Error('CRC mismatch');
    const body = f.subarray(0, f.length - 2);
    if (body[0] !== 0x00) throw new S101Error(`slot ${body[0]} is not 0`);
    if (body[1] !== 0x0e) throw new S101Error(`message type 0x${(body[1] ?? 0).toString(16)} is not Ember`);
    const command = body[2];
    if (body[3] !== 0x01) throw new S101Error(`S101 version ${body[3]} is not 1`);
    if (command === CMD_KEEPALIVE_REQ) return { kind: 'keepalive-request' };
    if (command === CMD_KEEPALIVE_RESP) return { kind: 'keepalive-response' };
    if (command !== CMD_EMBER) throw new S101Error(`unknown S101 command ${command}`);
    if (body.length < 7) throw new S101Error('EmBER frame without its header');
    const flags = body[4] ?? 0;
    if (body[5] !== 0x01) throw new S101Error(`DTD ${body[5]} is not Glow`);
    const appBytes = body[6] ?? 0;
    const start = 7 + appBytes;
    if (start > body.length) throw new S101Error('application bytes run past the frame');
    const payload = body.subarray(start);
    if (flags & FLAG_EMPTY) return undefined;
    const first = (flags & FLAG_FIRST) !== 0;
    const last = (flags & FLAG_LAST) !== 0;
    if (first && last) {
      if (this.#multi) throw new S101Error('single packet inside a multi-packet message');
      return { kind: 'ember', payload: Buffer.from(payload) };
    }
    if (first) {
      if (this.#multi) throw new S101Error('a new multi-packet message before the last one ended');
      this.#multi = [];
      this.#multiBytes = 0;
    } else if (!this.#multi) {
      throw new S101Error('continuation packet without a first packet');
    }
    this.#multiBytes += payload.length;
    if (this.#multiBytes > S101_MAX_MESSAGE_BYTES)
      throw new S101Error(`multi-packet message over ${S101_MAX_MESSAGE_BYTES} bytes`);
    this.#multi.push(Buffer.from(payload));
    if (!last) return undefined;
    const whole = Buffer.concat(this.#multi);
    this.#multi = undefined;
    return { kind: 'ember', payload: whole };
  }
}

function finish(body: number[]): Buffer {
  const crc = ~crc16(Uint8Array.from(body)) & 0xffff;
  const all = [...body, crc & 0xff, crc >>> 8];
  const out: number[] = [S101_BOF];
  for (const b of all) {
    if (b >= S101_INV) out.push(S101_CE, b ^ S101_XOR);
    else out.push(b);
  }
  out.push(S101_EOF);
  return Buffer.from(out);
}

/** S101 frames carrying one EmBER payload (split into a multi-packet message when long). */
export function encodeEmberFrames(payload: Uint8Array): Buffer {
  const frames: Buffer[] = [];
  const count = Math.max(1, Math.ceil(payload.length / OUT_PACKET_BYTES));
  for (let k = 0; k < count; k++) {
    let flags = 0;
    if (k === 0) flags |= FLAG_FIRST;
    if (k === count - 1) flags |= FLAG_LAST;
    const part = payload.subarray(k * OUT_PACKET_BYTES, (k + 1) * OUT_PACKET_BYTES);
    // slot, Ember, EmBER command, version, flags, Glow DTD, 2 app bytes: DTD minor 0x1F, major 0x02.
    frames.push(finish([0x00, 0x0e, CMD_EMBER, 0x01, flags, 0x01, 0x02, 0x1f, 0x02, ...part]));
  }
  return Buffer.concat(frames);
}

export function encodeKeepalive(kind: 'request' | 'response'): Buffer {
  return finish([0x00, 0x0e, kind === 'request' ? CMD_KEEPALIVE_REQ : CMD_KEEPALIVE_RESP, 0x01]);
}
