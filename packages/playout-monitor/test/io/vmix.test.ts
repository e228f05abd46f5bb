import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
import { health, healthState, makeConfig, startMonitor, waitDevice, type MonitorRig } from '../helpers.ts';

const POLL_MS = 100;
const TIMEOUT_MS = 300;
// Offline after 3 consecutive failures: at most 3 × (poll interval + timeout).
const OFFLINE_BOUND_MS = 3 * (POLL_MS + TIMEOUT_MS);
let monitor: MonitorRig;
let url: string;
let sim: VmixSimulator;

before(async () => {
  sim = new VmixSimulator({ host: '127.0.0.1', port: 0 });
  const port = await sim.start();
  const started = await startMonitor(
    makeConfig([
      {
        id: 4,
        name: 'vMix',
        type: 'http_mixer',
        ip: '127.0.0.1',
        port,
        framerate: 25,
        pollIntervalMs: POLL_MS,
        timeoutMs: TIMEOUT_MS,
      },
    ]),
  );
  monitor = started.monitor;
  url = started.url;
});

after(async () => {
  await sim?.close();
  await monitor?.close();
});

test('play, pause at an exact position, record and stop reach the state and /health', async () => {
  sim.play('opener.mp4', { durationSec: 30 });
  let d = await waitDevice(monitor, 4, (s) => s.state === 'play' && s.filename === 'opener.mp4');
  assert.equal(d.connected, true);
  assert.equal(d.durationMs, 30_000);
  assert.equal((await healthState(url, 4))?.state, 'play');
  sim.pause(12_480);
  d = await waitDevice(monitor, 4, (s) => s.state === 'stop' && s.positionMs === 12_480);
  assert.equal(d.timecode, '00:00:12:12');
  assert.equal(d.remainingMs, 30_000 - 12_480);
  assert.equal((await healthState(url, 4))?.state, 'stop');
  sim.record(true);
  await waitDevice(monitor, 4, (s) => s.state === 'rec');
  assert.equal((await healthState(url, 4))?.state, 'rec');
  sim.record(false);
  sim.stop();
  d = await waitDevice(monitor, 4, (s) => s.state === 'stop' && s.filename === 'Black');
  assert.equal(d.timecode, '00:00:00:00');
});

test('fade to black, preview and overlays reach the state; a title with non-ASCII characters is decoded', async () => {
  sim.play('Café opener.mp4', { durationSec: 60 });
  sim.previewInput(3);
  sim.overlay(2, 1);
  await waitDevice(monitor, 4, (d) => d.state === 'play' && d.filename === 'Café opener.mp4');
  sim.fadeToBlack(true);
  const d = await waitDevice(monitor, 4, (s) => s.fadeToBlack === true);
  assert.equal(d.state, 'stop', 'program output is black');
  assert.deepEqual(d.preview, { number: 3, title: 'Black' });
  assert.deepEqual(d.overlays, [{ number: 2, input: 1, title: 'Camera 1' }]);
  assert.equal((await healthState(url, 4))?.state, 'stop');
  sim.fadeToBlack(false);
  sim.overlay(2, undefined);
  const back = await waitDevice(monitor, 4, (s) => s.fadeToBlack === false && s.state === 'play');
  assert.deepEqual(back.overlays, []);
});

test('vMix gone (port closed) is offline within 3 polls, and comes back by itself', async () => {
  sim.play('opener.mp4', { durationSec: 30 });
  await waitDevice(monitor, 4, (s) => s.state === 'play');
  await sim.offline();
  const off = await waitDevice(monitor, 4, (s) => s.state === 'offline', OFFLINE_BOUND_MS + 3000);
  assert.equal(off.connected, false);
  assert.match(off.reason ?? '', /3 failed polls/);
  const h = await health(url);
  assert.equal(h.status, 'degraded');
  assert.deepEqual(
    h.devices.list.find((d) => d.id === 4),
    { id: 4, name: 'vMix', type: 'http_mixer', connected: false, state: 'offline' },
  );
  await sim.online();
  await waitDevice(monitor, 4, (s) => s.connected && s.state === 'play');
});

test('a vMix that hangs times out; HTTP 500 and garbage are counted; each recovers', async () => {
  for (const mode of ['hang', 'error500', 'garbage', 'truncated'] as const) {
    sim.setMode(mode);
    const off = await waitDevice(monitor, 4, (s) => s.state === 'offline', OFFLINE_BOUND_MS + 3000);
    if (mode === 'hang') assert.match(off.reason ?? '', /no answer within 300 ms/);
    sim.setMode('ok');
    await waitDevice(monitor, 4, (s) => s.connected);
  }
  const h = await health(url);
  assert.ok((h.inputs.malformed['vmix-http-status'] ?? 0) >= 3, JSON.stringify(h.inputs.malformed));
  assert.ok((h.inputs.malformed['vmix-not-xml'] ?? 0) >= 6, JSON.stringify(h.inputs.malformed));
});

test('HTTP Basic auth: the right credentials read the state; wrong ones are offline with HTTP 401', async () => {
  const locked = new VmixSimulator({ port: 0, auth: { username: 'admin', password: 's3cret' } });
  const port = await locked.start();
  // A second vMix with the same credentials: one address serves one device (docs/OUTPUTS.md).
  const locked2 = new VmixSimulator({ port: 0, auth: { username: 'admin', password: 's3cret' } });
  const port2 = await locked2.start();
  const server = {
    type: 'http_mixer',
    ip: '127.0.0.1',
    pollIntervalMs: POLL_MS,
    timeoutMs: TIMEOUT_MS,
  };
  const { monitor: m, url: u } = await startMonitor(
    makeConfig([
      { ...server, port, id: 1, name: 'good', username: 'admin', password: 's3cret' },
      { ...server, port: port2, id: 2, name: 'bad', username: 'admin', password: 'nope' },
    ]),
  );
  try {
    locked.play('opener.mp4');
    await waitDevice(m, 1, (s) => s.state === 'play' && s.filename === 'opener.mp4');
    const bad = await waitDevice(
      m,
      2,
      (s) => s.state === 'offline' && /HTTP 401/.test(s.reason ?? ''),
      OFFLINE_BOUND_MS + 3000,
    );
    assert.equal(bad.connected, false);
    assert.equal((await healthState(u, 1))?.state, 'play');
  } finally {
    await m.close();
    await locked.close();
    await locked2.close();
  }
});
