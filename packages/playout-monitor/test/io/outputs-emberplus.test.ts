import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { EmberClient, Model } from 'emberplus-connection';
import { requireTool, tempDir } from '@broadcast-ops/core/testing';
import { VERSION } from '../../src/version.ts';
import { startRig, until, type Rig } from '../outputs/helpers.ts';

type Param = Model.Parameter;

let rig: Rig;
let client: EmberClient;
/** Every byte between the consumer and the provider, in order, for the tshark check. */
const exchange: { fromClient: boolean; data: Buffer }[] = [];
let proxy: Server;
const proxied = new Set<Socket>();

before(async () => {
  rig = await startRig(2);
  // A recording TCP proxy in front of the provider (the consumer talks through it).
  proxy = createServer((downstream) => {
    const upstream = connect({ host: '127.0.0.1', port: rig.emberPort });
    proxied.add(downstream).add(upstream);
    downstream.on('data', (d: Buffer) => {
      exchange.push({ fromClient: true, data: d });
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      exchange.push({ fromClient: false, data: d });
      downstream.write(d);
    });
    downstream.on('close', () => upstream.destroy());
    upstream.on('close', () => downstream.destroy());
    downstream.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
  const address = proxy.address();
  client = new EmberClient('127.0.0.1', typeof address === 'object' && address ? address.port : 0);
  client.on('error', () => undefined);
  await client.connect();
  await until(() => rig.service.view.get(1)?.connected || undefined, 5000, 'deck 1 connected');
});

after(async () => {
  await client?.disconnect();
  client?.discard();
  for (const s of proxied) s.destroy();
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
  await rig?.close();
});

async function param(path: string): Promise<Model.NumberedTreeNode<Param>> {
  const el = await client.getElementByPath(path);
  assert.ok(el, `no element ${path}`);
  assert.equal(el.contents.type, Model.ElementType.Parameter, path);
  return el as Model.NumberedTreeNode<Param>;
}

test('the consumer sees exactly the spec tree: Info/Version and Devices/Device_<id>/{State,Timecode,Filename,Connected,Type}', async () => {
  const root = await (await client.getDirectory(client.tree)).response;
  assert.ok(root);
  const top = Object.values(client.tree).map((n) => (n.contents as Model.EmberNode).identifier);
  assert.deepEqual(top.sort(), ['Devices', 'Info']);
  const version = await param('Info.Version');
  assert.equal(version.contents.value, VERSION);
  assert.equal(version.contents.parameterType, Model.ParameterType.String);
  const devices = await client.getElementByPath('Devices');
  assert.ok(devices);
  await (
    await client.getDirectory(devices as Model.NumberedTreeNode<Model.EmberElement>)
  ).response;
  const names = Object.values(devices.children ?? {}).map((n) => (n.contents as Model.EmberNode).identifier);
  assert.deepEqual(names.sort(), ['Device_1', 'Device_2']);
  for (const id of [1, 2]) {
    const node = await client.getElementByPath(`Devices.Device_${id}`);
    assert.ok(node && 'number' in node);
    await (
      await client.getDirectory(node as Model.NumberedTreeNode<Model.EmberElement>)
    ).response;
    assert.equal(
      (node as Model.NumberedTreeNode<Model.EmberNode>).number,
      id,
      'node number = configuration id',
    );
    assert.equal((node.contents as Model.EmberNode).description, `Deck ${id}`);
    const kids = Object.values(node.children ?? {}).map((n) => [
      (n as Model.NumberedTreeNode<Param>).number,
      (n.contents as Param).identifier,
    ]);
    assert.deepEqual(kids, [
      [1, 'State'],
      [2, 'Timecode'],
      [3, 'Filename'],
      [4, 'Connected'],
      [5, 'Type'],
    ]);
    const shown = rig.service.view.get(id)!;
    assert.equal((await param(`Devices.Device_${id}.State`)).contents.value, shown.state);
    assert.match(
      String((await param(`Devices.Device_${id}.Timecode`)).contents.value),
      /^\d\d:\d\d:\d\d:\d\d$/,
    );
    assert.equal((await param(`Devices.Device_${id}.Filename`)).contents.value, shown.filename);
    const connected = await param(`Devices.Device_${id}.Connected`);
    assert.equal(connected.contents.parameterType, Model.ParameterType.Boolean);
    assert.equal(connected.contents.value, true);
    assert.equal((await param(`Devices.Device_${id}.Type`)).contents.value, 'tcp_recorder');
    for (const n of Object.values(node.children ?? {})) {
      assert.equal((n.contents as Param).access, Model.ParameterAccess.Read);
    }
  }
});

test('a subscribed consumer sees State and Timecode change when the deck plays', async () => {
  const state = await param('Devices.Device_1.State');
  const timecode = await param('Devices.Device_1.Timecode');
  const states: unknown[] = [];
  const codes: unknown[] = [];
  await (
    await client.subscribe(state, (n) => states.push((n.contents as Param).value))
  ).response;
  await (
    await client.subscribe(timecode, (n) => codes.push((n.contents as Param).value))
  ).response;
  rig.sims[0]!.play(1);
  await until(() => states.includes('play') || undefined, 3000, 'State = play');
  await until(() => codes.length >= 2 || undefined, 3000, 'Timecode moving');
  assert.equal(state.contents.value, 'play');
  rig.sims[0]!.stop();
  await until(() => states.at(-1) === 'stop' || undefined, 3000, 'State = stop');
});

test('writes are refused: the provider answers with the unchanged value and keeps it', async () => {
  const type = await param('Devices.Device_2.Type');
  const answer = await (await client.setValue(type, 'hacked')).response;
  const value = answer && 'contents' in answer ? answer.contents.value : undefined;
  assert.equal(value, 'tcp_recorder');
  const other = new EmberClient('127.0.0.1', rig.emberPort);
  other.on('error', () => undefined);
  await other.connect();
  try {
    await (
      await other.getDirectory(other.tree)
    ).response;
    const fresh = await other.getElementByPath('Devices.Device_2.Type');
    assert.equal((fresh?.contents as Param).value, 'tcp_recorder', 'a second consumer reads the old value');
    const version = await other.getElementByPath('Info.Version');
    assert.ok(version);
    const refused = await (await other.setValue(version as Model.NumberedTreeNode<Param>, '9.9.9')).response;
    assert.equal(refused && 'contents' in refused ? refused.contents.value : undefined, VERSION);
  } finally {
    await other.disconnect();
    other.discard();
  }
});

test("tshark's S101/Glow dissectors decode the captured exchange without errors", () => {
  requireTool('tshark');
  const text2pcap = requireTool('text2pcap');
  assert.ok(exchange.length > 4, 'an exchange was captured');
  const dir = tempDir('ember-capture-');
  try {
    // text2pcap input: one packet per TCP segment as read; I = consumer → provider, O = the reverse.
    const lines: string[] = [];
    for (const seg of exchange) {
      for (let off = 0; off < seg.data.length; off += 1400) {
        const chunk = seg.data.subarray(off, off + 1400);
        lines.push(seg.fromClient ? 'I' : 'O');
        for (let i = 0; i < chunk.length; i += 16) {
          const row = [...chunk.subarray(i, i + 16)].map((b) => b.toString(16).padStart(2, '0')).join(' ');
          lines.push(`${i.toString(16).padStart(6, '0')} ${row}`);
        }
      }
    }
    const hexFile = join(dir.path, 'exchange.txt');
    const pcap = join(dir.path, 'exchange.pcap');
    writeFileSync(hexFile, lines.join('\n') + '\n');
    execFileSync(text2pcap, ['-q', '-D', '-4', '10.0.0.1,10.0.0.2', '-T', '50000,9000', hexFile, pcap]);
    const fields = execFileSync(
      'tshark',
      [
        '-r',
        pcap,
        '-d',
        'tcp.port==9000,s101',
        '-T',
        'fields',
        '-e',
        'glow.identifier',
        '-e',
        'glow.string',
        '-e',
        'glow.description',
      ],
      { encoding: 'utf8' },
    );
    for (const id of [
      'Info',
      'Version',
      'Devices',
      'Device_1',
      'Device_2',
      'State',
      'Timecode',
      'Filename',
      'Connected',
      'Type',
    ]) {
      assert.ok(fields.includes(id), `tshark decoded identifier ${id}`);
    }
    assert.ok(fields.includes(VERSION), 'the Version string value');
    assert.ok(fields.includes('Deck 1'), 'the device description');
    assert.ok(fields.includes('tcp_recorder'), 'the Type string value');
    const problems = execFileSync(
      'tshark',
      [
        '-r',
        pcap,
        '-d',
        'tcp.port==9000,s101',
        '-Y',
        '_ws.malformed || _ws.expert.severity >= error',
        '-T',
        'fields',
        '-e',
        'frame.number',
      ],
      { encoding: 'utf8' },
    ).trim();
    assert.equal(problems, '', `malformed or error frames: ${problems}`);
    const s101 = execFileSync(
      'tshark',
      ['-r', pcap, '-d', 'tcp.port==9000,s101', '-Y', 's101', '-T', 'fields', '-e', 'frame.number'],
      {
        encoding: 'utf8',
      },
    ).trim();
    assert.ok(s101.split('\n').length >= 4, 'S101 frames recognised');
  } finally {
    dir.remove();
  }
});

test('shutdown closes the listener and the consumers’ connections too', async () => {
  const own = await startRig(1);
  const consumer = new EmberClient('127.0.0.1', own.emberPort);
  consumer.on('error', () => undefined);
  await consumer.connect();
  await (
    await consumer.getDirectory(consumer.tree)
  ).response;
  // The library's client reconnects after a remote close and keeps its keep-alive timer: turn both off
  // so only the provider's behaviour is observed.
  const s101 = (
    consumer as unknown as {
      _client: {
        _autoReconnect: boolean;
        _shouldBeConnected: boolean;
        keepaliveIntervalTimer?: NodeJS.Timeout;
      };
    }
  )._client;
  s101._autoReconnect = false;
  s101._shouldBeConnected = false;
  const gone = new Promise<void>((resolve) => consumer.once('disconnected', () => resolve()));
  await own.close();
  await gone;
  clearInterval(s101.keepaliveIntervalTimer);
  consumer.discard();
  const probe = connect({ host: '127.0.0.1', port: own.emberPort });
  const refused = await new Promise<boolean>((resolve) => {
    probe.once('error', () => resolve(true));
    probe.once('connect', () => resolve(false));
  });
  probe.destroy();
  assert.equal(refused, true, 'nothing listens any more');
});
