/**
 * The buttons contract against the simulator (passes) and the placeholder (must fail, and say why), on a
 * running bridge. The simulator's physical presses and unplug/plug on the hub: test/app/buttons-simulator.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import {
  ButtonsPlaceholderAdapter,
  ButtonsSimulatorAdapter,
  NOT_IMPLEMENTED,
} from '../../src/adapters/buttons/index.ts';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { startBridge } from '../../src/app.ts';
import { testConfig } from '../helpers.ts';
import { checkButtonsContract } from '../buttons/contract.ts';

test('buttons contract: the simulator passes (one device)', async () => {
  await checkButtonsContract(new ButtonsSimulatorAdapter());
});

test('buttons contract: the simulator passes (two devices, different grids)', async () => {
  await checkButtonsContract(
    new ButtonsSimulatorAdapter([
      { id: 'deck_a', rows: 3, columns: 5 },
      { id: 'pad_b', rows: 1, columns: 2 },
    ]),
  );
});

test('buttons contract: the placeholder fails it (the contract can fail)', async () => {
  await assert.rejects(checkButtonsContract(new ButtonsPlaceholderAdapter()), /implemented/);
});

test('buttons placeholder: reports itself honestly and rejects every command with the reason', async () => {
  const adapter = new ButtonsPlaceholderAdapter();
  const bridge = await startBridge({ config: testConfig(), logger: silentLogger(), adapters: [adapter] });
  const c = new BridgeClient({ url: bridge.clientUrl, name: 'ops', reconnect: { enabled: false } });
  try {
    await c.connect();
    assert.equal(adapter.implemented, false);
    assert.deepEqual(adapter.devices(), []);
    const listed = bridge.hub.adapters().find((a) => a.name === 'buttons.device');
    assert.equal(listed?.connected, false);
    assert.equal(listed?.capabilities['implemented'], false);
    const ack = await c.command('buttons', 'buttons.device.any.key.0', 'press').done;
    assert.deepEqual(ack.payload.status, 'rejected');
    assert.equal((ack.payload as { error?: { message: string } }).error?.message, NOT_IMPLEMENTED);
    assert.equal([...bridge.hub.store.entries()].filter((e) => e.path.startsWith('buttons.')).length, 0);
    const health = (await (await fetch(`${bridge.healthUrl}/health`)).json()) as {
      dependencies: { name: string; status: string }[];
    };
    assert.equal(health.dependencies.find((d) => d.name === 'buttons.device')?.status, 'degraded');
  } finally {
    await c.close();
    await bridge.close();
  }
});
