import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import {
  deckEntry,
  health,
  healthState,
  makeConfig,
  startMonitor,
  waitDevice,
  type MonitorRig,
} from '../helpers.ts';

let monitor: MonitorRig;
let url: string;
let sim: HyperdeckSimulator;
let squatter: Socket | undefined;
const RECONNECT_MAX_MS = 400;

before(async () => {
  sim = new HyperdeckSimulator({ port: 0, videoFormat: '1080i50' });
  const port = await sim.start();
  // Another client (an ATEM, Companion) holds the single connection before the monitor starts.
  squatter = connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve) => squatter!.once('data', () => resolve()));
  const started = await startMonitor(
    makeConfig([{ ...deckEntry(9, port, 'Deck'), reconnectMaxMs: RECONNECT_MAX_MS }]),
  );
  monitor = started.monitor;
  url = started.url;
});

after(async () => {
  squatter?.destroy();
  await sim?.close();
  await monitor?.close();
});

test('120 connection rejected shows clearly as the offline reason; the monitor gets in once the deck is free', async () => {
  const d = await waitDevice(monitor, 9, (s) => s.reason === 'connection rejected (120)');
  assert.equal(d.state, 'offline');
  assert.equal(d.connected, false);
  squatter?.destroy();
  squatter = undefined;
  await waitDevice(monitor, 9, (s) => s.connected && s.state === 'stop', 3000);
  // The conversation: notifications on, watchdog, transport info, clip list.
  await waitDevice(monitor, 9, () => sim.commands.includes('clips get'));
  assert.ok(sim.commands.includes('notify: transport: true'), sim.commands.join(' | '));
  assert.ok(sim.commands.includes('notify: slot: true'), sim.commands.join(' | '));
  assert.ok(sim.commands.includes('watchdog: period: 3'), sim.commands.join(' | '));
  assert.ok(sim.commands.includes('transport info'));
});

test('play, stop (exact timecode) and record reach the state, file name and /health', async () => {
  await waitDevice(monitor, 9, (s) => s.connected);
  sim.play(2);
  let d = await waitDevice(monitor, 9, (s) => s.state === 'play' && s.filename === 'B-Roll 02.mov');
  assert.equal(d.framerate, 25);
  assert.equal(d.durationMs, 30_000);
  assert.equal((await healthState(url, 9))?.state, 'play');
  sim.stop(50);
  d = await waitDevice(monitor, 9, (s) => s.state === 'stop' && s.timecode === '00:02:02:00');
  assert.equal(d.filename, 'B-Roll 02.mov');
  assert.equal(d.positionMs, 2000);
  assert.equal(d.remainingMs, 28_000);
  assert.equal((await healthState(url, 9))?.state, 'stop');
  sim.record();
  d = await waitDevice(monitor, 9, (s) => s.state === 'rec' && s.filename === 'Capture_0003.mov');
  assert.equal((await healthState(url, 9))?.state, 'rec');
  sim.stop();
  await waitDevice(monitor, 9, (s) => s.state === 'stop');
});

test('split writes and malformed lines: state still arrives, problems counted, connection kept', async () => {
  const connectsBefore = sim.commands.filter((c) => c.startsWith('notify')).length;
  sim.splitWrites = true;
  sim.sendMalformed('unknown-line');
  sim.sendMalformed('long-line');
  sim.sendMalformed('bad-block');
  sim.play(1, 25);
  await waitDevice(monitor, 9, (s) => s.state === 'play' && s.filename === 'Interview_A.mov');
  sim.stop(250);
  await waitDevice(monitor, 9, (s) => s.state === 'stop' && s.timecode === '00:00:10:00');
  sim.splitWrites = false;
  const h = await health(url);
  assert.ok((h.inputs.malformed['hyperdeck-unknown-line'] ?? 0) >= 1, JSON.stringify(h.inputs.malformed));
  assert.ok((h.inputs.malformed['hyperdeck-line-too-long'] ?? 0) >= 1, JSON.stringify(h.inputs.malformed));
  assert.ok((h.inputs.malformed['hyperdeck-bad-parameter'] ?? 0) >= 1, JSON.stringify(h.inputs.malformed));
  assert.equal(sim.commands.filter((c) => c.startsWith('notify')).length, connectsBefore, 'no reconnect');
});

test('a deck that disappears is offline at once, and comes back by itself', async () => {
  sim.play(1);
  await waitDevice(monitor, 9, (s) => s.state === 'play');
  await sim.offline();
  // A closed socket is seen at once; the margin is for a loaded CI machine.
  const off = await waitDevice(monitor, 9, (s) => s.state === 'offline', 5000);
  assert.equal(off.connected, false);
  // Closed, or reset when the deck went with a request of ours unread; refused if it was already gone.
  assert.match(off.reason ?? '', /^connection (closed|reset|refused)$/);
  assert.deepEqual(await healthState(url, 9), {
    id: 9,
    name: 'Deck',
    type: 'tcp_recorder',
    connected: false,
    state: 'offline',
  });
  // While it is away the reconnect attempts are refused (backoff, capped).
  await new Promise((r) => setTimeout(r, RECONNECT_MAX_MS));
  await sim.online();
  await waitDevice(monitor, 9, (s) => s.connected && s.state === 'play', RECONNECT_MAX_MS * 1.2 + 6000);
});

test('a deck that stops answering (socket still open) is offline within its timeout, and comes back', async () => {
  await waitDevice(monitor, 9, (s) => s.connected);
  const t0 = Date.now();
  sim.freeze(true);
  const off = await waitDevice(monitor, 9, (s) => s.state === 'offline', 1500 + 1000 + 3000);
  assert.ok(Date.now() - t0 >= 1400, 'not before the timeout');
  assert.equal(off.reason, 'no reply for 1500 ms');
  sim.freeze(false);
  // Worst case: a connect just before the thaw waits timeoutMs for its banner, then backs off once.
  await waitDevice(monitor, 9, (s) => s.connected, 1500 + RECONNECT_MAX_MS * 1.2 + 6000);
});
