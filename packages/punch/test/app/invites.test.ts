import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { inviteList } from '../../src/protocol/schemas.ts';
import { TokenSigner } from '../../src/protocol/token.ts';
import {
  SECRET,
  assertError,
  injectBroker,
  issueInvite,
  twoStreamSession,
  type InjectedBroker,
} from '../inject-harness.ts';

/**
 * README "Invites": every peer token the operator issues is listed with its label, link, QR and state.
 * Through `inject` on a `ManualClock` (quick tier); revocation against open sockets and across a restart is
 * in test/io/invites.test.ts.
 */
describe('invites: list', () => {
  let t: InjectedBroker;
  before(async () => {
    t = await injectBroker();
  });
  after(async () => {
    await t.close();
  });

  const session = (name: string): Promise<string> => twoStreamSession(t.call, name);
  const invite = (name: string, admin: string, body: Record<string, unknown>) =>
    issueInvite(t.call, name, admin, body);

  test('two invites of one stream with one label are two tokens, both listed with label, link and QR', async () => {
    const admin = await session('inv1');
    const one = await invite('inv1', admin, { stream: 'cam-a', label: 'Camera 1' });
    const two = await invite('inv1', admin, { stream: 'cam-a', label: 'Camera 1' });
    assert.notEqual(one.token, two.token);
    assert.notEqual(one.invite, two.invite);
    const claims = new TokenSigner(SECRET).verify(one.token, t.clock.now());
    assert.ok(claims.ok);
    assert.equal(claims.claims.inv, one.invite);
    const r = await t.call('GET', '/api/session/inv1/invites', { token: admin });
    assert.equal(r.status, 200, r.text);
    const list = inviteList.parse(r.json).invites;
    assert.deepEqual(
      list.map((i) => [i.id, i.stream, i.label, i.state, i.token, i.url, i.qr]),
      [
        [one.invite, 'cam-a', 'Camera 1', 'unused', one.token, one.url, one.qr],
        [two.invite, 'cam-a', 'Camera 1', 'unused', two.token, two.url, two.qr],
      ],
    );
    // A peer token may not list invites (they carry other peers' tokens).
    assertError(await t.call('GET', '/api/session/inv1/invites', { token: one.token }), 403, 'AUTH_FAILED');
  });
});
