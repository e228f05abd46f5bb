/**
 * The buttons simulator (docs/buttons.md) on the hub, as app.ts registers an adapter, on a `ManualClock`:
 * physical presses reach the store; unplug turns the keys stale, plug fresh again; a key outside the grid
 * is refused. The contract on a running bridge: test/io/buttons-contract.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock, silentLogger } from '@broadcast-ops/core';
import { ButtonsSimulatorAdapter } from '../../src/adapters/buttons/index.ts';
import { Hub } from '../../src/domain/hub.ts';

test('buttons simulator: physical presses and unplug/plug as a client sees them', async () => {
  const sim = new ButtonsSimulatorAdapter([{ id: 'deck', rows: 1, columns: 2 }]);
  const hub = new Hub({ clock: new ManualClock(), logger: silentLogger() });
  hub.registerAdapter(sim);
  await hub.startAdapters();
  hub.markRecovered();
  try {
    sim.physicalPress('deck', 1, true);
    assert.equal((hub.store.get('buttons.device.deck.key.1')?.value as { pressed: boolean }).pressed, true);
    sim.unplug();
    assert.equal(hub.store.get('buttons.device.deck.key.0')?.stale, true);
    sim.plug();
    assert.equal(hub.store.get('buttons.device.deck.key.0')?.stale, false);
    assert.throws(() => sim.physicalPress('deck', 2, true));
  } finally {
    hub.abortAll();
    await hub.stopAdapters();
  }
});
