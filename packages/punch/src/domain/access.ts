import type { TokenClaims, TokenFailure, TokenSigner } from '../protocol/token.ts';
import { refuse, type Refusal } from './outcome.ts';
import type { SessionRecord } from './session.ts';

/**
 * Access checks shared by the HTTP API and the WebSocket layer (spec "Authentication"). Each check returns
 * the verified value or a typed refusal; the transport chooses the status (HTTP 401 for `missing` and the
 * token failures, 403 for a genuine token that is not allowed here, 410 for SESSION_EXPIRED) or the
 * WebSocket `error` code.
 *
 * Token rules (README "Tokens"): a token must verify (prefix, HMAC-SHA256 over the claims segment,
 * constant-time compare), name the session in the path and carry the session's incarnation id (`sid`):
 * it is then valid while that session is live, extended or past its TTL (README "Lifetime"). A token
 * without `sid` must carry the session's expiry (`exp`) and not have expired.
 */
export type AuthFailureReason =
  TokenFailure | 'missing' | 'other_session' | 'peer_role' | 'other_stream' | 'revoked';

/** AUTH_FAILED with the reason the transport maps (401 or 403 for HTTP). */
export interface AuthRefusal extends Refusal<'AUTH_FAILED'> {
  reason: AuthFailureReason;
}

export type AccessRefusal = AuthRefusal | Refusal<'SESSION_EXPIRED'>;

export type AccessOutcome<T extends object> = ({ ok: true } & T) | AccessRefusal;

/** Reasons where the token itself was not acceptable (HTTP 401); the others are "not allowed" (403). */
export function isCredentialFailure(reason: AuthFailureReason): boolean {
  return reason !== 'other_session' && reason !== 'peer_role' && reason !== 'other_stream';
}

export class AccessChecker {
  readonly #signer: TokenSigner;
  readonly #onFailure: (reason: AuthFailureReason) => void;

  constructor(signer: TokenSigner, onFailure: (reason: AuthFailureReason) => void = () => undefined) {
    this.#signer = signer;
    this.#onFailure = onFailure;
  }

  #deny(reason: AuthFailureReason, message: string): AuthRefusal {
    this.#onFailure(reason);
    return { ...refuse('AUTH_FAILED', message), reason };
  }

  /** A genuine, unexpired token for session `name`. */
  authenticate(
    token: string | undefined,
    name: string,
    nowMs: number,
  ): AccessOutcome<{ claims: TokenClaims }> {
    if (token === undefined) return this.#deny('missing', 'Authorization: Bearer <token> required');
    const v = this.#signer.verify(token, nowMs);
    if (!v.ok) {
      return this.#deny(
        v.reason,
        v.reason === 'malformed' ? 'token: not a Punch token' : 'token: invalid signature or claims',
      );
    }
    if (v.claims.session !== name) return this.#deny('other_session', 'token: issued for another session');
    // A token carrying its session's incarnation (`sid`) lives as long as that session (README "Lifetime":
    // an extended session, or one past its TTL that media keeps open, keeps its tokens); `liveSession`
    // decides. A token without `sid` is bound to its `exp`.
    if (v.expired && v.claims.sid === undefined) {
      return refuse('SESSION_EXPIRED', 'token: expired with its session');
    }
    return { ok: true, claims: v.claims };
  }

  /** Admin-only operations (close, /connect, peer tokens, tally). */
  requireAdmin(claims: TokenClaims, what: string): AuthRefusal | undefined {
    return claims.role === 'admin'
      ? undefined
      : this.#deny('peer_role', `token: ${what} needs an admin token`);
  }

  /** A stream-scoped token reaches only its stream (spec: "A token for one stream cannot access another"). */
  requireStream(claims: TokenClaims, stream: string): AuthRefusal | undefined {
    return claims.stream !== null && claims.stream !== stream
      ? this.#deny('other_stream', `token: scoped to stream "${claims.stream}"`)
      : undefined;
  }

  /** The live session a verified token belongs to; SESSION_EXPIRED when closed, unknown, or an earlier one. */
  liveSession(
    session: SessionRecord | undefined,
    name: string,
    claims: TokenClaims,
  ): AccessOutcome<{ session: SessionRecord }> {
    if (!session || session.state === 'CLOSED') {
      return refuse('SESSION_EXPIRED', `session "${name}" is closed or unknown`);
    }
    // README "Invites": a revoked invite's token is refused from the moment the revocation is saved.
    if (
      claims.inv !== undefined &&
      session.invites?.some((i) => i.id === claims.inv && i.revokedAt !== null)
    ) {
      return this.#deny('revoked', 'token: its invite was revoked by the operator');
    }
    const sameIncarnation =
      claims.sid !== undefined ? claims.sid === session.id : claims.exp * 1000 === session.expiresAt;
    if (!sameIncarnation) {
      return refuse('SESSION_EXPIRED', 'token: belongs to an earlier session of this name');
    }
    return { ok: true, session };
  }
}
