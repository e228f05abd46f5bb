// jose is loaded on the first login or token check, not at start (docs/performance.md "At rest").
const jose = (): Promise<typeof import('jose')> => import('jose');
import { ROLES, type Role } from '../../domain/permissions.ts';
import { SCRYPT_PARAMS, hashPassword, parsePasswordHash, verifyPassword } from './passwords.ts';

/**
 * Login and tokens (README "Web API: authentication"): JWT HS256 signed with `web.jwt_secret` (or
 * TIMESVC_JWT_SECRET), claims `sub` = `username`, `role`, `iss` "timesvc", `iat`, `exp`.
 */
export const JWT_ISSUER = 'timesvc';
/** HS256 wants a key at least as long as the hash output (RFC 7518 §3.2: 256 bits). */
export const MIN_JWT_SECRET_BYTES = 32;

export interface User {
  username: string;
  password_hash: string;
  role: Role;
}

export interface TokenClaims {
  username: string;
  role: Role;
  exp: number;
}

export type VerifyResult = { ok: true; claims: TokenClaims } | { ok: false; reason: 'expired' | 'invalid' };

export class Authenticator {
  readonly #key: Uint8Array;
  readonly #users: Map<string, User>;
  readonly #expiryS: number;
  readonly #now: () => number;
  #dummyHash: Promise<string> | undefined;

  constructor(options: { secret: string; users: readonly User[]; expiryS: number; now?: () => number }) {
    this.#key = new TextEncoder().encode(options.secret);
    this.#users = new Map(options.users.map((u) => [u.username, u]));
    this.#expiryS = options.expiryS;
    this.#now = options.now ?? Date.now;
  }

  get expiryS(): number {
    return this.#expiryS;
  }

  /**
   * The user when the password matches, else undefined. An unknown user costs one scrypt run against a
   * dummy hash too, so the answer time does not tell which usernames exist.
   */
  async check(username: string, password: string): Promise<User | undefined> {
    const user = this.#users.get(username);
    if (!user) {
      // The same scrypt parameters as the configured users, so both paths cost the same.
      const first = [...this.#users.values()][0];
      const p = first ? parsePasswordHash(first.password_hash) : undefined;
      this.#dummyHash ??= hashPassword(
        'timesvc-dummy-password',
        p ? { ...SCRYPT_PARAMS, log2N: p.log2N, r: p.r, p: p.p, keyBytes: p.key.length } : SCRYPT_PARAMS,
      );
      await verifyPassword(password, await this.#dummyHash);
      return undefined;
    }
    return (await verifyPassword(password, user.password_hash)) ? user : undefined;
  }

  async issue(user: User): Promise<{ token: string; expiresAt: number }> {
    const iat = Math.floor(this.#now() / 1000);
    const exp = iat + Math.max(1, Math.round(this.#expiryS));
    const { SignJWT } = await jose();
    const token = await new SignJWT({ username: user.username, role: user.role })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(user.username)
      .setIssuer(JWT_ISSUER)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(this.#key);
    return { token, expiresAt: exp };
  }

  async verify(token: string): Promise<VerifyResult> {
    const { errors: joseErrors, jwtVerify } = await jose();
    try {
      const { payload } = await jwtVerify(token, this.#key, {
        algorithms: ['HS256'],
        issuer: JWT_ISSUER,
        currentDate: new Date(this.#now()),
        requiredClaims: ['exp', 'sub'],
      });
      const role = payload['role'];
      const username = payload['username'];
      if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) {
        return { ok: false, reason: 'invalid' };
      }
      if (typeof username !== 'string' || username !== payload.sub) return { ok: false, reason: 'invalid' };
      // A token outlives nothing: a user removed from the configuration loses access at once.
      const user = this.#users.get(username);
      if (!user || user.role !== role) return { ok: false, reason: 'invalid' };
      return { ok: true, claims: { username, role: user.role, exp: payload.exp ?? 0 } };
    } catch (err) {
      return { ok: false, reason: err instanceof joseErrors.JWTExpired ? 'expired' : 'invalid' };
    }
  }
}

/**
 * Failed logins per client address: after `freeFailures` within `windowMs`, each further attempt must
 * wait an exponentially growing delay (1 s, 2 s, 4 s … up to `maxDelayMs`), answered 429 with
 * Retry-After until then. At most `maxEntries` addresses are tracked (oldest dropped first).
 */
export class LoginThrottle {
  readonly #entries = new Map<string, { failures: number; firstMs: number; blockedUntilMs: number }>();
  readonly #o: { freeFailures: number; windowMs: number; maxDelayMs: number; maxEntries: number };
  readonly #now: () => number;

  constructor(
    options: Partial<{ freeFailures: number; windowMs: number; maxDelayMs: number; maxEntries: number }> = {},
    now: () => number = Date.now,
  ) {
    this.#o = {
      freeFailures: options.freeFailures ?? 5,
      windowMs: options.windowMs ?? 15 * 60_000,
      maxDelayMs: options.maxDelayMs ?? 60_000,
      maxEntries: options.maxEntries ?? 10_000,
    };
    this.#now = now;
  }

  /** Milliseconds the address must still wait (0 = may try now). */
  waitMs(address: string): number {
    const e = this.#entries.get(address);
    if (!e) return 0;
    const now = this.#now();
    if (now - e.firstMs > this.#o.windowMs) {
      this.#entries.delete(address);
      return 0;
    }
    return Math.max(0, e.blockedUntilMs - now);
  }

  /** Records a failure; returns the failures counted in the window. */
  fail(address: string): number {
    const now = this.#now();
    let e = this.#entries.get(address);
    if (!e || now - e.firstMs > this.#o.windowMs) {
      e = { failures: 0, firstMs: now, blockedUntilMs: 0 };
    }
    this.#entries.delete(address);
    this.#entries.set(address, e);
    e.failures++;
    const over = e.failures - this.#o.freeFailures;
    if (over >= 0) e.blockedUntilMs = now + Math.min(this.#o.maxDelayMs, 1000 * 2 ** over);
    while (this.#entries.size > this.#o.maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
    return e.failures;
  }

  succeed(address: string): void {
    this.#entries.delete(address);
  }
}
