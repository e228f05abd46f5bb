import { AesSiv } from '../protocol/aes-siv.ts';
import {
  EF,
  NONCE_MIN_LENGTH,
  UID_MIN_LENGTH,
  authenticatorLength,
  encodeField,
  fieldLength,
  newNtsRequestFields,
  scanNtsRequest,
  writeFieldHeader,
} from '../protocol/nts-ef.ts';
import { LEAP, MODE, NTP_HEADER_LENGTH, asciiRefId } from '../protocol/ntp-packet.ts';
import { AEAD_AES_SIV_CMAC_256 } from '../protocol/nts-ke.ts';
import type { CookieKeys, NtsCookieJar } from './nts-cookies.ts';
import { randomInto } from './random-pool.ts';

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
  /**
   * Authentic: seal the reply once the header (with transmit timestamp) is final: `seal` returns it as a
   * new buffer; `sealInto` builds it in place after the 48-byte header at out[offset] (room for
   * `length` bytes from offset) and returns its length.
   */
  | AuthenticReply
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

/**
 * AEAD_AES_SIV_CMAC_256 as the NTS authenticator uses it (RFC 8915 §5.6): S2V over [the packet before the
 * authenticator, the nonce]. `seal` returns V ‖ C; `open` the plaintext, or undefined when V does not verify.
 */
export interface NtsSiv {
  seal(ad: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array): Uint8Array;
  /** seal, written to out[at, at + 16 + plaintext.length); returns that length. */
  sealInto(ad: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, out: Uint8Array, at: number): number;
  open(ad: Uint8Array, nonce: Uint8Array, sealed: Uint8Array): Uint8Array | undefined;
}

/** The hand-written AES-SIV (protocol/aes-siv.ts) as an NtsSiv; the default. */
export function jsNtsSiv(key: Uint8Array): NtsSiv {
  const siv = new AesSiv(key);
  return {
    seal: (ad, nonce, plaintext) => siv.seal([ad, nonce], plaintext),
    sealInto: (ad, nonce, plaintext, out, at) => {
      const sealed = siv.seal([ad, nonce], plaintext);
      out.set(sealed, at);
      return sealed.length;
    },
    open: (ad, nonce, sealed) => siv.open([ad, nonce], sealed),
  };
}

interface Session {
  c2s: NtsSiv;
  s2c: NtsSiv;
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
  /**
   * AES-SIV per client key: OpenSSL's through the addon where it is built (io/native-cookie.ts), else the
   * hand-written one (jsNtsSiv, the default). Both give the same bytes.
   */
  siv?: ((key: Uint8Array) => NtsSiv) | undefined;
}

/**
 * NTS requests answered elsewhere (the native responder's thread, docs/performance.md "Native
 * responder"), added to this responder's counts.
 */
export interface NtsElsewhere {
  /** Requests found authentic there. */
  authenticated(): number;
  /** Distinct client sessions seen authentic there at or after monotonic `cutoffMs`. */
  activeSessions(cutoffMs: number): number;
}

export class NtsResponder {
  readonly #counters: NtsResponderCounters = {
    authenticated: 0,
    naks: 0,
    dropped: 0,
    failures: { malformed: 0, no_uid: 0, bad_cookie: 0, bad_aead: 0, bad_auth: 0, short_nonce: 0 },
    droppedBy: { malformed: 0, no_uid: 0, bad_cookie: 0, bad_aead: 0, bad_auth: 0, short_nonce: 0 },
  };
  readonly #o: NtsResponderOptions;
  /** C2S (latin1 text of the key) → cipher objects; insertion order = recency (re-inserted on use). */
  readonly #sessions = new Map<string, Session>();
  /** Reused for every request (check and seal run synchronously, one request at a time). */
  readonly #fields = newNtsRequestFields();
  /** The reply's plaintext (fresh cookies) is built here; zeroed after each seal. */
  readonly #scratch = Buffer.alloc(4096);

  #elsewhere: NtsElsewhere[] = [];

  constructor(options: NtsResponderOptions) {
    this.#o = options;
  }

  /** The cookie jar (the native responder is handed its master keys). */
  get cookies(): NtsCookieJar {
    return this.#o.cookies;
  }

  /** Count requests answered by `source` as this responder's own (returns a detach function). */
  addElsewhere(source: NtsElsewhere): () => void {
    this.#elsewhere.push(source);
    return () => {
      this.#elsewhere = this.#elsewhere.filter((s) => s !== source);
    };
  }

  /** What this responder and the native thread counted (read at scrape time). */
  get counters(): NtsResponderCounters {
    if (this.#elsewhere.length === 0) return this.#counters;
    let authenticated = this.#counters.authenticated;
    for (const s of this.#elsewhere) authenticated += s.authenticated();
    return { ...this.#counters, authenticated };
  }

  /**
   * Clients that presented a valid cookie and authenticator within the window: distinct C2S keys, i.e.
   * NTS-KE sessions, not addresses. Cleans out expired entries as it counts.
   */
  activeSessions(): number {
    const cutoff = this.#o.now() - (this.#o.activeWindowMs ?? 600_000);
    // A session answered both here and on the native thread (only while that lacked a new day's key) is
    // counted by each.
    let active = 0;
    for (const s of this.#elsewhere) active += s.activeSessions(cutoff);
    for (const [k, s] of this.#sessions) {
      if (s.lastSeenMs < cutoff) this.#sessions.delete(k);
      else active++;
    }
    return active;
  }

  #session(c2sKey: Buffer, s2cKey: Buffer): Session {
    const id = c2sKey.toString('latin1');
    let s = this.#sessions.get(id);
    if (s && s.s2cKey.equals(s2cKey)) this.#sessions.delete(id);
    // A new entry counts as active only once a request authenticates (lastSeenMs set by the caller).
    else {
      const siv = this.#o.siv ?? jsNtsSiv;
      s = { c2s: siv(c2sKey), s2c: siv(s2cKey), c2sKey, s2cKey, lastSeenMs: -Infinity };
    }
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
    this.#counters.failures[reason]++;
    if (uid === undefined || reason === 'malformed' || reason === 'short_nonce') {
      this.#counters.dropped++;
      this.#counters.droppedBy[reason]++;
      return { kind: 'drop', reason };
    }
    this.#counters.naks++;
    return { kind: 'nak', reason, packet: ntsnKiss(msg, uid) };
  }

  /** Inspect a client request (mode and version already checked by the plain responder). */
  check(msg: Uint8Array): NtsCheck {
    if (msg.length <= NTP_HEADER_LENGTH) return { kind: 'plain' };
    const f = this.#fields;
    // Well-formed extension fields with malformed NTS content (an authenticator whose lengths run past its
    // field, a second UID) are a malformed NTS request: dropped like the others (RFC 8915 §5.7 gives an
    // unauthenticatable request no reply). Not parseable as extension fields at all (e.g. a legacy MAC):
    // the plain responder's own checks decide.
    if (!scanNtsRequest(msg, f))
      return f.ntsMalformed ? this.#fail('malformed', msg, undefined) : { kind: 'plain' };
    if (!f.nts) return { kind: 'plain' };
    const uid = f.uidOffset >= 0 ? msg.subarray(f.uidOffset, f.uidOffset + f.uidLength) : undefined;
    if (uid === undefined || uid.length < UID_MIN_LENGTH) return this.#fail('no_uid', msg, undefined);
    if (f.cookies !== 1 || !f.authenticator) return this.#fail('malformed', msg, uid);
    if (f.nonceLength < NONCE_MIN_LENGTH) return this.#fail('short_nonce', msg, uid);
    const cookie = msg.subarray(f.cookieOffset, f.cookieOffset + f.cookieLength);
    const opened = this.#o.cookies.open(cookie);
    if (!opened.ok) return this.#fail('bad_cookie', msg, uid);
    if (opened.keys.aead !== AEAD_AES_SIV_CMAC_256) return this.#fail('bad_aead', msg, uid);
    const session = this.#session(opened.keys.c2s, opened.keys.s2c);
    const nonce = msg.subarray(f.nonceOffset, f.nonceOffset + f.nonceLength);
    const plaintext = session.c2s.open(
      msg.subarray(0, f.adEnd),
      nonce,
      msg.subarray(f.ciphertextOffset, f.ciphertextOffset + f.ciphertextLength),
    );
    if (plaintext === undefined) {
      return this.#fail('bad_auth', msg, uid);
    }
    session.lastSeenMs = this.#o.now();
    // Encrypted fields from the client (none defined for requests) are accepted and ignored.
    let placeholdersOk = 0;
    for (let i = 0; i < f.placeholders; i++) if (f.placeholderLengths[i] === cookie.length) placeholdersOk++;
    const uidFieldLength = fieldLength(uid.length);
    const cookieFieldLength = fieldLength(cookie.length);
    let count = 1 + placeholdersOk;
    // Non-amplification (RFC 8915 §5.7): the reply never exceeds the request.
    while (
      count > 1 &&
      NTP_HEADER_LENGTH + uidFieldLength + authenticatorLength(16, count * cookieFieldLength) > msg.length
    ) {
      count--;
    }
    const length = NTP_HEADER_LENGTH + uidFieldLength + authenticatorLength(16, count * cookieFieldLength);
    this.#counters.authenticated++;
    return new AuthenticReply(
      length,
      uid,
      count,
      cookie.length,
      opened.keys,
      session.s2c,
      this.#o.cookies,
      this.#scratch,
    );
  }
}

/**
 * An authentic request's reply, sealed once its header (with the transmit timestamp) is final. A class,
 * not closures, so that answering a request creates one object and no functions.
 */
export class AuthenticReply {
  readonly kind = 'authentic' as const;
  /** Length of the sealed reply, bytes (never more than the request's: RFC 8915 §5.7). */
  readonly length: number;
  readonly #uid: Uint8Array;
  readonly #count: number;
  readonly #cookieLength: number;
  readonly #keys: CookieKeys;
  readonly #s2c: NtsSiv;
  readonly #jar: NtsCookieJar;
  readonly #scratch: Buffer;

  constructor(
    length: number,
    uid: Uint8Array,
    count: number,
    cookieLength: number,
    keys: CookieKeys,
    s2c: NtsSiv,
    jar: NtsCookieJar,
    scratch: Buffer,
  ) {
    this.length = length;
    this.#uid = uid;
    this.#count = count;
    this.#cookieLength = cookieLength;
    this.#keys = keys;
    this.#s2c = s2c;
    this.#jar = jar;
    this.#scratch = scratch;
  }

  /** Build the reply in place after the 48-byte header at out[offset]; returns its length. */
  sealInto(out: Uint8Array, offset: number): number {
    const uid = this.#uid;
    const uidFieldLength = fieldLength(uid.length);
    const cookieFieldLength = fieldLength(this.#cookieLength);
    // UID echoed (authenticated, not encrypted), zero-padded.
    let at = offset + NTP_HEADER_LENGTH;
    writeFieldHeader(out, at, EF.UNIQUE_IDENTIFIER, uidFieldLength);
    out.set(uid, at + 4);
    out.fill(0, at + 4 + uid.length, at + uidFieldLength);
    at += uidFieldLength;
    const adEnd = at;
    // Plaintext: `count` fresh cookies, each in a Cookie field, built in the scratch buffer.
    const plainLength = this.#count * cookieFieldLength;
    const plain = plainLength <= this.#scratch.length ? this.#scratch : Buffer.alloc(plainLength);
    for (let i = 0, p = 0; i < this.#count; i++, p += cookieFieldLength) {
      writeFieldHeader(plain, p, EF.COOKIE, cookieFieldLength);
      this.#jar.sealInto(this.#keys, plain, p + 4);
      plain.fill(0, p + 4 + this.#cookieLength, p + cookieFieldLength);
    }
    // Authenticator: nonce length, ciphertext length, nonce, V ‖ C (RFC 8915 §5.6).
    const nonceAt = at + 8;
    randomInto(out, nonceAt, 16);
    const sealedLength = this.#s2c.sealInto(
      out.subarray(offset, adEnd),
      out.subarray(nonceAt, nonceAt + 16),
      plain.subarray(0, plainLength),
      out,
      nonceAt + 16,
    );
    plain.fill(0, 0, plainLength);
    const authLength = authenticatorLength(16, plainLength);
    writeFieldHeader(out, at, EF.AUTHENTICATOR, authLength);
    writeFieldHeader(out, at + 4, 16, sealedLength); // nonce length, ciphertext length
    const end = at + authLength;
    out.fill(0, nonceAt + 16 + sealedLength, end);
    return end - offset;
  }

  /** The sealed reply as a new buffer, the header copied from `header`. */
  seal(header: Buffer): Buffer {
    const out = Buffer.allocUnsafe(this.length);
    header.copy(out, 0, 0, NTP_HEADER_LENGTH);
    this.sealInto(out, 0);
    return out;
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
