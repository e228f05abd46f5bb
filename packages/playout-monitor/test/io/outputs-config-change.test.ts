// A configuration change applied per device: with every device playing (HyperDeck simulators as real
// TCP peers), renaming one device, changing updateIntervalMs and adding a device must not show an
// untouched device offline or with an empty file name on any output (TSL, WebSocket, Ember+), and the
// untouched decks keep their one connection.
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { EmberClient, Model } from 'emberplus-connection';
import { WebSocket } from 'ws';
import { expectDecoded } from '@broadcast-ops/core/testing';
import type { MonitorConfig } from '../../src/config.ts';
import { decodeTslPacket, encodeTslPacket, tallyForState } from '../../src/protocol/tsl-umd.ts';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import { deckEntry, startRig, udpReceiver, until, type Rig } from '../outputs/helpers.ts';

type Param = Model.Parameter;
const IDS = [1, 2, 3];

let rig: Rig;
let rx: Awaited<ReturnType<typeof udpReceiver>>;
let client: EmberClient;
let ws: WebSocket;
const wsMsgs: { type: string; data?: unknown }[] = [];
const emberValues: { id: number; field: string; value: unknown }[] = [];
const extra: HyperdeckSimulator[] = [];

const OFFLINE_CONTROL = (() => {
  const d = expectDecoded(
    decodeTslPacket(encodeTslPacket(0, [{ index: 1, display: tallyForState('offline'), text: 'x' }])),
  );
  return d.messages[0]!.control;
})();

before(async () => {
  rx = await udpReceiver();
  rig = await startRig(3, { tslUmdDestinations: [{ host: '127.0.0.1', port: rx.port }] });
  for (const sim of rig.sims) sim.play(1);
  await until(
    () => IDS.every((id) => rig.service.view.get(id)?.state === 'play' && rig.service.view.get(id)?.filename),
    10_000,
    'every deck playing with a file name',
  );
  ws = new WebSocket(rig.url.replace(/^http/, 'ws') + '/ws');
  ws.on('message', (d: Buffer) => wsMsgs.push(JSON.parse(d.toString('utf8')) as { type: string }));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  client = new EmberClient('127.0.0.1', rig.emberPort);
  client.on('error', () => undefined);
  await client.connect();
  await (
    await client.getDirectory(client.tree)
  ).response;
  const devices = await client.getElementByPath('Devices');
  assert.ok(devices);
  await (
    await client.getDirectory(devices as Model.NumberedTreeNode<Model.EmberElement>)
  ).response;
  for (const id of IDS) {
    const node = await client.getElementByPath(`Devices.Device_${id}`);
    assert.ok(node);
    await (
      await client.getDirectory(node as Model.NumberedTreeNode<Model.EmberElement>)
    ).response;
    for (const field of ['State', 'Filename', 'Connected']) {
      const el = await client.getElementByPath(`Devices.Device_${id}.${field}`);
      assert.ok(el, `Device_${id}.${field}`);
      await (
        await client.subscribe(el as Model.NumberedTreeNode<Param>, (n) =>
          emberValues.push({ id, field, value: (n.contents as Param).value }),
        )
      ).response;
    }
  }
});

after(async () => {
  ws?.close();
  await client?.disconnect();
  client?.discard();
  await rx?.close();
  await rig?.close();
  for (const s of extra) await s.close();
});

function connections(sim: HyperdeckSimulator): number {
  // The monitor sends one `watchdog` per connection, right after the banner.
  return sim.commands.filter((c) => c.startsWith('watchdog')).length;
}

test('rename, updateIntervalMs and an added device: no untouched device blinks on any output', async () => {
  const before = rig.sims.map(connections);
  const firstPacket = rx.packets.length;
  const firstWs = wsMsgs.length;
  const firstEmber = emberValues.length;
  const added = new HyperdeckSimulator({ port: 0 });
  extra.push(added);
  const addedPort = await added.start();
  const cfg = rig.service.config;
  const next: MonitorConfig = {
    ...cfg,
    settings: { ...cfg.settings, updateIntervalMs: cfg.settings.updateIntervalMs + 150 },
    servers: [
      ...cfg.servers.map((s) => (s.id === 2 ? { ...s, name: 'Deck Two' } : s)),
      deckEntry(4, addedPort) as MonitorConfig['servers'][number],
    ],
  };
  const res = await fetch(`${rig.url}/api/config`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(next),
  });
  assert.equal(res.status, 200, await res.text());
  await until(() => rig.service.view.get(4)?.connected, 5000, 'the added deck connected');
  await until(
    () => rx.packets.slice(firstPacket).some((p) => p.data.includes(Buffer.from('Deck Two'))),
    5000,
    'the new name on TSL',
  );
  // Watch the outputs a while longer (TSL refresh round-robin, WebSocket updates at the new interval).
  await new Promise((r) => setTimeout(r, 1500));

  // Saved, and applied.
  const saved = JSON.parse(readFileSync(rig.configPath, 'utf8')) as MonitorConfig;
  assert.equal(saved.servers.find((s) => s.id === 2)?.name, 'Deck Two');
  assert.equal(saved.servers.length, 4);
  assert.equal(rig.service.view.get(2)?.name, 'Deck Two');
  for (const id of IDS) assert.equal(rig.service.view.get(id)?.state, 'play', `device ${id} still playing`);

  // The untouched and the renamed decks kept their connection (no reconnect, no `120` race).
  assert.deepEqual(rig.sims.map(connections), before, 'no deck reconnected');

  // TSL: every packet for devices 1-3 after the change still shows them on (never the offline tally).
  let tslSeen = 0;
  for (const p of rx.packets.slice(firstPacket)) {
    const d = expectDecoded(decodeTslPacket(p.data));
    for (const m of d.messages) {
      if (!IDS.includes(m.index)) continue;
      tslSeen++;
      assert.notEqual(m.control, OFFLINE_CONTROL, `TSL index ${m.index} shown offline`);
      assert.notEqual(m.text, '', `TSL index ${m.index} with no text`);
    }
  }
  assert.ok(tslSeen > 0, 'TSL kept sending for the untouched devices');

  // WebSocket: no snapshot or update shows devices 1-3 offline or without a file name.
  const wsDevices: { id: number; state: string; filename: string; connected: boolean }[] = [];
  for (const m of wsMsgs.slice(firstWs)) {
    if (m.type === 'playoutStates') wsDevices.push(...(m.data as typeof wsDevices));
    if (m.type === 'deviceState') wsDevices.push(m.data as (typeof wsDevices)[number]);
  }
  assert.ok(wsDevices.some((d) => d.id === 2 && (d as unknown as { name: string }).name === 'Deck Two'));
  for (const d of wsDevices.filter((x) => IDS.includes(x.id))) {
    assert.notEqual(d.state, 'offline', `WebSocket shows device ${d.id} offline`);
    assert.equal(d.connected, true, `WebSocket shows device ${d.id} disconnected`);
    assert.notEqual(d.filename, '', `WebSocket shows device ${d.id} with no file name`);
  }

  // Ember+: no State offline, no empty Filename, no Connected false for devices 1-3.
  for (const v of emberValues.slice(firstEmber)) {
    if (v.field === 'State') assert.notEqual(v.value, 'offline', `Ember+ Device_${v.id} offline`);
    if (v.field === 'Filename') assert.notEqual(v.value, '', `Ember+ Device_${v.id} empty file name`);
    if (v.field === 'Connected') assert.notEqual(v.value, false, `Ember+ Device_${v.id} disconnected`);
  }
});

test('re-addressing a device reconnects only that device', async () => {
  const before = rig.sims.map(connections);
  const moved = new HyperdeckSimulator({ port: 0 });
  extra.push(moved);
  const movedPort = await moved.start();
  moved.play(1);
  const cfg = rig.service.config;
  const next: MonitorConfig = {
    ...cfg,
    servers: cfg.servers.map((s) => (s.id === 3 ? { ...s, port: movedPort } : s)),
  };
  const res = await fetch(`${rig.url}/api/config`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(next),
  });
  assert.equal(res.status, 200, await res.text());
  await until(() => connections(moved) === 1 || undefined, 5000, 'the moved deck connected at its new port');
  await until(() => rig.service.view.get(3)?.state === 'play' || undefined, 5000, 'device 3 playing again');
  const afterCounts = rig.sims.map(connections);
  assert.equal(afterCounts[0], before[0], 'deck 1 kept its connection');
  assert.equal(afterCounts[1], before[1], 'deck 2 kept its connection');
  assert.equal(rig.service.view.get(1)?.state, 'play');
  assert.equal(rig.service.view.get(2)?.state, 'play');
});

test('a change that cannot be applied (its OSC port is taken) is refused and not saved', async () => {
  const holder = createSocket('udp4');
  await new Promise<void>((resolve) => holder.bind(0, '0.0.0.0', () => resolve()));
  const taken = holder.address().port;
  try {
    const fileBefore = readFileSync(rig.configPath, 'utf8');
    const cfg = rig.service.config;
    const next = {
      ...cfg,
      servers: [...cfg.servers, { id: 9, name: 'Caspar', type: 'osc_player', ip: '127.0.0.9', port: taken }],
    };
    const res = await fetch(`${rig.url}/api/config`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(next),
    });
    const body = (await res.json()) as { error: string; message: string };
    assert.equal(res.status, 409, JSON.stringify(body));
    assert.equal(body.error, 'CONFIG_NOT_APPLICABLE');
    assert.match(body.message, new RegExp(`OSC port ${taken}`));
    assert.equal(readFileSync(rig.configPath, 'utf8'), fileBefore, 'the file is unchanged');
    assert.equal(rig.service.view.get(9), undefined, 'nothing applied');
    assert.equal(rig.service.view.get(1)?.state, 'play');
  } finally {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
  }
});
