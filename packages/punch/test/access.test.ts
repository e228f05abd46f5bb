import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AccessChecker, type AuthFailureReason } from '../src/domain/access.ts';
import type { SessionRecord } from '../src/domain/session.ts';
import { isPunchError } from '../src/errors.ts';
import { TokenSigner } from '../src/protocol/token.ts';

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

function expectError(fn: () => unknown, code: string, status: number): void {
  assert.throws(fn, (e) => isPunchError(e) && e.code === code && e.status === status);
}

test('access checks map to the documented codes and statuses, and report why', () => {
  const reasons: AuthFailureReason[] = [];
  const access = new AccessChecker(signer, (r) => reasons.push(r));
  const admin = signer.sign({ session: 'cam1', role: 'admin', stream: null, exp: EXP, sid: 'sid-1' });
  const peer = signer.sign({ session: 'cam1', role: 'peer', stream: 'a', exp: EXP, sid: 'sid-1' });
  const claims = access.authenticate(admin, 'cam1', NOW);
  assert.equal(access.liveSession(session, 'cam1', claims), session);
  access.requireAdmin(claims, 'x');
  access.requireStream(claims, 'anything');
  const peerClaims = access.authenticate(peer, 'cam1', NOW);
  access.requireStream(peerClaims, 'a');
  expectError(() => access.requireStream(peerClaims, 'b'), 'AUTH_FAILED', 403);
  expectError(() => access.requireAdmin(peerClaims, 'closing'), 'AUTH_FAILED', 403);
  expectError(() => access.authenticate(undefined, 'cam1', NOW), 'AUTH_FAILED', 401);
  expectError(() => access.authenticate('p_x.y', 'cam1', NOW), 'AUTH_FAILED', 401);
  expectError(() => access.authenticate(admin, 'cam2', NOW), 'AUTH_FAILED', 403);
  expectError(() => access.authenticate(admin, 'cam1', EXP * 1000), 'SESSION_EXPIRED', 410);
  expectError(() => access.liveSession(undefined, 'cam1', claims), 'SESSION_EXPIRED', 410);
  expectError(
    () => access.liveSession({ ...session, state: 'CLOSED' }, 'cam1', claims),
    'SESSION_EXPIRED',
    410,
  );
  expectError(() => access.liveSession({ ...session, id: 'sid-2' }, 'cam1', claims), 'SESSION_EXPIRED', 410);
  assert.deepEqual(reasons, ['other_stream', 'peer_role', 'missing', 'bad_signature', 'other_session']);
});
