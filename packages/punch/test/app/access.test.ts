import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AccessChecker, type AuthFailureReason } from '../../src/domain/access.ts';
import type { SessionRecord } from '../../src/domain/session.ts';
import { httpErrorOf } from '../../src/io/http-errors.ts';
import { TokenSigner } from '../../src/protocol/token.ts';

const NOW = Date.UTC(2026, 0, 1);
const EXP = NOW / 1000 + 60;
const signer = new TokenSigner('s'.repeat(40));
const session: SessionRecord = {
  name: 'cam1',
  id: 'sid-1',
  state: 'WAITING',
  passphrase: 'x'.repeat(32),
  latency: 200,
  ttl: 60,
  createdAt: NOW,
  expiresAt: EXP * 1000,
  closedAt: null,
  closeReason: null,
  streams: [],
};

/** The refusal of a check, mapped to HTTP the way the API maps it. */
function expectRefusal(outcome: unknown, code: string, status: number): void {
  assert.ok(outcome && typeof outcome === 'object' && 'ok' in outcome && outcome.ok === false, 'refused');
  const e = httpErrorOf(outcome as Parameters<typeof httpErrorOf>[0]);
  assert.equal(e.code, code);
  assert.equal(e.status, status);
}

test('access checks return typed refusals; the HTTP layer maps them to the documented statuses', () => {
  const reasons: AuthFailureReason[] = [];
  const access = new AccessChecker(signer, (r) => reasons.push(r));
  const admin = signer.sign({ session: 'cam1', role: 'admin', stream: null, exp: EXP, sid: 'sid-1' });
  const peer = signer.sign({ session: 'cam1', role: 'peer', stream: 'a', exp: EXP, sid: 'sid-1' });
  const auth = access.authenticate(admin, 'cam1', NOW);
  assert.ok(auth.ok);
  const claims = auth.claims;
  assert.deepEqual(access.liveSession(session, 'cam1', claims), { ok: true, session });
  assert.equal(access.requireAdmin(claims, 'x'), undefined);
  assert.equal(access.requireStream(claims, 'anything'), undefined);
  const peerAuth = access.authenticate(peer, 'cam1', NOW);
  assert.ok(peerAuth.ok);
  const peerClaims = peerAuth.claims;
  assert.equal(access.requireStream(peerClaims, 'a'), undefined);
  expectRefusal(access.requireStream(peerClaims, 'b'), 'AUTH_FAILED', 403);
  expectRefusal(access.requireAdmin(peerClaims, 'closing'), 'AUTH_FAILED', 403);
  expectRefusal(access.authenticate(undefined, 'cam1', NOW), 'AUTH_FAILED', 401);
  expectRefusal(access.authenticate('p_x.y', 'cam1', NOW), 'AUTH_FAILED', 401);
  expectRefusal(access.authenticate(admin, 'cam2', NOW), 'AUTH_FAILED', 403);
  // Past its `exp`, a token with the session's incarnation id lives as long as the session (README
  // "Lifetime": extended, or kept open by its media); a token without `sid` is bound to its `exp`.
  const late = access.authenticate(admin, 'cam1', EXP * 1000 + 60_000);
  assert.ok(late.ok);
  assert.deepEqual(access.liveSession({ ...session, expiresAt: (EXP + 600) * 1000 }, 'cam1', late.claims), {
    ok: true,
    session: { ...session, expiresAt: (EXP + 600) * 1000 },
  });
  expectRefusal(
    access.liveSession({ ...session, state: 'CLOSED' }, 'cam1', late.claims),
    'SESSION_EXPIRED',
    410,
  );
  const legacy = signer.sign({ session: 'cam1', role: 'admin', stream: null, exp: EXP });
  expectRefusal(access.authenticate(legacy, 'cam1', EXP * 1000), 'SESSION_EXPIRED', 410);
  expectRefusal(access.liveSession(undefined, 'cam1', claims), 'SESSION_EXPIRED', 410);
  expectRefusal(access.liveSession({ ...session, state: 'CLOSED' }, 'cam1', claims), 'SESSION_EXPIRED', 410);
  expectRefusal(access.liveSession({ ...session, id: 'sid-2' }, 'cam1', claims), 'SESSION_EXPIRED', 410);
  assert.deepEqual(reasons, ['other_stream', 'peer_role', 'missing', 'bad_signature', 'other_session']);
});
