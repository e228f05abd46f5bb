import type { AppError } from '@broadcast-ops/core';
import { fail, forbidden, type PunchErrorCode } from '../errors.ts';
import type { TokenClaims, TokenFailure, TokenSigner } from '../protocol/token.ts';
import type { SessionRecord } from './session.ts';

/**
 * Access checks shared by the HTTP API and the WebSocket layer (spec "Authentication"; reference §1.1
 * "Signature encoding" and §1.2 "HTTP status per error code"). Each check throws an AppError whose code the
 * WebSocket layer can send as its `error` message and whose status the HTTP layer answers with.
 */
export type AuthFailureReason = TokenFailure | 'missing' | 'other_session' | 'peer_role' | 'other_stream';

export class AccessChecker {
  readonly #signer: TokenSigner;
  readonly #onFailure: (reason: AuthFailureReason) => void;

  constructor(signer: TokenSigner, onFailure: (reason: AuthFailureReason) => void = () => undefined) {
    this.#signer = signer;
    this.#onFailure = onFailure;
  }

  #deny(reason: AuthFailureReason, err: AppError<PunchErrorCode>): never {
    this.#onFailure(reason);
    throw err;
  }

  /** A genuine, unexpired token for session `name`: 401 (missing/forged), 403 (other session), 410 (expired). */
  authenticate(token: string | undefined, name: string, nowMs: number): TokenClaims {
    if (token === undefined)
      this.#deny('missing', fail('AUTH_FAILED', 'Authorization: Bearer <token> required'));
    const v = this.#signer.verify(token, nowMs);
    if (!v.ok) {
      this.#deny(
        v.reason,
        fail(
          'AUTH_FAILED',
          v.reason === 'malformed' ? 'token: not a Punch token' : 'token: invalid signature or claims',
        ),
      );
    }
    if (v.claims.session !== name)
      this.#deny('other_session', forbidden('token: issued for another session'));
    if (v.expired) throw fail('SESSION_EXPIRED', 'token: expired with its session');
    return v.claims;
  }

  /** Admin-only operations (close, /connect, peer tokens, tally): 403 for a peer token. */
  requireAdmin(claims: TokenClaims, what: string): void {
    if (claims.role !== 'admin') this.#deny('peer_role', forbidden(`token: ${what} needs an admin token`));
  }

  /** A stream-scoped token reaches only its stream (spec: "A token for one stream cannot access another"). */
  requireStream(claims: TokenClaims, stream: string): void {
    if (claims.stream !== null && claims.stream !== stream) {
      this.#deny('other_stream', forbidden(`token: scoped to stream "${claims.stream}"`));
    }
  }

  /** The live session a verified token belongs to; 410 when closed, unknown, or an earlier session of the name. */
  liveSession(session: SessionRecord | undefined, name: string, claims: TokenClaims): SessionRecord {
    if (!session || session.state === 'CLOSED')
      throw fail('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    if (claims.exp * 1000 !== session.expiresAt || (claims.sid !== undefined && claims.sid !== session.id)) {
      throw fail('SESSION_EXPIRED', 'token: belongs to an earlier session of this name');
    }
    return session;
  }
}
