import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { configSchema, loadMonitorConfig } from '../../src/config.ts';
import { HyperdeckSimulator, VmixSimulator } from '@broadcast-ops/simulators/playout';
import { PlayoutService } from '../../src/playout-service.ts';
import { apiHeaders, makeConfig } from '../helpers.ts';
import { deckEntry, startRig, until, type Rig } from '../outputs/helpers.ts';

const TOKEN = 'test-admin-token-0123456789';
let rig: Rig;
const extra: { close(): Promise<void> }[] = [];

before(async () => {
  rig = await startRig(1, {}, { adminToken: TOKEN });
  await until(() => rig.service.view.get(1)?.connected || undefined, 5000, 'deck 1 connected');
});
after(async () => {
  for (const e of extra) await e.close();
  await rig?.close();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
  token: string | null = TOKEN,
): Promise<{ status: number; json: Record<string, unknown> | undefined }> {
  const res = await fetch(rig.url + path, {
    method,
    headers: apiHeaders(body, token),
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

test('the monitor listens on loopback unless configured otherwise', () => {
  const parsed = configSchema.parse({ settings: {}, servers: [deckEntry(1, 9993)] });
  assert.equal(parsed.settings.listenAddress, '127.0.0.1');
  const address = rig.service.app.server.address();
  assert.ok(address && typeof address === 'object');
  assert.equal(address.address, '127.0.0.1');
});

test('add a device: validated, saved atomically, applied without a restart, and it connects', async () => {
  const sim = new HyperdeckSimulator({ port: 0, model: 'HyperDeck Studio HD Plus' });
  const port = await sim.start();
  extra.push(sim);
  const r = await call('POST', '/api/devices', {
    name: 'Deck B',
    type: 'tcp_recorder',
    ip: '127.0.0.1',
    port,
  });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  assert.equal(r.json?.['id'], 2);
  // On disk, complete and valid.
  const saved = loadMonitorConfig({ file: rig.configPath });
  assert.deepEqual(
    saved.servers.map((s) => s.name),
    ['Deck 1', 'Deck B'],
  );
  // Applied: the new deck connects; the first one is still there.
  await until(() => rig.service.view.get(2)?.connected || undefined, 5000, 'new deck connected');
  await until(() => rig.service.view.get(1)?.connected || undefined, 5000, 'deck 1 reconnected');
  // And it tests fine from the held connection.
  const t = await call('POST', '/api/devices/2/test', {});
  assert.equal(t.json?.['ok'], true, JSON.stringify(t.json));
});

test('invalid changes are refused with the field named, and nothing changes on disk or in memory', async () => {
  const before = readFileSync(rig.configPath, 'utf8');
  const bad = await call('PUT', '/api/config', {
    ...rig.service.config,
    settings: { ...rig.service.config.settings, updateIntervalMs: -5 },
  });
  assert.equal(bad.status, 400);
  assert.equal(bad.json?.['error'], 'CONFIG_INVALID');
  assert.match(String(bad.json?.['message']), /settings\.updateIntervalMs/);
  const dup = await call('POST', '/api/devices', { id: 1, name: 'x', type: 'tcp_recorder', ip: '127.0.0.1' });
  assert.equal(dup.status, 409);
  const unknownKey = await call('PATCH', '/api/devices/1', { colour: 'red' });
  assert.equal(unknownKey.status, 400);
  assert.equal(readFileSync(rig.configPath, 'utf8'), before);
  assert.equal(rig.service.config.servers.length, 2);
});

test('modify and remove devices; PATCH keeps the other fields', async () => {
  const r = await call('PATCH', '/api/devices/2', { name: 'Deck B renamed' });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(rig.service.view.get(2)?.name, 'Deck B renamed');
  assert.equal(rig.service.view.get(2)?.type, 'tcp_recorder');
  const del = await call('DELETE', '/api/devices/2');
  assert.equal(del.status, 204);
  assert.equal(rig.service.view.get(2), undefined);
  assert.deepEqual(
    loadMonitorConfig({ file: rig.configPath }).servers.map((s) => s.id),
    [1],
  );
  assert.equal((await call('DELETE', '/api/devices/1')).status, 409, 'the last device stays');
  assert.equal((await call('DELETE', '/api/devices/99')).status, 404);
});

test('test a connection: HyperDeck banner, vMix /api, a closed port', async () => {
  const deck = new HyperdeckSimulator({ port: 0, model: 'HyperDeck Studio Mini' });
  const deckPort = await deck.start();
  extra.push(deck);
  const d = await call('POST', '/api/test', { type: 'tcp_recorder', ip: '127.0.0.1', port: deckPort });
  assert.equal(d.json?.['ok'], true, JSON.stringify(d.json));
  assert.match(String(d.json?.['detail']), /HyperDeck Studio Mini, protocol 1\.\d+/);
  const vmix = new VmixSimulator({ host: '127.0.0.1', port: 0 });
  const vmixPort = await vmix.start();
  extra.push(vmix);
  const v = await call('POST', '/api/test', { type: 'http_mixer', ip: '127.0.0.1', port: vmixPort });
  assert.equal(v.json?.['ok'], true, JSON.stringify(v.json));
  assert.match(String(v.json?.['detail']), /^vMix \d+/);
  await deck.close();
  const closed = await call('POST', '/api/test', { type: 'tcp_recorder', ip: '127.0.0.1', port: deckPort });
  assert.equal(closed.json?.['ok'], false);
  assert.match(String(closed.json?.['detail']), /ECONNREFUSED/);
});

test('simulate a state: shown by every output as simulated, ends by itself or on DELETE; real input resumes', async () => {
  const r = await call('POST', '/api/devices/1/simulate', {
    state: 'rec',
    filename: 'SIM.mov',
    durationSec: 0.6,
  });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(r.json?.['state'], 'rec');
  assert.equal(r.json?.['simulated'], true);
  const h = (await (await fetch(`${rig.url}/health`)).json()) as { devices: { list: { state: string }[] } };
  assert.equal(h.devices.list[0]?.state, 'rec');
  await until(() => rig.service.view.get(1)?.simulated === undefined || undefined, 5000, 'simulation ended');
  assert.equal(rig.service.view.get(1)?.state, rig.service.monitor.store.get(1)?.state);
  await call('POST', '/api/devices/1/simulate', { state: 'play', timecode: '01:00:00:00' });
  assert.equal(rig.service.view.get(1)?.state, 'play');
  assert.equal((await call('DELETE', '/api/devices/1/simulate')).status, 204);
  assert.equal(rig.service.view.get(1)?.simulated, undefined);
  const bad = await call('POST', '/api/devices/1/simulate', { state: 'pause' });
  assert.equal(bad.status, 400);
  assert.equal((await call('POST', '/api/devices/77/simulate', { state: 'play' })).status, 404);
});

test('a configuration that cannot be saved is not applied (no success that a restart would undo)', async () => {
  const dir = tempDir('playout-unsaved-');
  const file = join(dir.path, 'plain-file');
  writeFileSync(file, 'x');
  const service = new PlayoutService({
    config: makeConfig([deckEntry(1, 1)], { emberPlusPort: 0 }),
    logger: silentLogger(),
    configPath: join(file, 'config.json'), // parent is a file: every write fails
  });
  await service.start({ http: 0, ember: 0 });
  try {
    const res = await service.app.inject({
      method: 'POST',
      url: '/api/devices',
      payload: { name: 'New', type: 'tcp_recorder', ip: '127.0.0.1', port: 2 },
    });
    assert.equal(res.statusCode, 500);
    assert.equal(service.config.servers.length, 1);
    assert.equal(service.view.list().length, 1);
  } finally {
    await service.close();
    dir.remove();
  }
});

test('fast-check: any body on the configuration endpoints is answered 4xx and changes nothing', async () => {
  const before = readFileSync(rig.configPath, 'utf8');
  const serversBefore = JSON.stringify(rig.service.config.servers);
  const auth = { authorization: `Bearer ${TOKEN}` };
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(
        ['PUT', '/api/config'],
        ['PUT', '/api/settings'],
        ['POST', '/api/devices'],
        ['PATCH', '/api/devices/1'],
        ['POST', '/api/devices/1/simulate'],
        ['POST', '/api/test'],
      ),
      fc.oneof(fc.anything(), fc.object(), fc.record({ settings: fc.anything(), servers: fc.anything() })),
      async ([method, url], body) => {
        const res = await rig.service.app.inject({
          method: method as 'PUT',
          url,
          headers: { ...auth, 'content-type': 'application/json' },
          payload: JSON.stringify(body) ?? 'null',
        });
        // 4xx, or 200 for a body that changes nothing (an empty settings object or device patch).
        const noop =
          res.statusCode === 200 &&
          (url === '/api/settings' || url === '/api/devices/1') &&
          JSON.stringify(rig.service.config.servers) === serversBefore;
        assert.ok(
          (res.statusCode >= 400 && res.statusCode < 500) || noop,
          `${method} ${url} → ${res.statusCode} ${res.body}`,
        );
      },
    ),
    { numRuns: 150 },
  );
  assert.equal(readFileSync(rig.configPath, 'utf8'), before, 'the file was not rewritten');
  assert.equal(JSON.stringify(rig.service.config.servers), serversBefore);
});
