// Several layers of one CasparCG channel watched (`layers`), each with its own state, against the CasparCG
// simulator: two simulators sending from the same source address, one per layer, stand for one server
// whose channel has two busy layers (the monitor demultiplexes by source address, then channel and layer,
// as a 2.0.7 server's split bundles arrive). The device's own state stays its `layer`; the API and the
// WebSocket snapshot carry `layers`; a silent server turns every layer offline, never the last state.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { fileURLToPath } from 'node:url';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import WebSocket from 'ws';
import type { LayerState } from '../../src/domain/device-state.ts';
import { PlayoutService } from '../../src/playout-service.ts';
import { CasparcgSimulator } from '@broadcast-ops/simulators/playout';
import { makeConfig, waitDevice } from '../helpers.ts';

const FROM = '127.0.0.7';
let service: PlayoutService;
let url: string;
const sims: CasparcgSimulator[] = [];

before(async () => {
  const config = makeConfig(
    [
      {
        id: 1,
        name: 'Caspar',
        type: 'osc_player',
        ip: FROM,
        port: 0,
        channel: 1,
        layer: 10,
        layers: [10, 20, 30],
        staleTimeoutMs: 1000,
      },
    ],
    { emberPlusPort: 0 },
  );
  service = new PlayoutService({ config, logger: silentLogger() });
  const started = await service.start({ http: 0, ember: 0 });
  url = started.httpUrl;
  const oscPort = [...started.oscPorts.values()][0];
  assert.ok(oscPort);
  for (const layer of [10, 20]) {
    const sim = new CasparcgSimulator({
      targetHost: '127.0.0.1',
      targetPort: oscPort,
      sourceAddress: FROM,
      layout: '2.3',
      videoFormat: '1080p5000',
      channel: 1,
      layer,
    });
    await sim.start();
    sims.push(sim);
  }
});
after(async () => {
  for (const s of sims) await s.close();
  await service?.close();
});

const byLayer = (layers: LayerState[] | undefined, n: number): LayerState | undefined =>
  layers?.find((l) => l.layer === n);

test('each watched layer has its own state: playing, paused with its time, empty', async () => {
  const [l10, l20] = sims;
  assert.ok(l10 && l20);
  l10.play('AMB.mp4', { durationSec: 60 });
  l20.play('LOWER_THIRD.mov', { durationSec: 30, startFrame: 250 });
  await waitDevice(service.monitor, 1, (d) => byLayer(d.layers, 20)?.state === 'play');
  l20.pause();
  const d = await waitDevice(
    service.monitor,
    1,
    (s) => byLayer(s.layers, 10)?.state === 'play' && byLayer(s.layers, 20)?.paused === true,
  );
  assert.deepEqual(
    d.layers?.map((l) => l.layer),
    [10, 20, 30],
    'the device layer first, then the others in order',
  );
  assert.equal(d.state, 'play', 'the device state is its own layer (10)');
  assert.equal(d.filename, 'AMB.mp4');
  const a = byLayer(d.layers, 10);
  const b = byLayer(d.layers, 20);
  const c = byLayer(d.layers, 30);
  assert.equal(a?.filename, 'AMB.mp4');
  assert.equal(a?.durationMs, 60_000);
  assert.equal(b?.state, 'stop');
  assert.equal(b?.filename, 'LOWER_THIRD.mov');
  assert.equal(b?.durationMs, 30_000);
  assert.match(b?.timecode ?? '', /^00:00:0[5-9]:\d\d$/, 'layer 20 keeps its own time from frame 250');
  assert.deepEqual([c?.state, c?.filename, c?.paused], ['stop', '', false], 'an empty layer');
  // Paused time stays put.
  const frozen = b?.timecode;
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(byLayer(service.monitor.store.get(1)?.layers, 20)?.timecode, frozen);

  // The same on the API and in the WebSocket snapshot.
  const api = (await (await fetch(`${url}/api/devices/1`)).json()) as { layers?: LayerState[] };
  assert.equal(byLayer(api.layers, 20)?.filename, 'LOWER_THIRD.mov');
  const ws = new WebSocket(url.replace('http', 'ws') + '/ws');
  const snap = await new Promise<{ data: { layers?: LayerState[] }[] }>((resolve, reject) => {
    ws.once('message', (m: Buffer) =>
      resolve(JSON.parse(m.toString()) as { data: { layers?: LayerState[] }[] }),
    );
    ws.once('error', reject);
  });
  ws.close();
  assert.equal(byLayer(snap.data[0]?.layers, 10)?.state, 'play');
  assert.equal(byLayer(snap.data[0]?.layers, 20)?.paused, true);

  // The dashboard card: one line per layer.
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    const problems: string[] = [];
    await watchPage(page, problems, { label: 'dashboard' });
    await page.goto(url + '/dashboard.html');
    await page.waitForSelector('.layer[data-layer="20"][data-state="paused"]', { timeout: 10_000 });
    const lines = await page.evaluate<string[]>(
      `[...document.querySelectorAll('.layer')].map((l) => l.textContent)`,
    );
    assert.match(lines[0] ?? '', /^L10 PLAY \d\d:\d\d:\d\d:\d\d AMB\.mp4$/);
    assert.match(lines[1] ?? '', /^L20 PAUSED 00:00:0[5-9]:\d\d LOWER_THIRD\.mov$/);
    assert.match(lines[2] ?? '', /^L30 STOP 00:00:00:00 \u2014$/);
    await page.screenshot({
      path: fileURLToPath(new URL('../../.tmp/test-output/pages/dashboard-layers.png', import.meta.url)),
    });
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
  }

  // Layer 20 stopped (empty producer) while layer 10 keeps playing.
  l20.stop();
  const s = await waitDevice(service.monitor, 1, (x) => byLayer(x.layers, 20)?.filename === '');
  assert.equal(byLayer(s.layers, 10)?.state, 'play');
});

test('the server goes silent: every layer offline, not its last state', async () => {
  for (const s of sims) s.offline();
  const d = await waitDevice(service.monitor, 1, (x) => x.state === 'offline', 5000);
  assert.deepEqual(
    d.layers?.map((l) => l.state),
    ['offline', 'offline', 'offline'],
  );
  assert.equal(byLayer(d.layers, 10)?.filename, 'AMB.mp4', 'what it last played is kept, marked offline');
  for (const s of sims) s.online();
  await waitDevice(service.monitor, 1, (x) => x.connected && byLayer(x.layers, 10)?.state === 'play', 5000);
});
