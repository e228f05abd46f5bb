import { createHmac, timingSafeEqual, type KeyObject, createSecretKey } from 'node:crypto';

/**
 * Punch access tokens (spec "Authentication"; format and sources in docs/protocol.md "Tokens"):
 *
 *   token = "p_" + base64url(JSON claims) + "." + base64url_nopad(HMAC-SHA256(secret, <claims segment as ASCII>))
 *
 * Stateless: verification recomputes the HMAC and compares in constant time. Changing the secret therefore
 * invalidates every token. Pure: no clock (the caller passes `nowMs`), no logging.
 */
export type TokenRole = 'admin' | 'peer';

export interface TokenClaims {
  session: string;
  role: TokenRole;
  /** Stream slot restriction; null means all streams (a missing claim is read as null, as in the original's sample). */
  stream: string | null;
  /** Expiry, Unix seconds; equals the session's expiry. */
  exp: number;
  /** Session incarnation id (extra claim): binds the token to one session, not just to its name. */
  sid?: string;
  /** Optional operator label for peer tokens (an extra claim; unknown claims are ignored by readers). */
  label?: string;
  /** Invite id of a peer token (extra claim, README "Invites"): the broker can revoke it. */
  inv?: string;
}

export const TOKEN_PREFIX = 'p_';
/** Upper bound on an accepted token's length: a bounded input before any decoding or HMAC work. */
export const MAX_TOKEN_LENGTH = 2048;

export type TokenFailure =
  /** Not a Punch token at all: missing prefix, no separator, too long, bad characters. */
  | 'malformed'
  /** Signature does not match (tampered payload or signature, or another secret). */
  | 'bad_signature'
  /** Signed correctly but the claims are not a valid claims object. */
  | 'bad_claims';

export type TokenVerification =
  { ok: true; claims: TokenClaims; expired: boolean } | { ok: false; reason: TokenFailure };

const BASE64URL = /^[A-Za-z0-9_-]+$/;

export class TokenSigner {
  readonly #secret: Buffer;
  /** Made from the secret by the first signature or check, so node:crypto loads on use, not at start. */
  #key: KeyObject | undefined;

  constructor(secret: string) {
    this.#secret = Buffer.from(secret, 'utf8');
  }

  #mac(segment: string): Buffer {
    this.#key ??= createSecretKey(this.#secret);
    return createHmac('sha256', this.#key).update(segment, 'ascii').digest();
  }

  sign(claims: TokenClaims): string {
    // Key order is fixed so equal claims give byte-identical tokens.
    const body: Record<string, unknown> = {
      session: claims.session,
      role: claims.role,
      stream: claims.stream,
      exp: claims.exp,
    };
    if (claims.sid !== undefined) body['sid'] = claims.sid;
    if (claims.label !== undefined) body['label'] = claims.label;
    if (claims.inv !== undefined) body['inv'] = claims.inv;
    const segment = Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
    return `${TOKEN_PREFIX}${segment}.${this.#mac(segment).toString('base64url')}`;
  }

  /**
   * Verify signature first, then parse claims (never trust unauthenticated JSON). `expired` is
   * `exp * 1000 <= nowMs` (a correctly signed token past its exp gets SESSION_EXPIRED, README "Errors").
   */
  verify(token: string, nowMs: number): TokenVerification {
    if (token.length > MAX_TOKEN_LENGTH || !token.startsWith(TOKEN_PREFIX))
      return { ok: false, reason: 'malformed' };
    const dot = token.lastIndexOf('.');
    if (dot <= TOKEN_PREFIX.length || dot === token.length - 1) return { ok: false, reason: 'malformed' };
    const segment = token.slice(TOKEN_PREFIX.length, dot);
    const sigText = token.slice(dot + 1);
    if (!BASE64URL.test(segment) || !BASE64URL.test(sigText)) return { ok: false, reason: 'malformed' };
    const given = Buffer.from(sigText, 'base64url');
    const expected = this.#mac(segment);
    // timingSafeEqual needs equal lengths; the length of an HMAC-SHA256 is public, so checking it leaks nothing.
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return { ok: false, reason: 'bad_signature' };
    }
    // Canonical encoding only: a second, differently padded spelling of the same signature is refused.
    if (given.toString('base64url') !== sigText) return { ok: false, reason: 'bad_signature' };
    const claims = parseClaims(segment);
    if (!claims) return { ok: false, reason: 'bad_claims' };
    return { ok: true, claims, expired: claims.exp * 1000 <= nowMs };
  }
}

function parseClaims(segment: string): TokenClaims | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const o = raw as Record<string, unknown>;
  const { session, role, exp } = o;
  const stream = o['stream'] ?? null;
  if (typeof session !== 'string' || session.length === 0) return undefined;
  if (role !== 'admin' && role !== 'peer') return undefined;
  if (stream !== null && typeof stream !== 'string') return undefined;
  if (typeof exp !== 'number' || !Number.isSafeInteger(exp)) return undefined;
  const claims: TokenClaims = { session, role, stream, exp };
  if (typeof o['sid'] === 'string') claims.sid = o['sid'];
  if (typeof o['label'] === 'string') claims.label = o['label'];
  if (typeof o['inv'] === 'string') claims.inv = o['inv'];
  return claims;
}
