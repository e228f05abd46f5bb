/**
 * A command still running when the bridge stops (docs/protocol.md "Commands", across restarts): after the
 * restart a retry with the same idempotencyKey is not executed; it gets the recorded `received` and a final
 * `failed` ack with `details.outcome: "unknown"`, logged once at start, so a second retry gets the same one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { startBridge } from '../../src/app.ts';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { FakeAdapter, freePort, testConfig } from '../helpers.ts';

test('interrupted command: the retry after a restart is not executed and gets failed / outcome unknown', async () => {
  const dir = tempDir('tb-interrupted-');
  const port = await freePort();
  const start = async (adapter: FakeAdapter): Promise<Awaited<ReturnType<typeof startBridge>>> =>
    startBridge({
      config: testConfig({ clientTransport: { port } }, dir.path),
      logger: silentLogger(),
      adapters: [adapter],
    });
  try {
    const a1 = new FakeAdapter();
    const b1 = await start(a1);
    // The same client across the restart: its library resends a key with the first command's id.
    const c1 = new BridgeClient({
      url: b1.clientUrl,
      name: 'ops',
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    });
    await c1.connect();
    const h = c1.command('fake', 'fake.x', 'hang', undefined, { idempotencyKey: 'roll-vt-1', ttl: 60_000 });
    h.done.catch(() => undefined);
    const until = async (pred: () => boolean): Promise<void> => {
      const end = Date.now() + 5000;
      while (!pred()) {
        if (Date.now() > end) throw new Error('timed out');
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await until(() => a1.executed.length === 1 && h.acks.length === 1);
    assert.equal(h.acks[0]?.payload.status, 'received');
    const receivedOffset = h.acks[0]?.offset;
    await b1.close();

    const a2 = new FakeAdapter();
    const b2 = await start(a2);
    try {
      await until(() => c1.connected);
      for (let i = 0; i < 2; i++) {
        const retry = c1.command('fake', 'fake.x', 'hang', undefined, { idempotencyKey: 'roll-vt-1' });
        const final = await retry.done;
        assert.deepEqual(
          retry.acks.map((x) => x.payload.status),
          ['received', 'failed'],
        );
        assert.equal(retry.acks[0]?.offset, receivedOffset, 'the recorded received ack');
        assert.equal(final.payload.error?.code, 'INTERNAL_ERROR');
        assert.deepEqual(final.payload.error?.details, { outcome: 'unknown' });
        assert.equal(retry.id, h.id);
      }
      assert.equal(a2.executed.length, 0, 'never executed again');
    } finally {
      await c1.close();
      await b2.close();
    }
  } finally {
    dir.remove();
  }
});
