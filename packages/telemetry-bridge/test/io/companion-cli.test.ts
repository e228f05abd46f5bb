/**
 * The command line: `telemetry-bridge companion-sim` speaks the Satellite protocol on its ports, and
 * `telemetry-bridge run --companion-sim` (the `npm start` demo) registers with the in-process simulator
 * when no Companion is configured, so a client sees live Companion state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { repoRoot, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { LineSplitter, splitLine } from '../../src/protocol/satellite.ts';

const BIN = join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs');

test('companion-sim CLI: BEGIN/CAPS on TCP, ADD-DEVICE OK, records what it received', async () => {
  const p = startProcess(process.execPath, [
    BIN,
    'companion-sim',
    '--tcp-port',
    '0',
    '--ws-port',
    'off',
    '--api-version',
    '1.10.0',
    '--log-lines',
  ]);
  try {
    const m = await p.waitForOutput(/tcp (\d+), ws off/, 20_000);
    const sock = connect({ host: '127.0.0.1', port: Number(m[1]) });
    const lines: string[] = [];
    const sp = new LineSplitter();
    sock.on('data', (d) => lines.push(...sp.push(d.toString('utf8'))));
    const wait = async (n: number): Promise<void> => {
      const end = Date.now() + 10_000;
      while (lines.length < n) {
        if (Date.now() > end) throw new Error(`got ${JSON.stringify(lines)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await wait(2);
    assert.equal(lines[0], 'BEGIN CompanionVersion="sim" ApiVersion="1.10.0" ');
    assert.equal(lines[1], 'CAPS SUBSCRIPTIONS=0 ');
    sock.write('ADD-DEVICE DEVICEID="cli1" PRODUCT_NAME="CLI test" KEYS_TOTAL=2 KEYS_PER_ROW=2\n');
    await wait(6);
    assert.equal(lines[2], 'ADD-DEVICE OK DEVICEID="cli1" ');
    assert.equal(lines[3], 'BRIGHTNESS DEVICEID="cli1" VALUE=100 ');
    assert.equal(splitLine(lines[4] ?? '').name, 'KEY-STATE');
    await p.waitForOutput(/"line":"ADD-DEVICE DEVICEID=\\"cli1\\"/, 10_000);
    sock.destroy();
    assert.equal((await p.stop('SIGTERM')).code, 0);
  } finally {
    await p.stop('SIGKILL');
  }
});

test('run --companion-sim: no Companion configured, the bridge connects to the simulator and serves its state', async () => {
  const dir = tempDir('tb-csim-');
  const cfg = join(dir.path, 'c.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      clientTransport: { host: '127.0.0.1', port: 0 },
      metrics: { enabled: false },
      health: { enabled: false },
      eventLog: { enabled: false },
    }),
  );
  const p = startProcess(process.execPath, [BIN, 'run', '--config', cfg, '--companion-sim']);
  try {
    const m = await p.waitForOutput(/"clients":"(ws:\/\/[^"]+)"/, 20_000);
    await p.waitForOutput(/companion surface registered/, 20_000);
    const c = new BridgeClient({ url: m[1] ?? '', name: 'demo', reconnect: { enabled: false } });
    await c.connect();
    const seen = new Map<string, unknown>();
    c.on('state', (s) => seen.set(s.path, (s.payload as { value: unknown }).value));
    await c.subscribe(['companion.**'], { snapshot: true });
    const end = Date.now() + 10_000;
    while (!(
      seen.get('companion.connection.state') === 'connected' &&
      typeof seen.get('companion.variables.internal.time_hms') === 'string'
    )) {
      if (Date.now() > end) throw new Error(`demo state: ${JSON.stringify([...seen.keys()])}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(
      (seen.get('companion.device.telemetry_bridge_001.key.3') as { text?: string } | undefined)?.text,
      'VT 1',
    );
    await c.close();
    assert.equal((await p.stop('SIGTERM')).code, 0);
  } finally {
    await p.stop('SIGKILL');
    dir.remove();
  }
});
