import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { randomInto } from './random-pool.ts';

/**
 * NTS cookies (RFC 8915 §6): the server keeps no per-client state; each cookie carries the client's keys,
 * sealed under a server master key. Layout (100 bytes, a multiple of 4 so it needs no padding):
 *
 *   key id u32 | nonce 12 | AES-256-GCM( aead u16 | 00 00 | S2C 32 | C2S 32 ) 68 | GCM tag 16
 *
 * Master keys rotate daily: key id = the UTC day number, and the key is HKDF-SHA256 of the configured
 * secret with the key id in `info`, so every instance sharing the secret (and a restart) derives the same
 * keys. Cookies sealed under the current key and the `acceptDays` previous keys open; older ones are
 * refused, so a cookie lives at most acceptDays + 1 days. Time is injected. See docs/nts.md "Cookies".
 */

export const COOKIE_LENGTH = 100;
const KEY_ID_LENGTH = 4;
const NONCE_LENGTH = 12;
const TAG_LENGTH = 16;
const PLAINTEXT_LENGTH = 68;
const DAY_MS = 86_400_000;
const HKDF_SALT = Buffer.from('timesvc NTS cookie master key');

export interface CookieKeys {
  readonly aead: number;
  readonly c2s: Buffer;
  readonly s2c: Buffer;
}

export type CookieOpenResult =
  | { ok: true; keys: CookieKeys; keyId: number }
  | { ok: false; reason: 'length' | 'unknown_key' | 'expired_key' | 'auth' };

/**
 * AES-256-GCM with the key schedule kept per key (io/native-cookie.ts, native/nts-cookie.c): the same
 * bytes as node:crypto's aes-256-gcm, without a cipher object per cookie. Optional; node:crypto otherwise.
 */
export interface CookieAead {
  /** A handle holding the key's contexts. */
  key(key: Uint8Array): object;
  /** Encrypt `plain` (68 bytes) into the cookie at out[offset], whose nonce is already written. */
  seal(handle: object, out: Uint8Array, offset: number, plain: Uint8Array): void;
  /** Decrypt and verify a 100-byte cookie into `plain` (68 bytes); false when the tag does not verify. */
  open(handle: object, cookie: Uint8Array, plain: Uint8Array): boolean;
}

export interface CookieJarOptions {
  /** The secret (32+ bytes); absent = a random one per process (cookies then die with the process). */
  secret?: Uint8Array | undefined;
  /** Current time, Unix ms. */
  now: () => number;
  /** Previous daily keys still accepted (default 2: a cookie is valid for at most three days). */
  acceptDays?: number;
  /** Rotation period, ms (default one day; tests shorten it). */
  periodMs?: number;
  /** Kept-key AES-256-GCM (io/native-cookie.ts); node:crypto when absent. */
  aead?: CookieAead | undefined;
}

export class NtsCookieJar {
  readonly #secret: Buffer;
  readonly #now: () => number;
  readonly #acceptDays: number;
  readonly #periodMs: number;
  readonly #keys = new Map<number, Buffer>();
  readonly #plain = Buffer.alloc(PLAINTEXT_LENGTH);
  readonly #aead: CookieAead | undefined;
  /** Key id → the native handle for that key (pruned with #keys). */
  readonly #handles = new Map<number, object>();
  /** True when the secret came from configuration (cookies survive restarts). */
  readonly persistent: boolean;

  constructor(options: CookieJarOptions) {
    if (options.secret !== undefined && options.secret.length < 32) {
      throw new RangeError('the NTS cookie secret must be at least 32 bytes');
    }
    this.persistent = options.secret !== undefined;
    this.#secret = Buffer.from(options.secret ?? randomBytes(32));
    this.#now = options.now;
    this.#acceptDays = options.acceptDays ?? 2;
    this.#periodMs = options.periodMs ?? DAY_MS;
    this.#aead = options.aead;
  }

  /** The key id in use now. */
  currentKeyId(): number {
    return Math.floor(this.#now() / this.#periodMs) >>> 0;
  }

  #key(id: number): Buffer {
    let key = this.#keys.get(id);
    if (!key) {
      const info = Buffer.alloc(4);
      info.writeUInt32BE(id, 0);
      key = Buffer.from(hkdfSync('sha256', this.#secret, HKDF_SALT, info, 32));
      // Keep only keys that can still be used; older ones are dropped as the days pass.
      for (const old of this.#keys.keys()) {
        if (old < id - this.#acceptDays) {
          this.#keys.delete(old);
          this.#handles.delete(old);
        }
      }
      this.#keys.set(id, key);
    }
    return key;
  }

  #handle(aead: CookieAead, id: number): object {
    let h = this.#handles.get(id);
    if (h === undefined) {
      h = aead.key(this.#key(id));
      this.#handles.set(id, h);
    }
    return h;
  }

  /**
   * The master keys that open cookies now (ids current − acceptDays … current, 32 bytes each, in `keys`),
   * for the native responder, and when the current one changes next (ms from now).
   */
  masterKeys(): { current: number; ids: number[]; keys: Buffer; rotatesInMs: number } {
    const current = this.currentKeyId();
    const ids: number[] = [];
    for (let id = Math.max(0, current - this.#acceptDays); id <= current; id++) ids.push(id);
    const keys = Buffer.concat(ids.map((id) => this.#key(id)));
    const now = this.#now();
    return { current, ids, keys, rotatesInMs: (current + 1) * this.#periodMs - now };
  }

  seal(keys: CookieKeys): Buffer {
    const out = Buffer.allocUnsafe(COOKIE_LENGTH);
    this.sealInto(keys, out, 0);
    return out;
  }

  /** Seal a fresh cookie for `keys` into out[offset, offset + COOKIE_LENGTH) (the reply being built). */
  sealInto(keys: CookieKeys, out: Uint8Array, offset: number): void {
    if (keys.c2s.length !== 32 || keys.s2c.length !== 32) {
      throw new RangeError('cookies hold 32-byte keys (AEAD 15)');
    }
    const id = this.currentKeyId();
    out[offset] = id >>> 24;
    out[offset + 1] = id >>> 16;
    out[offset + 2] = id >>> 8;
    out[offset + 3] = id;
    randomInto(out, offset + KEY_ID_LENGTH, NONCE_LENGTH);
    const nonce = out.subarray(offset + KEY_ID_LENGTH, offset + KEY_ID_LENGTH + NONCE_LENGTH);
    // One scratch plaintext for every seal (synchronous; overwritten with zeros after use).
    const plain = this.#plain;
    plain.writeUInt16BE(keys.aead, 0);
    keys.s2c.copy(plain, 4);
    keys.c2s.copy(plain, 36);
    const aead = this.#aead;
    if (aead !== undefined) {
      aead.seal(this.#handle(aead, id), out, offset, plain);
      plain.fill(0);
      return;
    }
    const cipher = createCipheriv('aes-256-gcm', this.#key(id), nonce);
    const ct = cipher.update(plain);
    plain.fill(0);
    cipher.final();
    out.set(ct, offset + KEY_ID_LENGTH + NONCE_LENGTH);
    out.set(cipher.getAuthTag(), offset + COOKIE_LENGTH - TAG_LENGTH);
  }

  open(cookie: Uint8Array): CookieOpenResult {
    if (cookie.length !== COOKIE_LENGTH) return { ok: false, reason: 'length' };
    const buf = Buffer.from(cookie.buffer, cookie.byteOffset, cookie.byteLength);
    const id = buf.readUInt32BE(0);
    const current = this.currentKeyId();
    if (id > current) return { ok: false, reason: 'unknown_key' };
    if (id < current - this.#acceptDays) return { ok: false, reason: 'expired_key' };
    const aead = this.#aead;
    if (aead !== undefined) {
      const keys = Buffer.allocUnsafe(PLAINTEXT_LENGTH);
      if (!aead.open(this.#handle(aead, id), buf, keys)) return { ok: false, reason: 'auth' };
      return {
        ok: true,
        keyId: id,
        keys: { aead: keys.readUInt16BE(0), s2c: keys.subarray(4, 36), c2s: keys.subarray(36, 68) },
      };
    }
    const decipher = createDecipheriv(
      'aes-256-gcm',
      this.#key(id),
      buf.subarray(KEY_ID_LENGTH, KEY_ID_LENGTH + NONCE_LENGTH),
    );
    decipher.setAuthTag(buf.subarray(COOKIE_LENGTH - TAG_LENGTH));
    let plain: Buffer;
    try {
      // GCM: update() decrypts, final() verifies the tag (and returns nothing); plain is used only after it.
      plain = decipher.update(buf.subarray(KEY_ID_LENGTH + NONCE_LENGTH, COOKIE_LENGTH - TAG_LENGTH));
      decipher.final();
    } catch {
      return { ok: false, reason: 'auth' };
    }
    return {
      ok: true,
      keyId: id,
      keys: { aead: plain.readUInt16BE(0), s2c: plain.subarray(4, 36), c2s: plain.subarray(36, 68) },
    };
  }
}

/** TIMESVC_NTS_COOKIE_KEY / nts.cookie_key (hex) → secret bytes, or undefined when unset. */
export function cookieSecretFromHex(hex: string): Buffer | undefined {
  return hex === '' ? undefined : Buffer.from(hex, 'hex');
}
