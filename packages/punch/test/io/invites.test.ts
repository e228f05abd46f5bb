import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { SqliteSessionStore } from '../../src/io/sqlite-store.ts';
import { inviteList } from '../../src/protocol/schemas.ts';
import { WS_SUBPROTOCOL } from '../../src/io/ws-server.ts';
import { assertError, startTestServer, type TestServer } from '../helpers.ts';
import { issueInvite, twoStreamSession } from '../inject-harness.ts';
import { connect, wsUrl } from '../ws-helpers.ts';
import { WebSocket } from 'ws';

/**
 * README "Invites": every peer token the operator issues is listed with its label, link, QR and state,
 * and can be revoked one by one; a revoked token is refused at once by the API, the pages and the
 * signalling, and its open connection is closed. Listing and the token claims are tested through `inject` in
 * test/app/invites.test.ts; here what needs the signalling socket or the SQLite file.
 */
describe('invites: list and revoke', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t.close();
  });

  const session = (name: string): Promise<string> => twoStreamSession(t.call, name);
  const invite = (name: string, admin: string, body: Record<string, unknown>) =>
    issueInvite(t.call, name, admin, body);

  test('the state follows the peer: present while connected with its slot, away after it left', async () => {
    const admin = await session('inv2');
    const one = await invite('inv2', admin, { stream: 'cam-a' });
    const state = async () =>
      inviteList.parse((await t.call('GET', '/api/session/inv2/invites', { token: admin })).json).invites[0]
        ?.state;
    const peer = await connect(t.url, 'inv2', { token: one.token });
    await peer.next('session');
    peer.send({ type: 'register', stream: 'cam-a', port: 9000 });
    for (let i = 0; i < 50 && (await state()) !== 'present'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(await state(), 'present');
    peer.close();
    await peer.closed;
    for (let i = 0; i < 50 && (await state()) !== 'away'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(await state(), 'away');
  });

  test('revoke: the token is refused at once by the API, the page, the QR and the signalling; its socket is closed', async () => {
    const admin = await session('inv3');
    const keep = await invite('inv3', admin, { stream: 'cam-a', label: 'keep' });
    const gone = await invite('inv3', admin, { stream: 'cam-b', label: 'gone' });
    const peer = await connect(t.url, 'inv3', { token: gone.token });
    await peer.next('session');
    peer.send({ type: 'register', stream: 'cam-b', port: 9000 });
    await peer.next('session');

    const r = await t.call('DELETE', `/api/session/inv3/invites/${gone.invite}`, { token: admin });
    assert.equal(r.status, 204, r.text);
    // The open connection of that token is told and closed.
    const err = await peer.next('error');
    assert.equal(err['code'], 'AUTH_FAILED');
    assert.match(String(err['message']), /revoked/);
    assert.equal((await peer.closed).code, 4401);
    // Every new use is refused.
    assertError(
      await t.call('GET', '/api/session/inv3', { token: gone.token }),
      401,
      'AUTH_FAILED',
      /revoked/,
    );
    const page = await fetch(`${t.url}/s/inv3?t=${encodeURIComponent(gone.token)}`);
    assert.equal(page.status, 410);
    assert.ok(!(await page.text()).includes('console.js'));
    const again = await connect(t.url, 'inv3', { token: gone.token });
    assert.equal((await again.next('error'))['code'], 'AUTH_FAILED');
    assert.equal((await again.closed).code, 4401);
    // The other invite is untouched.
    assert.equal((await t.call('GET', '/api/session/inv3', { token: keep.token })).status, 200);
    // The list shows it revoked, without its token.
    const list = inviteList.parse((await t.call('GET', '/api/session/inv3/invites', { token: admin })).json);
    assert.deepEqual(
      list.invites.map((i) => [i.label, i.state, i.token === null, i.url === null, i.revoked !== null]),
      [
        ['keep', 'unused', false, false, false],
        ['gone', 'revoked', true, true, true],
      ],
    );
    // Revoking twice is harmless; an unknown id is a clear 400; a peer token may not revoke.
    assert.equal(
      (await t.call('DELETE', `/api/session/inv3/invites/${gone.invite}`, { token: admin })).status,
      204,
    );
    assertError(
      await t.call('DELETE', '/api/session/inv3/invites/nope', { token: admin }),
      400,
      'INVALID_MESSAGE',
      /no invite "nope"/,
    );
    assertError(
      await t.call('DELETE', `/api/session/inv3/invites/${keep.invite}`, { token: keep.token }),
      403,
      'AUTH_FAILED',
    );
  });

  test('the console authenticates its WebSocket with a subprotocol, never a URL: bearer.<token> is accepted', async () => {
    const admin = await session('inv4');
    const ws = new WebSocket(wsUrl(t.url, 'inv4'), [WS_SUBPROTOCOL, `bearer.${admin}`], {
      perMessageDeflate: false,
    });
    const first = await new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.once('message', (d) =>
        resolve(JSON.parse((d as Buffer).toString('utf8')) as Record<string, unknown>),
      );
      ws.once('error', reject);
    });
    assert.equal(ws.protocol, WS_SUBPROTOCOL);
    assert.equal(first['type'], 'session');
    ws.close();
    const bad = new WebSocket(wsUrl(t.url, 'inv4'), [WS_SUBPROTOCOL, 'bearer.p_forged.sig'], {
      perMessageDeflate: false,
    });
    const code = await new Promise<number>((resolve) => bad.once('close', (c) => resolve(c)));
    assert.equal(code, 4401);
  });
});

test('revocations survive a restart on the same SQLite file', async () => {
  const t = await startTestServer();
  const db = `${t.dir}/punch.db`;
  const r = await t.call('POST', '/api/session', { body: { name: 'durable-inv' } });
  const admin = r.json.token as string;
  const a = (await t.call('POST', '/api/session/durable-inv/token', { token: admin, body: {} })).json;
  const b = (await t.call('POST', '/api/session/durable-inv/token', { token: admin, body: {} })).json;
  assert.equal(
    (await t.call('DELETE', `/api/session/durable-inv/invites/${b.invite}`, { token: admin })).status,
    204,
  );
  await t.server.close();
  const store = new SqliteSessionStore(db);
  const loaded = store.loadAll().find((s) => s.name === 'durable-inv');
  store.close();
  assert.deepEqual(
    loaded?.invites?.map((i) => [i.id, i.revokedAt !== null]),
    [
      [a.invite, false],
      [b.invite, true],
    ],
  );
  const t2 = await startTestServer({ config: { db } });
  try {
    assert.equal((await t2.call('GET', '/api/session/durable-inv', { token: a.token })).status, 200);
    assertError(await t2.call('GET', '/api/session/durable-inv', { token: b.token }), 401, 'AUTH_FAILED');
  } finally {
    await t2.close();
    rmSync(t.dir, { recursive: true, force: true });
  }
});
