/**
 * One `component` per log line: the adapter's logger is a child of the root logger, not of the hub's (pino
 * writes every binding of every ancestor, so a child of a child repeated the key and `jq` kept the last).
 * Checked on the raw JSON text the bridge writes while the Companion adapter connects, loses and regains
 * its link.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '@broadcast-ops/core';
import { startBridge } from '../../src/app.ts';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { testConfig } from '../helpers.ts';

test('every log line carries exactly one component key', async () => {
  const lines: string[] = [];
  let buf = '';
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      buf += chunk.toString();
      let i;
      while ((i = buf.indexOf('\n')) !== -1) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
      cb();
    },
  });
  const logger = createLogger({ service: 'telemetry-bridge', level: 'debug', destination });
  const sim = new CompanionSimulator();
  const { ws } = await sim.listen({ tcp: null });
  const bridge = await startBridge({
    config: testConfig({
      companion: {
        enabled: true,
        port: ws,
        reconnectDelay: 20,
        maxReconnectDelay: 100,
        device: { deviceId: 'log-test', productName: 'Log test', keysTotal: 4, keysPerRow: 4 },
      },
    }),
    logger,
  });
  try {
    const until = async (pred: () => boolean, what: string): Promise<void> => {
      const end = Date.now() + 8000;
      while (!pred()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await until(() => lines.some((l) => l.includes('companion surface registered')), 'registered');
    sim.dropConnections();
    await until(() => lines.some((l) => l.includes('retrying')), 'link down logged');
    await until(() => lines.filter((l) => l.includes('companion surface registered')).length >= 2, 'again');
  } finally {
    await bridge.close();
    await sim.close();
  }
  const adapterLines = lines.filter((l) => l.includes('"component":"adapter:companion.satellite"'));
  assert.ok(adapterLines.length >= 3, `adapter lines: ${adapterLines.length}`);
  for (const l of lines) {
    const n = l.split('"component":').length - 1;
    assert.ok(n <= 1, `${n} component keys in ${l}`);
  }
});
