// GET/PUT /api/config: validation with the file's schema, atomic replacement, live peers, restart notes.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { startService } from '../helpers/service.ts';
import { JWT_SECRET, startWebRig, until, type WebRig } from '../helpers/web.ts';

let rig: WebRig;
let upstream: Awaited<ReturnType<typeof startService>>;
let admin: string;
before(async () => {
  upstream = await startService({ local_stratum: true, interface: '127.0.0.1' });
  rig = await startWebRig({ nts: { cookie_key: 'ab'.repeat(32) } });
  admin = await rig.login('admin');
});
after(async () => {
  await rig?.close();
  await upstream?.service.close();
});

const api = (method: 'GET' | 'PUT' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
  rig.service.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${admin}` },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

test('GET /api/config: the editable sections, never the web section or the NTS cookie key', async () => {
  const res = await api('GET', '/api/config');
  assert.equal(res.statusCode, 200, res.body);
  const doc = res.json<Record<string, Record<string, unknown>>>();
  assert.equal(doc['web'], undefined);
  assert.equal(doc['nts']?.['cookie_key'], undefined);
  assert.ok(!res.body.includes(JWT_SECRET) && !res.body.includes('scrypt$') && !res.body.includes('abab'));
  assert.equal(doc['ntp']?.['local_stratum'], true);
});

test('an invalid PUT is refused with the path of the error and leaves the file untouched', async () => {
  const before = readFileSync(rig.configFile);
  for (const [doc, path] of [
    [{ ntp: { port: 70000 } }, /ntp\.port/],
    [{ ntp: { upstream_peers: [{ address: 'no port here:' }] } }, /ntp\.upstream_peers\.0\.address/],
    [{ ntp: { bogus: 1 } }, /ntp\.bogus/],
    [{ web: { users: [] } }, /web/],
    [{ gpsdo: { enabled: true, type: 'serialpps' } }, /gpsdo/],
    [[1, 2], /object/],
  ] as const) {
    const res = await api('PUT', '/api/config', doc);
    assert.equal(res.statusCode, 400, JSON.stringify(doc));
    const body = res.json<{ error: string; message: string }>();
    assert.equal(body.error, 'CONFIG_INVALID');
    assert.match(body.message, path, body.message);
  }
  assert.deepEqual(readFileSync(rig.configFile), before);
  const viewer = await rig.login('viewer');
  const denied = await rig.service.app.inject({
    method: 'PUT',
    url: '/api/config',
    headers: { authorization: `Bearer ${viewer}` },
    payload: { ntp: {} },
  });
  assert.equal(denied.statusCode, 403);
  assert.deepEqual(readFileSync(rig.configFile), before);
});

test('a crash between writing and renaming leaves the old file whole and no temporary file behind', async () => {
  const before = readFileSync(rig.configFile);
  const doc = (await api('GET', '/api/config')).json<Record<string, Record<string, unknown>>>();
  rig.service.web.configStore.beforeRename = () => {
    throw new Error('simulated crash before rename');
  };
  try {
    const res = await api('PUT', '/api/config', { ...doc, ntp: { ...doc['ntp'], stratum: 9 } });
    assert.equal(res.statusCode, 500);
    assert.match(res.json<{ message: string }>().message, /failed to save config: simulated crash/);
  } finally {
    rig.service.web.configStore.beforeRename = undefined;
  }
  assert.deepEqual(readFileSync(rig.configFile), before);
  assert.deepEqual(
    readdirSync(rig.dir).filter((f) => f.endsWith('.tmp')),
    [],
    'the temporary file is removed',
  );
});

test('a valid PUT replaces the file atomically (0600, web and secrets kept), says what needs a restart; a new peer polls at once', async () => {
  const doc = (await api('GET', '/api/config')).json<Record<string, Record<string, unknown>>>();
  const peer = { address: `127.0.0.1:${upstream.port}`, minpoll: 0, maxpoll: 0 };
  const res = await api('PUT', '/api/config', {
    ...doc,
    ntp: { ...doc['ntp'], stratum: 9, upstream_peers: [peer] },
  });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json<{ restart_required: boolean; restart_required_for: string[]; applied: string[] }>();
  assert.deepEqual(body.applied, ['ntp.upstream_peers']);
  assert.equal(body.restart_required, true);
  assert.deepEqual(body.restart_required_for, ['ntp.stratum']);
  const written = parse(readFileSync(rig.configFile, 'utf8')) as Record<string, Record<string, unknown>>;
  assert.equal(written['ntp']?.['stratum'], 9);
  assert.equal(written['web']?.['jwt_secret'], JWT_SECRET, 'the web section is kept from the file');
  assert.equal(written['nts']?.['cookie_key'], 'ab'.repeat(32), 'the cookie key is kept from the file');
  assert.equal(statSync(rig.configFile).mode & 0o777, 0o600);
  // The new upstream polls without a restart.
  const polled = await until(
    async () => {
      const peers = (await api('GET', '/api/peers')).json<
        { address: string; reach: number; stratum: number }[]
      >();
      const p = peers.find((x) => x.address === peer.address);
      return p && p.reach > 0 ? p : undefined;
    },
    15_000,
    'the new peer answered',
  );
  assert.equal(polled.stratum, 2, 'the upstream (local stratum 2) answered');
  // Only that peer: nothing applied needs a restart; removing it again stops it.
  const del = await api('DELETE', `/api/config/ntp/peers/${encodeURIComponent(peer.address)}`);
  assert.equal(del.statusCode, 200, del.body);
  assert.deepEqual(del.json<{ applied: string[] }>().applied, ['ntp.upstream_peers']);
  assert.equal((await api('GET', '/api/peers')).json<unknown[]>().length, 0);
});

test('POST /api/config/ntp/peers adds one peer (201), refuses duplicates (409) and bad addresses (400)', async () => {
  const address = `127.0.0.1:${upstream.port}`;
  const add = await api('POST', '/api/config/ntp/peers', { address, minpoll: 0, maxpoll: 0 });
  assert.equal(add.statusCode, 201, add.body);
  assert.deepEqual(
    add.json<{ restart_required_for: string[] }>().restart_required_for,
    ['ntp.stratum'],
    'the stratum saved earlier still waits for a restart; the peer itself does not',
  );
  assert.equal((await api('POST', '/api/config/ntp/peers', { address })).statusCode, 409);
  assert.equal((await api('POST', '/api/config/ntp/peers', { address: 'a b:x' })).statusCode, 400);
  const peers = (await api('GET', '/api/peers')).json<{ address: string }[]>();
  assert.deepEqual(
    peers.map((p) => p.address),
    [address],
  );
  const written = parse(readFileSync(rig.configFile, 'utf8')) as {
    ntp: { upstream_peers: { address: string }[] };
  };
  assert.deepEqual(
    written.ntp.upstream_peers.map((p) => p.address),
    [address],
    'saved before the answer',
  );
});
