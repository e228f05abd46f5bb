import { createCipheriv, timingSafeEqual, type Cipher } from 'node:crypto';

/**
 * AES-CMAC (RFC 4493) and AES-SIV (RFC 5297) on Node's AES block cipher. Node's crypto has no SIV mode, so
 * both are built from one ECB cipher object per key, kept for the key's lifetime: ECB without padding is
 * stateless between `update()` calls, so it serves as a raw block function and per-call cipher setup (the
 * dominant cost on this path) is avoided. The CTR half of SIV generates its key stream with the same
 * block function. See docs/nts.md "AES-SIV-CMAC".
 */

const BLOCK = 16;
const ZERO_BLOCK = new Uint8Array(BLOCK);
/** Largest plaintext or associated-data component accepted, bytes (an NTP packet is far smaller). */
export const SIV_MAX_INPUT = 65_536;

/** The doubling in GF(2^128) of RFC 5297 §2.3 (and RFC 4493's subkey generation). */
export function dbl(block: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(BLOCK);
  let carry = 0;
  for (let i = BLOCK - 1; i >= 0; i--) {
    const b = block[i] ?? 0;
    out[i] = ((b << 1) | carry) & 0xff;
    carry = b >>> 7;
  }
  if ((block[0] ?? 0) & 0x80) out[BLOCK - 1] = (out[BLOCK - 1] ?? 0) ^ 0x87;
  return out;
}

function xorInto(target: Buffer, source: Uint8Array, targetOffset = 0): void {
  for (let i = 0; i < source.length; i++) {
    target[targetOffset + i] = (target[targetOffset + i] ?? 0) ^ (source[i] ?? 0);
  }
}

/** The raw AES block function for one key: AES in ECB mode, no padding, reused across calls. */
class BlockCipher {
  readonly #cipher: Cipher;
  constructor(key: Uint8Array) {
    if (key.length !== 16 && key.length !== 24 && key.length !== 32) {
      throw new RangeError(`AES key of ${key.length} bytes (16, 24 or 32 expected)`);
    }
    this.#cipher = createCipheriv(`aes-${key.length * 8}-ecb`, key, null);
    this.#cipher.setAutoPadding(false);
  }
  /** Encrypt whole blocks (length a multiple of 16). */
  encrypt(blocks: Uint8Array): Buffer {
    return this.#cipher.update(blocks);
  }
}

/**
 * AES-CMAC (RFC 4493) with the subkeys K1, K2 derived once per key. The CBC-MAC runs as one `update()` call
 * per message on a persistent AES-CBC cipher object: CBC chains each block to the previous ciphertext, so
 * XORing the first block of a message with the last ciphertext block of the previous one (`#chain`) gives
 * exactly a zero-IV CBC over the new message. One native call per MAC instead of one per block.
 */
export class AesCmac {
  readonly #cbc: Cipher;
  #chain: Buffer = Buffer.alloc(BLOCK);
  readonly #k1: Buffer;
  readonly #k2: Buffer;

  constructor(key: Uint8Array) {
    if (key.length !== 16 && key.length !== 24 && key.length !== 32) {
      throw new RangeError(`AES key of ${key.length} bytes (16, 24 or 32 expected)`);
    }
    this.#cbc = createCipheriv(`aes-${key.length * 8}-cbc`, key, Buffer.alloc(BLOCK));
    this.#cbc.setAutoPadding(false);
    const l = this.#cbcLast(Buffer.alloc(BLOCK)); // RFC 4493 §2.3: L = AES-128(K, 0^128)
    this.#k1 = dbl(l);
    this.#k2 = dbl(this.#k1);
  }

  /** Zero-IV CBC over `blocks` (a fresh buffer, whole blocks; modified): the last ciphertext block. */
  #cbcLast(blocks: Buffer): Buffer {
    xorInto(blocks, this.#chain);
    const out = this.#cbc.update(blocks);
    this.#chain = out.subarray(out.length - BLOCK);
    return Buffer.from(this.#chain);
  }

  /** The 16-byte CMAC of `message` (RFC 4493 §2.4). */
  mac(message: Uint8Array): Buffer {
    const n = Math.max(1, Math.ceil(message.length / BLOCK));
    const complete = message.length > 0 && message.length % BLOCK === 0;
    const blocks = Buffer.alloc(n * BLOCK);
    blocks.set(message);
    const lastAt = (n - 1) * BLOCK;
    if (complete) xorInto(blocks, this.#k1, lastAt);
    else {
      blocks[message.length] = 0x80; // padding 10^i
      xorInto(blocks, this.#k2, lastAt);
    }
    return this.#cbcLast(blocks);
  }
}

/**
 * AES-SIV (RFC 5297 §2.6, §2.7) for a double-length key: the first half keys CMAC (S2V), the second half
 * keys CTR. A 32-byte key is AEAD_AES_SIV_CMAC_256 (IANA AEAD 15), 48 bytes _384 (16), 64 bytes _512 (17).
 * `seal` returns V ‖ C (the 16-byte synthetic IV first); `open` returns the plaintext, or undefined when
 * the tag does not verify (compared in constant time).
 */
export class AesSiv {
  readonly #cmac: AesCmac;
  readonly #ctr: BlockCipher;
  /** S2V's starting value CMAC(0^128), computed once. */
  readonly #d0: Buffer;

  constructor(key: Uint8Array) {
    if (key.length !== 32 && key.length !== 48 && key.length !== 64) {
      throw new RangeError(`AES-SIV key of ${key.length} bytes (32, 48 or 64 expected)`);
    }
    const half = key.length / 2;
    this.#cmac = new AesCmac(key.subarray(0, half));
    this.#ctr = new BlockCipher(key.subarray(half));
    this.#d0 = this.#cmac.mac(ZERO_BLOCK);
  }

  /** S2V (RFC 5297 §2.4) over the associated-data components and the plaintext. */
  s2v(associated: readonly Uint8Array[], plaintext: Uint8Array): Buffer {
    if (associated.length > 126) throw new RangeError('S2V takes at most 126 associated-data components');
    let d = this.#d0;
    for (const a of associated) {
      d = dbl(d);
      xorInto(d, this.#cmac.mac(a));
    }
    let t: Buffer;
    if (plaintext.length >= BLOCK) {
      t = Buffer.from(plaintext);
      xorInto(t, d, t.length - BLOCK); // xorend
    } else {
      t = dbl(d);
      const padded = Buffer.alloc(BLOCK);
      padded.set(plaintext);
      padded[plaintext.length] = 0x80;
      xorInto(t, padded);
    }
    return this.#cmac.mac(t);
  }

  /** CTR with the synthetic IV, bits 31 and 63 cleared (RFC 5297 §2.5, §2.6). */
  #ctrXor(v: Uint8Array, input: Uint8Array): Buffer {
    const blocks = Math.ceil(input.length / BLOCK);
    const counters = Buffer.allocUnsafe(blocks * BLOCK);
    const iv = Buffer.from(v);
    iv[8] = (iv[8] ?? 0) & 0x7f;
    iv[12] = (iv[12] ?? 0) & 0x7f;
    // With bit 31 clear the low 32-bit word cannot wrap for inputs below 2^35 bytes; SIV_MAX_INPUT bounds it.
    const low = iv.readUInt32BE(12);
    for (let i = 0; i < blocks; i++) {
      iv.copy(counters, i * BLOCK, 0, 12);
      counters.writeUInt32BE((low + i) >>> 0, i * BLOCK + 12);
    }
    const stream = blocks > 0 ? this.#ctr.encrypt(counters) : Buffer.alloc(0);
    const out = Buffer.allocUnsafe(input.length);
    for (let i = 0; i < input.length; i++) out[i] = (input[i] ?? 0) ^ (stream[i] ?? 0);
    return out;
  }

  seal(associated: readonly Uint8Array[], plaintext: Uint8Array): Buffer {
    checkSizes(associated, plaintext);
    const v = this.s2v(associated, plaintext);
    return Buffer.concat([v, this.#ctrXor(v, plaintext)]);
  }

  open(associated: readonly Uint8Array[], sealed: Uint8Array): Buffer | undefined {
    if (sealed.length < BLOCK) return undefined;
    checkSizes(associated, sealed);
    const v = sealed.subarray(0, BLOCK);
    const plaintext = this.#ctrXor(v, sealed.subarray(BLOCK));
    const expected = this.s2v(associated, plaintext);
    return timingSafeEqual(expected, v) ? plaintext : undefined;
  }
}

function checkSizes(associated: readonly Uint8Array[], data: Uint8Array): void {
  if (data.length > SIV_MAX_INPUT || associated.some((a) => a.length > SIV_MAX_INPUT)) {
    throw new RangeError(`AES-SIV input above ${SIV_MAX_INPUT} bytes`);
  }
}
