/**
 * No key left held (docs/companion.md "No key left held"). The bridge runs as its own process against the
 * Companion simulator. The simulator holds back its replies, so a press sends `KEY-PRESS ... PRESSED=1` and
 * waits for the OK; the bridge is SIGKILLed right then (between down and up). After the restart the bridge
 * registers on the same Companion and sends `PRESSED=0` for that key, with a warning log line and
 * `telemetry_bridge_held_keys_released_total`. A normal press afterwards leaves nothing held.
 * Also, in process: a lost link with a press in flight (released on return). The HeldKeys bookkeeping:
 * test/domain/held-keys.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { freePort } from '../helpers.ts';
import { bridgeProcess, pressLines, type BridgeProcess } from '../bridge-process.ts';
import { DEV, rig, stateOf } from '../companion/harness.ts';

const DEVICE = 'tb-held-01';

test('a link lost between down and up: the key is released on that Companion when the link is back', async () => {
  const r = await rig({ companion: { replyTimeout: 400, deadAfter: 600 } });
  try {
    await r.until(() => stateOf(r) === 'connected', 'connected');
    const c = await r.client('ops');
    r.sim.replyDelayMs = 10_000; // the OK for PRESSED=1 never comes on this link
    const h = c.command('companion', `companion.device.${DEV}.key.1`, 'press');
    await r.until(() => pressLines(r.sim, true) === 1, 'down sent');
    r.sim.dropConnections();
    r.sim.replyDelayMs = 0;
    const final = await h.done;
    assert.equal(final.payload.status, 'failed', 'the press is not reported done');
    await r.until(() => pressLines(r.sim, false) === 1, 'release sent on the new link', 8000);
    // Confirmed by Companion's OK, then taken off the list.
    await r.until(() => JSON.stringify(r.get('companion.held')?.value) === '[]', 'nothing held');
    const text = await r.bridge.metrics.registry.metrics();
    assert.match(text, /telemetry_bridge_held_keys_released_total\{adapter="companion.satellite"\} 1/);
    // The client's own `up` afterwards is answered without a second release.
    const up = await c.command('companion', `companion.device.${DEV}.key.1`, 'up').done;
    assert.equal(up.payload.status, 'completed', JSON.stringify(up.payload.error));
    assert.equal(pressLines(r.sim, false), 1);
  } finally {
    await r.close();
  }
});

test('SIGKILL between down and up: after the restart the key is released on that Companion, logged and counted', async () => {
  const dir = tempDir('tb-held-');
  const sim = new CompanionSimulator();
  let proc: BridgeProcess | undefined;
  let client: BridgeClient | undefined;
  try {
    const { ws: simPort } = await sim.listen({ tcp: null });
    const metricsPort = await freePort();
    const bp = (proc = await bridgeProcess(dir.path, sim, simPort, DEVICE, {
      metrics: { enabled: true, host: '127.0.0.1', port: metricsPort },
    }));
    const start = bp.start;
    const first = await start();
    client = new BridgeClient({ url: bp.url, name: 'ops', reconnect: { enabled: false } });
    await client.connect();
    sim.replyDelayMs = 60_000;
    const h = client.command('companion', 'companion.device.tb_held_01.key.5', 'press');
    h.done.catch(() => undefined);
    await waitFor(() => pressLines(sim, true) === 1 || undefined, { what: 'the down reached Companion' });
    await first.stop('SIGKILL');
    await client.close();
    assert.equal(pressLines(sim, false), 0, 'no release was sent before the kill');
    sim.dropConnections(); // Companion notices the departed surface; its key stays pressed
    sim.replyDelayMs = 0;

    const second = await start();
    await waitFor(() => pressLines(sim, false) === 1 || undefined, {
      timeoutMs: 10_000,
      what: 'the release after the restart',
    });
    const release = sim.linesNamed('KEY-PRESS').find((l) => / PRESSED=(0|false)\b/.test(l.line));
    assert.match(release?.line ?? '', /KEY=5\b/);
    assert.match(release?.line ?? '', new RegExp(`DEVICEID=("?)${DEVICE}\\1`));
    await second.waitForOutput(/released a key left held on Companion/, 5000);
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(metrics, /telemetry_bridge_held_keys_released_total\{adapter="companion.satellite"\} 1/);

    // A normal press now: down and up confirmed, nothing left held.
    client = new BridgeClient({ url: bp.url, name: 'ops', reconnect: { enabled: false } });
    await client.connect();
    const ok = await client.command('companion', 'companion.device.tb_held_01.key.5', 'press').done;
    assert.equal(ok.payload.status, 'completed');
    const seen: unknown[] = [];
    client.on('state', (m) => {
      if (m.path === 'companion.held') seen.push(m.payload.value);
    });
    await client.subscribe(['companion.held'], { snapshot: true });
    await waitFor(() => seen.length > 0 || undefined, { what: 'companion.held' });
    assert.deepEqual(seen.at(-1), []);
  } finally {
    await client?.close();
    await proc?.killAll();
    await sim.close();
    dir.remove();
  }
});
