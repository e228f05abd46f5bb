/**
 * Idempotency across restarts (docs/protocol.md "Commands"): the bridge runs as its own process against the
 * Companion simulator (a real Satellite server on 127.0.0.1 that counts the KEY-PRESS lines it receives). A
 * press with an `idempotencyKey` completes; the bridge is restarted (cleanly, then with SIGKILL); the same key
 * resent inside the window gets the recorded acks and no second press reaches the server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient, type AckMessage } from '@broadcast-ops/bridge-client';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { bridgeProcess, pressLines, type BridgeProcess } from '../bridge-process.ts';

const DEVICE = 'tb-idem-01';

for (const how of ['SIGTERM', 'SIGKILL'] as const) {
  test(`a press with an idempotencyKey runs once across a ${how} restart; the retry gets the recorded acks`, async () => {
    const dir = tempDir('tb-idem-');
    const sim = new CompanionSimulator();
    let proc: BridgeProcess | undefined;
    let client: BridgeClient | undefined;
    try {
      const { ws: simPort } = await sim.listen({ tcp: null });
      const bp = (proc = await bridgeProcess(dir.path, sim, simPort, DEVICE));
      const start = bp.start;
      const presses = (): number => pressLines(sim);
      const first = await start();
      client = new BridgeClient({
        url: bp.url,
        name: 'playout',
        reconnect: { initialDelayMs: 100, maxDelayMs: 300 },
      });
      await client.connect();
      const path = 'companion.device.tb_idem_01.key.3';
      const h1 = client.command('companion', path, 'press', undefined, { idempotencyKey: 'take-42' });
      const final1 = await h1.done;
      assert.equal(final1.payload.status, 'completed');
      assert.equal(presses(), 1);
      const acks1 = h1.acks.map((a: AckMessage) => `${a.payload.status}@${a.offset}`);

      await first.stop(how);
      await start();
      await waitFor(() => client?.connected === true, { timeoutMs: 10_000, what: 'client reconnected' });
      await waitFor(() => sim.devices.includes(DEVICE), {
        timeoutMs: 10_000,
        what: 'surface registered again',
      });

      const h2 = client.command('companion', path, 'press', undefined, { idempotencyKey: 'take-42' });
      const final2 = await h2.done;
      assert.equal(h2.id, h1.id);
      assert.deepEqual(
        h2.acks.map((a: AckMessage) => `${a.payload.status}@${a.offset}`),
        acks1,
        'the retry got the recorded acks (same statuses and offsets)',
      );
      assert.equal(final2.payload.status, 'completed');
      assert.equal(final2.id, final1.id, 'the very same final ack message');
      // Give a wrongly executed retry time to reach the server before counting.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(presses(), 1, 'exactly one press reached the Satellite server');

      // A different key still runs.
      const h3 = client.command('companion', path, 'press', undefined, { idempotencyKey: 'take-43' });
      assert.equal((await h3.done).payload.status, 'completed');
      await waitFor(() => presses() === 2, { timeoutMs: 5000, what: 'second press' });
    } finally {
      await client?.close();
      await proc?.killAll();
      await sim.close();
      dir.remove();
    }
  });
}
