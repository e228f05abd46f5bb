import { randomBytes } from 'node:crypto';
import { AesSiv } from '../protocol/aes-siv.ts';
import {
  EF,
  authenticatorInputs,
  encodeAuthenticator,
  encodeField,
  scanFields,
  scanNtsPacket,
} from '../protocol/nts-ef.ts';
import { MODE, NTP_HEADER_LENGTH, asciiRefId } from '../protocol/ntp-packet.ts';
import { COOKIES_PER_RESPONSE } from '../protocol/nts-ke.ts';

/**
 * The client half of NTS in NTP packets (RFC 8915 §5.7): a cookie jar filled by NTS-KE and by each
 * authentic reply, requests carrying UID + one cookie + placeholders (to refill the jar to eight) +
 * an authenticator sealed with C2S, and reply checks (UID matches the request in flight, authenticator
 * opens with S2C, fresh cookies from the ciphertext only). A reply with another UID (a replay, a stale or
 * forged packet) is rejected. Pure apart from randomness.
 */

export interface NtsClientKeys {
  readonly aead: number;
  readonly c2s: Uint8Array;
  readonly s2c: Uint8Array;
}

export type NtsReplyCheck =
  /** Authentic: the 48-byte header to hand to the NTP peer logic; cookies were added to the jar. */
  | { kind: 'authentic'; header: Buffer; newCookies: number }
  /** NTSN kiss with our UID: the server refused our cookie; re-run NTS-KE. */
  | { kind: 'nak' }
  | { kind: 'invalid'; reason: string };

const NTSN = asciiRefId('NTSN');
/** Cookies kept at most (more than NTS-KE hands out would only come from a misbehaving server). */
const JAR_MAX = COOKIES_PER_RESPONSE;

export class NtsClientSession {
  readonly #c2s: AesSiv;
  readonly #s2c: AesSiv;
  readonly #cookies: Uint8Array[];
  /** UID of the request in flight; a reply must echo it. */
  #pendingUid: Buffer | undefined;

  constructor(keys: NtsClientKeys, cookies: readonly Uint8Array[]) {
    this.#c2s = new AesSiv(keys.c2s);
    this.#s2c = new AesSiv(keys.s2c);
    this.#cookies = cookies.slice(0, JAR_MAX);
  }

  get cookieCount(): number {
    return this.#cookies.length;
  }

  /**
   * Wrap a 48-byte request header: UID, one cookie, placeholders for the cookies missing from a full
   * jar, and the authenticator. Undefined when the jar is empty (re-run NTS-KE).
   */
  wrap(header: Uint8Array): Buffer | undefined {
    const cookie = this.#cookies.shift();
    if (cookie === undefined) return undefined;
    const uid = randomBytes(32);
    this.#pendingUid = uid;
    const fields = [
      Buffer.from(header.subarray(0, NTP_HEADER_LENGTH)),
      encodeField(EF.UNIQUE_IDENTIFIER, uid),
      encodeField(EF.COOKIE, cookie),
    ];
    const missing = JAR_MAX - 1 - this.#cookies.length;
    for (let i = 0; i < missing; i++)
      fields.push(encodeField(EF.COOKIE_PLACEHOLDER, new Uint8Array(cookie.length)));
    const ad = Buffer.concat(fields);
    const nonce = randomBytes(16);
    const sealed = this.#c2s.seal(authenticatorInputs(ad, ad.length, nonce), new Uint8Array(0));
    return Buffer.concat([ad, encodeAuthenticator(nonce, sealed)]);
  }

  /** Check a reply to the request last wrapped. */
  unwrap(packet: Uint8Array): NtsReplyCheck {
    const scan = scanNtsPacket(packet);
    if (!scan.ok) return { kind: 'invalid', reason: scan.error.message };
    const v = scan.value;
    const expected = this.#pendingUid;
    if (expected === undefined || v.uid === undefined || !expected.equals(v.uid)) {
      return { kind: 'invalid', reason: 'unique identifier does not match the request in flight' };
    }
    const header = Buffer.from(packet.subarray(0, NTP_HEADER_LENGTH));
    const isKiss = (header[1] ?? 1) === 0 && ((header[0] ?? 0) & 0x07) === MODE.SERVER;
    if (isKiss && header.readUInt32BE(12) === NTSN) {
      this.#pendingUid = undefined;
      return { kind: 'nak' };
    }
    const auth = v.authenticator;
    if (!auth) return { kind: 'invalid', reason: 'no authenticator' };
    const plain = this.#s2c.open(authenticatorInputs(packet, v.adEnd, auth.nonce), auth.ciphertext);
    if (plain === undefined) return { kind: 'invalid', reason: 'authenticator does not verify' };
    const inner = scanFields(plain, 0);
    if (!inner.ok) return { kind: 'invalid', reason: `encrypted fields: ${inner.error.message}` };
    this.#pendingUid = undefined; // one reply per request: a duplicate is rejected
    let added = 0;
    for (const f of inner.value) {
      if (f.type === EF.COOKIE && this.#cookies.length < JAR_MAX) {
        this.#cookies.push(Buffer.from(f.value));
        added++;
      }
    }
    return { kind: 'authentic', header, newCookies: added };
  }
}
