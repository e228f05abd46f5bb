// Per-input mixer tally on the outputs: a vMix simulator (TCP API and HTTP) feeds the whole service; TSL UMD
// datagrams are decoded here byte by byte (not with the sender's own decoder), the WebSocket is read as a
// page reads it, Ember+ by emberplus-connection's consumer.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { timingBound } from '@broadcast-ops/core/testing';
import { EmberClient, Model } from 'emberplus-connection';
import { WebSocket } from 'ws';
import { PlayoutService } from '../../src/playout-service.ts';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
import type { OutputDevice } from '../../src/domain/output-view.ts';
import { makeConfig, vmixEntry } from '../helpers.ts';
import { udpReceiver, until } from '../outputs/helpers.ts';

const POLL_MS = 100;
let sim: VmixSimulator;
let service: PlayoutService;
let rx: Awaited<ReturnType<typeof udpReceiver>>;
let ws: WebSocket;
const wsDevices: { atMs: number; device: OutputDevice }[] = [];
let ember: EmberClient;
let emberTally: Model.NumberedTreeNode<Model.Parameter>;
const emberValues: { atMs: number; value: string }[] = [];

/**
 * TSL UMD v5.0 over UDP, read straight from the protocol document's byte layout (section V5.0): PBC u16 LE
 * (bytes after it), VER u8, FLAGS u8 (bit 0 = UTF-16LE text), SCREEN u16 LE, then DMSGs of INDEX u16 LE,
 * CONTROL u16 LE, LENGTH u16 LE, TEXT. Independent of src/protocol/tsl-umd.ts on purpose.
 */
function readTsl(b: Buffer): { index: number; control: number; text: string }[] {
  assert.equal(b.readUInt16LE(0), b.length - 2, 'PBC counts the bytes after it');
  assert.equal(b[2], 0, 'VER 0');
  const utf16 = ((b[3] ?? 0) & 1) === 1;
  const out: { index: number; control: number; text: string }[] = [];
  for (let off = 6; off < b.length;) {
    const len = b.readUInt16LE(off + 4);
    out.push({
      index: b.readUInt16LE(off),
      control: b.readUInt16LE(off + 2),
      text: b.subarray(off + 6, off + 6 + len).toString(utf16 ? 'utf16le' : 'latin1'),
    });
    off += 6 + len;
  }
  return out;
}

/** The last display of `index` received at or after `sinceMs`. */
function lastDisplay(
  index: number,
  sinceMs = 0,
): { control: number; text: string; atMs: number } | undefined {
  for (let i = rx.packets.length - 1; i >= 0; i--) {
    const p = rx.packets[i];
    if (!p || p.atMs < sinceMs) break;
    const m = readTsl(p.data).find((x) => x.index === index);
    if (m) return { control: m.control, text: m.text, atMs: p.atMs };
  }
  return undefined;
}

// Control words (bits 0-1 RH, 2-3 text, 6-7 brightness; 1 red, 2 green): docs/TALLY.md, "Outputs".
const RED = 0xc5;
const GREEN = 0xca;
const OFF = 0xc0;
const UNKNOWN = 0x40;

before(async () => {
  sim = new VmixSimulator({ tcpPort: 0 });
  await sim.start();
  rx = await udpReceiver();
  const config = makeConfig(
    [
      vmixEntry(1, sim, {
        pollIntervalMs: POLL_MS,
        tallyInputs: [
          { key: sim.keyOf(1), tslIndex: 101 },
          { key: sim.keyOf(2), tslIndex: 102, name: 'VT' },
          { key: sim.keyOf(3), tslIndex: 103 },
        ],
      }),
    ],
    { emberPlusPort: 0, tslUmdDestinations: [{ host: '127.0.0.1', port: rx.port }] },
  );
  service = new PlayoutService({ config, logger: silentLogger(), tslRefreshMs: 50 });
  const started = await service.start({ http: 0, ember: 0 });
  ws = new WebSocket(started.httpUrl.replace(/^http/, 'ws') + '/ws');
  ws.on('message', (raw: Buffer) => {
    const m = JSON.parse(raw.toString()) as { type: string; data: OutputDevice | OutputDevice[] };
    const list =
      m.type === 'playoutStates'
        ? (m.data as OutputDevice[])
        : m.type === 'deviceState'
          ? [m.data as OutputDevice]
          : [];
    for (const device of list) wsDevices.push({ atMs: performance.now(), device });
  });
  await new Promise((resolve) => ws.once('open', resolve));
  ember = new EmberClient('127.0.0.1', started.emberPort);
  ember.on('error', () => undefined);
  await ember.connect();
  await (
    await ember.getDirectory(ember.tree)
  ).response;
  const el = await ember.getElementByPath('Devices.Device_1.Tally');
  assert.ok(el && el.contents.type === Model.ElementType.Parameter, 'Devices.Device_1.Tally is a parameter');
  emberTally = el as Model.NumberedTreeNode<Model.Parameter>;
  await (
    await ember.subscribe(emberTally, (n) =>
      emberValues.push({ atMs: performance.now(), value: String((n.contents as Model.Parameter).value) }),
    )
  ).response;
});

/** The tally of `key` in the Ember+ Tally parameter's last value (`<key>=<tally>;…`). */
function emberTallyOf(key: string): string | undefined {
  const v = emberValues.at(-1)?.value ?? String(emberTally.contents.value ?? '');
  return v
    .split(';')
    .map((pair) => pair.split('='))
    .find(([k]) => k === key)?.[1];
}

after(async () => {
  await ember?.disconnect();
  ember?.discard();
  ws?.close();
  await service?.close();
  await sim?.close();
  await rx?.close();
});

function wsTally(key: string): string | undefined {
  for (let i = wsDevices.length - 1; i >= 0; i--) {
    const t = wsDevices[i]?.device.inputs?.find((x) => x.key === key);
    if (t) return t.tally;
  }
  return undefined;
}

test('TSL: one index per mapped input, program red, preview green, off; the mixer keeps its own index', async () => {
  sim.cut(1);
  sim.previewInput(2);
  const since = performance.now();
  await until(
    () =>
      lastDisplay(101, since)?.control === RED &&
      lastDisplay(102, since)?.control === GREEN &&
      lastDisplay(103, since)?.control === OFF,
    5000,
    'input displays',
  );
  assert.equal(lastDisplay(101)?.text, 'Camera 1', "the input's title");
  assert.equal(lastDisplay(102)?.text, 'VT', 'the configured name');
  assert.equal(lastDisplay(1)?.text, 'vMix', 'the device display is still there');
  // The same on the WebSocket, keyed by GUID.
  await until(() => wsTally(sim.keyOf(1)) === 'program' && wsTally(sim.keyOf(2)) === 'preview', 5000, 'ws');
  // And on Ember+ (Devices/Device_1/Tally), keyed by GUID too.
  await until(
    () => emberTallyOf(sim.keyOf(1)) === 'program' && emberTallyOf(sim.keyOf(2)) === 'preview',
    5000,
    'Ember+',
  );
  assert.equal(emberTallyOf(sim.keyOf(3)), 'off');
});

test('TSL follows the key across a renumbering, and a layer of program is red', async () => {
  const cam = sim.keyOf(1);
  sim.layer(1, 0, 3);
  await until(() => lastDisplay(103, performance.now() - 10)?.control === RED, 5000, 'layer red');
  sim.moveInput(1, 3); // Camera 1 is now input 3, the Black colour input 2
  assert.equal(sim.keyOf(3), cam);
  const since = performance.now();
  await until(() => lastDisplay(101, since)?.control === RED, 5000, 'index 101 still red');
  assert.equal(lastDisplay(101, since)?.text, 'Camera 1');
  sim.moveInput(3, 1);
  sim.layer(1, 0, undefined);
});

test('fade to black: every mapped input off on TSL and the WebSocket, preview stays green', async () => {
  sim.cut(1);
  sim.previewInput(2);
  await until(() => lastDisplay(101, performance.now() - 10)?.control === RED, 5000, 'red first');
  sim.fadeToBlack(true);
  const since = performance.now();
  await until(
    () => lastDisplay(101, since)?.control === OFF && lastDisplay(102, since)?.control === GREEN,
    5000,
    'FTB',
  );
  await until(
    () => wsDevices.at(-1)?.device.fadeToBlack === true && wsTally(sim.keyOf(1)) === 'off',
    5000,
    'ws FTB',
  );
  sim.fadeToBlack(false);
  await until(() => lastDisplay(101, performance.now() - 10)?.control === RED, 5000, 'red again');
});

test('vMix stopped: TSL (decoded here) and the WebSocket show every mapped input unknown within the bound', async (t) => {
  await until(() => lastDisplay(101, performance.now() - 10)?.control === RED, 5000, 'red before');
  const t0 = performance.now();
  await sim.offline();
  const dims = await until(
    () => {
      const d = [101, 102, 103].map((i) => lastDisplay(i, t0));
      return d.every((x) => x?.control === UNKNOWN) ? d : undefined;
    },
    5000,
    'dimmed',
  );
  const tslMs = Math.min(...dims.map((d) => (d?.atMs ?? 0) - t0));
  const wsAt = await until(
    () => wsDevices.find((w) => w.atMs >= t0 && w.device.inputs?.every((i) => i.tally === 'unknown'))?.atMs,
    5000,
    'ws unknown',
  );
  const wsMs = wsAt - t0;
  const emberAt = await until(
    () =>
      emberValues.find(
        (e) =>
          e.atMs >= t0 && e.value !== '' && e.value.split(';').every((pair) => pair.endsWith('=unknown')),
      )?.atMs,
    5000,
    'Ember+ unknown',
  );
  const emberMs = emberAt - t0;
  t.diagnostic(
    `TSL unknown after ${tslMs.toFixed(1)} ms, WebSocket after ${wsMs.toFixed(1)} ms, Ember+ after ${emberMs.toFixed(1)} ms`,
  );
  assert.ok(emberMs < (await timingBound(2 * POLL_MS)), `Ember+: ${emberMs.toFixed(1)} ms`);
  // Documented bound: two poll intervals (docs/TALLY.md "Stale"); the WebSocket coalesces to updateIntervalMs.
  const bound = await timingBound(2 * POLL_MS);
  assert.ok(tslMs < bound, `TSL: ${tslMs.toFixed(1)} ms, bound ${bound.toFixed(1)}`);
  assert.ok(wsMs < bound + 100, `WebSocket: ${wsMs.toFixed(1)} ms, bound ${(bound + 100).toFixed(1)}`);
  // No colour afterwards: every later packet for the inputs is dimmed.
  await new Promise((r) => setTimeout(r, 3 * POLL_MS));
  for (const i of [101, 102, 103]) assert.equal(lastDisplay(i)?.control, UNKNOWN);
  await sim.online();
});

test('configuration: a TSL index already used by a device or another input is refused', () => {
  assert.throws(
    () =>
      makeConfig([
        { id: 1, name: 'a', type: 'http_mixer', ip: '127.0.0.1', tallyInputs: [{ key: 'k1', tslIndex: 2 }] },
        { id: 2, name: 'b', type: 'http_mixer', ip: '127.0.0.2' },
      ]),
    /TSL index 2 is already a device id/,
  );
  assert.throws(
    () =>
      makeConfig([
        {
          id: 1,
          name: 'a',
          type: 'http_mixer',
          ip: '127.0.0.1',
          tallyInputs: [
            { key: 'k1', tslIndex: 5 },
            { key: 'k2', tslIndex: 5 },
          ],
        },
      ]),
    /TSL index 5/,
  );
});
