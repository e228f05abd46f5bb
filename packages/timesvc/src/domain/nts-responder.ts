import { AesSiv } from '../protocol/aes-siv.ts';
import {
  EF,
  NONCE_MIN_LENGTH,
  UID_MIN_LENGTH,
  authenticatorInputs,
  authenticatorLength,
  encodeAuthenticator,
  encodeField,
  scanNtsPacket,
} from '../protocol/nts-ef.ts';
import { LEAP, MODE, NTP_HEADER_LENGTH, asciiRefId } from '../protocol/ntp-packet.ts';
import { AEAD_AES_SIV_CMAC_256 } from '../protocol/nts-ke.ts';
import type { NtsCookieJar } from './nts-cookies.ts';
import { randomBuffer } from './random-pool.ts';

/**
 * The NTS part of answering an NTP request (RFC 8915 §5.7). The plain responder builds the 48-byte reply
 * as usual; for a request carrying NTS fields this module (1) opens the cookie, (2) verifies the
 * authenticator with C2S, then seals the reply: the UID echoed (authenticated, not encrypted), then one
 * authenticator sealed with S2C and a fresh 16-byte nonce whose plaintext holds 1 + (valid placeholders)
 * new cookies, never making the reply longer than the request. A bad cookie or authenticator gets an NTSN
 * Kiss-o'-Death carrying only the UID. Nothing per client is needed to answer; a bounded cache of cipher
 * objects keyed by C2S avoids rebuilding AES key schedules per request and counts active clients.
 */

export type NtsFailure = 'malformed' | 'no_uid' | 'bad_cookie' | 'bad_aead' | 'bad_auth' | 'short_nonce';

export type NtsCheck =
  /** Not an NTS request: answer it as plain NTP. */
  | { kind: 'plain' }
  /** Authentic: seal the reply with `seal` once the header (with transmit timestamp) is final. */
  | { kind: 'authentic'; seal: (header: Buffer) => Buffer }
  /** Cookie or authenticator failed: send this NTSN kiss. */
  | { kind: 'nak'; reason: NtsFailure; packet: Buffer }
  /** Not answerable (no UID to echo, or malformed NTS fields): drop. */
  | { kind: 'drop'; reason: NtsFailure };

export interface NtsResponderCounters {
  authenticated: number;
  naks: number;
  dropped: number;
  failures: Record<NtsFailure, number>;
  /** Dropped (not answerable with an NTSN kiss), by reason. */
  droppedBy: Record<NtsFailure, number>;
}

interface Session {
  c2s: AesSiv;
  s2c: AesSiv;
  s2cKey: Buffer;
  c2sKey: Buffer;
  lastSeenMs: number;
}

const NTSN = asciiRefId('NTSN');

export interface NtsResponderOptions {
  cookies: NtsCookieJar;
  /** Monotonic ms, for the active-client window. */
  now: () => number;
  /** Window of the active-sessions gauge (default 10 min). */
  activeWindowMs?: number;
  /** Largest number of cached client key pairs (default 10,000); the oldest are evicted. */
  maxSessions?: number;
}

export class NtsResponder {
  readonly counters: NtsResponderCounters = {
    authenticated: 0,
    naks: 0,
    dropped: 0,
    failures: { malformed: 0, no_uid: 0, bad_cookie: 0, bad_aead: 0, bad_auth: 0, short_nonce: 0 },
    droppedBy: { malformed: 0, no_uid: 0, bad_cookie: 0, bad_aead: 0, bad_auth: 0, short_nonce: 0 },
  };
  readonly #o: NtsResponderOptions;
  /** C2S hex → cipher objects; insertion order = recency (re-inserted on use). */
  readonly #sessions = new Map<string, Session>();

  constructor(options: NtsResponderOptions) {
    this.#o = options;
  }

  /**
   * Clients that presented a valid cookie and authenticator within the window: distinct C2S keys, i.e.
   * NTS-KE sessions, not addresses. Cleans out expired entries as it counts.
   */
  activeSessions(): number {
    const cutoff = this.#o.now() - (this.#o.activeWindowMs ?? 600_000);
    let active = 0;
    for (const [k, s] of this.#sessions) {
      if (s.lastSeenMs < cutoff) this.#sessions.delete(k);
      else active++;
    }
    return active;
  }

  #session(c2sKey: Buffer, s2cKey: Buffer): Session {
    const id = c2sKey.toString('hex');
    let s = this.#sessions.get(id);
    if (s && s.s2cKey.equals(s2cKey)) this.#sessions.delete(id);
    // A new entry counts as active only once a request authenticates (lastSeenMs set by the caller).
    else s = { c2s: new AesSiv(c2sKey), s2c: new AesSiv(s2cKey), c2sKey, s2cKey, lastSeenMs: -Infinity };
    this.#sessions.set(id, s);
    const max = this.#o.maxSessions ?? 10_000;
    while (this.#sessions.size > max) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    return s;
  }

  #fail(reason: NtsFailure, msg: Uint8Array, uid: Uint8Array | undefined): NtsCheck {
    this.counters.failures[reason]++;
    if (uid === undefined || reason === 'malformed' || reason === 'short_nonce') {
      this.counters.dropped++;
      this.counters.droppedBy[reason]++;
      return { kind: 'drop', reason };
    }
    this.counters.naks++;
    return { kind: 'nak', reason, packet: ntsnKiss(msg, uid) };
  }

  /** Inspect a client request (mode and version already checked by the plain responder). */
  check(msg: Uint8Array): NtsCheck {
    if (msg.length <= NTP_HEADER_LENGTH) return { kind: 'plain' };
    const scan = scanNtsPacket(msg);
    if (!scan.ok) {
      // Not parseable as extension fields: the plain responder's own checks decide.
      return { kind: 'plain' };
    }
    const v = scan.view;
    const isNts = v.uid !== undefined || v.cookies.length > 0 || v.authenticator !== undefined;
    if (!isNts) return { kind: 'plain' };
    if (v.uid === undefined || v.uid.length < UID_MIN_LENGTH) return this.#fail('no_uid', msg, undefined);
    if (v.cookies.length !== 1 || v.authenticator === undefined) return this.#fail('malformed', msg, v.uid);
    const auth = v.authenticator;
    if (auth.nonce.length < NONCE_MIN_LENGTH) return this.#fail('short_nonce', msg, v.uid);
    const cookie = v.cookies[0] ?? new Uint8Array(0);
    const opened = this.#o.cookies.open(cookie);
    if (!opened.ok) return this.#fail('bad_cookie', msg, v.uid);
    if (opened.keys.aead !== AEAD_AES_SIV_CMAC_256) return this.#fail('bad_aead', msg, v.uid);
    const session = this.#session(opened.keys.c2s, opened.keys.s2c);
    const plaintext = session.c2s.open(authenticatorInputs(msg, v.adEnd, auth.nonce), auth.ciphertext);
    if (plaintext === undefined) {
      return this.#fail('bad_auth', msg, v.uid);
    }
    session.lastSeenMs = this.#o.now();
    // Encrypted fields from the client (none defined for requests) are accepted and ignored.
    const placeholdersOk = v.placeholders.filter((n) => n === cookie.length).length;
    const uidField = encodeField(EF.UNIQUE_IDENTIFIER, v.uid);
    const keys = opened.keys;
    const cookieFieldLength = 4 + cookie.length;
    let count = 1 + placeholdersOk;
    // Non-amplification (RFC 8915 §5.7): the reply never exceeds the request.
    while (
      count > 1 &&
      NTP_HEADER_LENGTH + uidField.length + authenticatorLength(16, count * cookieFieldLength) > msg.length
    ) {
      count--;
    }
    const jar = this.#o.cookies;
    const s2c = session.s2c;
    this.counters.authenticated++;
    return {
      kind: 'authentic',
      seal: (header) => {
        const fresh: Buffer[] = [];
        for (let i = 0; i < count; i++) fresh.push(encodeField(EF.COOKIE, jar.seal(keys)));
        const plain = Buffer.concat(fresh);
        const nonce = randomBuffer(16);
        const ad = Buffer.concat([header.subarray(0, NTP_HEADER_LENGTH), uidField]);
        const sealed = s2c.seal(authenticatorInputs(ad, ad.length, nonce), plain);
        return Buffer.concat([ad, encodeAuthenticator(nonce, sealed)]);
      },
    };
  }
}

/** The NTSN kiss (RFC 8915 §5.7): LI 3, stratum 0, refid NTSN, origin = client transmit, the UID echoed. */
export function ntsnKiss(msg: Uint8Array, uid: Uint8Array): Buffer {
  const header = Buffer.alloc(NTP_HEADER_LENGTH);
  const version = ((msg[0] ?? 0) >>> 3) & 0x07;
  header[0] = (LEAP.UNSYNCHRONISED << 6) | (version << 3) | MODE.SERVER;
  header[2] = msg[2] ?? 0;
  header.writeUInt32BE(NTSN, 12);
  header.set(msg.subarray(40, 48), 24);
  return Buffer.concat([header, encodeField(EF.UNIQUE_IDENTIFIER, uid)]);
}
