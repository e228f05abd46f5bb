/**
 * Exactly once by client identity, not by connection order (docs/protocol.md "Exactly once"). The bridge
 * runs as its own process against the Companion simulator, which counts the KEY-PRESS lines it receives.
 * Two panels share one app name (`app.panel` and `app.panel_2`, by connection order); each BridgeClient
 * keeps its client id in a file. Panel 2 presses with key `take-42`; the bridge restarts (SIGTERM, then
 * SIGKILL) and the panels restart too; panel 2 reconnects first and now holds `app.panel`. Its retry (a new
 * command id) gets the recorded outcome, addressed to its new command id, and no second press reaches the
 * server. Panel 1, now `app.panel_2`, and another app reusing the key string each run their own press.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { bridgeProcess, pressLines, type BridgeProcess } from '../bridge-process.ts';

const DEVICE = 'tb-ident-01';
const PATH = 'companion.device.tb_ident_01.key.3';

for (const how of ['SIGTERM', 'SIGKILL'] as const) {
  test(`idempotency by client id across a ${how} restart, the other panel reconnecting first`, async () => {
    const dir = tempDir('tb-ident-');
    const sim = new CompanionSimulator();
    let proc: BridgeProcess | undefined;
    const clients: BridgeClient[] = [];
    try {
      const { ws: simPort } = await sim.listen({ tcp: null });
      const bp = (proc = await bridgeProcess(dir.path, sim, simPort, DEVICE));
      const start = bp.start;
      const presses = (): number => pressLines(sim);
      const panel = async (which: string, name = 'panel'): Promise<BridgeClient> => {
        const c = new BridgeClient({
          url: bp.url,
          name,
          clientIdFile: join(dir.path, `${which}.id`),
          reconnect: { enabled: false },
        });
        clients.push(c);
        await c.connect();
        return c;
      };

      const first = await start();
      const p1 = await panel('one');
      const p2 = await panel('two');
      assert.equal(p1.namespace, 'app.panel');
      assert.equal(p2.namespace, 'app.panel_2');
      const idTwo = p2.clientId;
      const h1 = p2.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-42' });
      assert.equal((await h1.done).payload.status, 'completed');
      assert.equal(presses(), 1);

      await first.stop(how);
      for (const c of clients.splice(0)) await c.close();
      await start();
      // The panels' programs restart too: panel 2 is first back and takes the bare name.
      const p2b = await panel('two');
      assert.equal(p2b.clientId, idTwo, 'the client id survived in its file');
      assert.equal(readFileSync(join(dir.path, 'two.id'), 'utf8').trim(), idTwo);
      assert.equal(p2b.namespace, 'app.panel');
      const h2 = p2b.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-42' });
      assert.notEqual(h2.id, h1.id, 'a new program: a new command id for the same key');
      const final2 = await h2.done;
      assert.equal(final2.payload.status, 'completed', 'the recorded outcome');
      assert.equal(final2.payload.commandId, h2.id, 'addressed to the retry');
      assert.equal((final2.payload as { originalCommandId?: string }).originalCommandId, h1.id);
      assert.deepEqual(
        h2.acks.map((a) => a.payload.status),
        ['received', 'completed'],
      );
      // Give a wrongly executed retry time to reach the server before counting.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(presses(), 1, 'exactly one press for panel 2 key take-42');

      // Panel 1 (now app.panel_2) has never used take-42: its own press runs.
      const p1b = await panel('one');
      assert.equal(p1b.namespace, 'app.panel_2');
      const h3 = p1b.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-42' });
      const final3 = await h3.done;
      assert.equal(final3.payload.status, 'completed');
      assert.equal((final3.payload as { originalCommandId?: string }).originalCommandId, undefined);
      await waitFor(() => presses() === 2, { timeoutMs: 5000, what: "panel 1's own press" });

      // Another app reusing the key string runs its own command too.
      const other = await panel('other', 'graphics');
      const h4 = other.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-42' });
      assert.equal((await h4.done).payload.status, 'completed');
      await waitFor(() => presses() === 3, { timeoutMs: 5000, what: "the other app's own press" });

      // And each of them, repeating its key once more, gets its recorded outcome: still three presses.
      for (const c of [p2b, p1b, other]) {
        const h = c.command('companion', PATH, 'press', undefined, { idempotencyKey: 'take-42' });
        assert.equal((await h.done).payload.status, 'completed');
      }
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(presses(), 3, 'one press per identity and key');
    } finally {
      for (const c of clients) await c.close();
      await proc?.killAll();
      await sim.close();
      dir.remove();
    }
  });
}
