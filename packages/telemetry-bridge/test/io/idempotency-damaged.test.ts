/**
 * Exactly once after a damaged log (docs/protocol.md "Exactly once"): a press with an idempotencyKey reaches
 * the Companion simulator; the bridge stops; a byte inside that command's log record is flipped, so recovery
 * cuts the segment there and the record (and its acks) fall in a lost stretch. After the restart the retry
 * (BridgeClient reuses the first attempt's id and timestamp) is answered `failed` with `outcome: unknown`
 * and no second KEY-PRESS reaches the server; a repeat of that gets the same answer; a new key runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { listSegments } from '../../src/io/event-log.ts';
import { startBridge, type RunningBridge } from '../../src/app.ts';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { freePort, testConfig } from '../helpers.ts';

const DEVICE = 'tb-dmg-01';
const PATH = 'companion.device.tb_dmg_01.key.2';

test('a retry whose record fell in a lost stretch of the log gets outcome unknown and never presses', async () => {
  const dir = tempDir('tb-dmg-');
  const sim = new CompanionSimulator();
  let bridge: RunningBridge | undefined;
  let client: BridgeClient | undefined;
  try {
    const { ws: simPort } = await sim.listen({ tcp: null });
    const port = await freePort();
    const events = join(dir.path, 'events');
    const config = testConfig(
      {
        clientTransport: { port },
        companion: {
          enabled: true,
          host: '127.0.0.1',
          port: simPort,
          transport: 'ws',
          heartbeatInterval: 100,
          reconnectDelay: 20,
          maxReconnectDelay: 200,
          device: { deviceId: DEVICE, productName: 'Damage test', keysTotal: 8, keysPerRow: 4 },
        },
      },
      events,
    );
    const start = async (): Promise<RunningBridge> => {
      bridge = await startBridge({ config, logger: silentLogger() });
      await waitFor(() => sim.devices.includes(DEVICE), { timeoutMs: 10_000, what: 'surface registered' });
      return bridge;
    };
    const presses = (): number =>
      sim.linesNamed('KEY-PRESS').filter((l) => / PRESSED=(1|true)\b/.test(l.line)).length;

    let b = await start();
    const c = new BridgeClient({
      url: `ws://127.0.0.1:${port}/`,
      name: 'panel',
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    });
    client = c;
    await c.connect();
    const h1 = c.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-7' });
    assert.equal((await h1.done).payload.status, 'completed');
    assert.equal(presses(), 1);
    // More traffic after it, so the damage is in the middle of the log, not at its end.
    const other = c.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-8' });
    assert.equal((await other.done).payload.status, 'completed');
    assert.equal(presses(), 2);
    await b.close();
    await waitFor(() => !c.connected, { what: 'client saw the bridge go' });

    // Flip a byte inside the take-7 command record.
    const seg = join(events, (listSegments(events).at(-1) as { name: string }).name);
    const bytes = readFileSync(seg);
    const at = bytes.indexOf('"idempotencyKey":"take-7"');
    assert.ok(at > 0, 'the command record is in the newest segment');
    bytes[at + 5] = (bytes[at + 5] as number) ^ 0x20;
    writeFileSync(seg, bytes);

    b = await start();
    assert.ok(b.eventLog?.report.damage, 'recovery found the damage');
    assert.ok((b.eventLog?.report.lost.length ?? 0) >= 1);
    await waitFor(() => c.connected, { timeoutMs: 10_000, what: 'client back' });

    for (const attempt of [1, 2]) {
      const h = c.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-7' });
      const final = await h.done;
      assert.equal(final.payload.status, 'failed', `attempt ${attempt}`);
      const details = (final.payload.error as { details?: { outcome?: string } } | undefined)?.details;
      assert.equal(details?.outcome, 'unknown', `attempt ${attempt}: outcome unknown`);
    }
    // take-8 was lost with it (after the damage): the same answer, never a second press.
    const h8 = c.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-8' });
    assert.equal((await h8.done).payload.status, 'failed');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(presses(), 2, 'no press after the damaged restart');

    // A new command (sent after the restart) runs.
    const h9 = c.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-9' });
    assert.equal((await h9.done).payload.status, 'completed');
    await waitFor(() => presses() === 3, { what: 'the new press' });
  } finally {
    await client?.close();
    await bridge?.close();
    await sim.close();
    dir.remove();
  }
});
