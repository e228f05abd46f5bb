/**
 * The contract any real buttons adapter must meet (docs/buttons.md "Contract"), as one check that throws on
 * the first violation. It drives the adapter through a real bridge and client: keys published at
 * `buttons.device.<id>.key.<index>`, press/down/up/setKey acked `received` → `completed` with the matching
 * state and `pressed`/`released` events, bad commands rejected with a reason and no state change, and keys
 * stale once the adapter stops.
 */
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import type { ButtonsAdapter, ButtonKeyState } from '../../src/adapters/buttons/types.ts';
import { keyPath } from '../../src/adapters/buttons/types.ts';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { startBridge } from '../../src/app.ts';
import { testConfig } from '../helpers.ts';
import { waitFor } from '@broadcast-ops/core/testing';

async function until(pred: () => boolean, what: string, ms = 3000): Promise<void> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  await waitFor(() => pred() || undefined, { timeoutMs: ms, intervalMs: 5, what: `contract: ${what}` });
}

export async function checkButtonsContract(adapter: ButtonsAdapter): Promise<void> {
  const bridge = await startBridge({ config: testConfig(), logger: silentLogger(), adapters: [adapter] });
  const client = new BridgeClient({ url: bridge.clientUrl, name: 'contract', reconnect: { enabled: false } });
  try {
    assert.equal(adapter.implemented, true, 'implemented');
    assert.equal(adapter.capabilities()['implemented'], true, 'capabilities().implemented');
    assert.equal(adapter.name, 'buttons.device');
    assert.ok(adapter.targets.includes('buttons'), 'answers to target "buttons"');
    const devices = adapter.devices();
    assert.ok(devices.length > 0, 'at least one device');
    const first = devices[0];
    assert.ok(first);

    await client.connect();
    const states = new Map<string, { value: ButtonKeyState; stale: boolean; correlationId?: string }>();
    const events: { path: string; event: string; correlationId?: string }[] = [];
    client.on('state', (m) => {
      const p = m.payload as { value: ButtonKeyState; stale?: boolean };
      states.set(m.path, {
        value: p.value,
        stale: p.stale === true,
        ...(m.correlationId ? { correlationId: m.correlationId } : {}),
      });
    });
    client.on('event', (m) => {
      const p = m.payload as { event: string };
      if (m.path.startsWith('buttons.'))
        events.push({
          path: m.path,
          event: p.event,
          ...(m.correlationId ? { correlationId: m.correlationId } : {}),
        });
    });
    await client.subscribe(['buttons.**'], { snapshot: true });

    // Every key of every device, with the documented shape, fresh.
    for (const d of devices) {
      assert.match(d.id, /^[a-z0-9_]+$/);
      for (let i = 0; i < d.rows * d.columns; i++) {
        await until(() => states.has(keyPath(d.id, i)), `key ${d.id}/${i}`);
        const s = states.get(keyPath(d.id, i));
        assert.ok(s && !s.stale, `key ${d.id}/${i} fresh`);
        assert.equal(s.value.deviceId, d.id);
        assert.equal(s.value.keyIndex, i);
        assert.equal(s.value.row, Math.floor(i / d.columns));
        assert.equal(s.value.column, i % d.columns);
        assert.equal(typeof s.value.pressed, 'boolean');
        assert.equal(typeof s.value.text, 'string');
        assert.match(s.value.colour, /^#[0-9a-f]{6}$/);
      }
    }
    const last = first.rows * first.columns - 1;
    const path = keyPath(first.id, last);

    // press: received → completed, pressed then released events carrying the command's correlation id.
    const press = client.command('buttons', path, 'press', {}, { correlationId: 'contract-press' });
    const done = await press.done;
    assert.deepEqual(
      press.acks.map((a) => (a.payload as { status: string }).status),
      ['received', 'completed'],
    );
    assert.equal(done.source, 'buttons.device');
    await until(() => events.filter((e) => e.path === path).length >= 2, 'press events');
    assert.deepEqual(
      events.filter((e) => e.path === path).map((e) => [e.event, e.correlationId]),
      [
        ['pressed', 'contract-press'],
        ['released', 'contract-press'],
      ],
    );
    assert.equal(states.get(path)?.value.pressed, false);

    // down / up by params instead of path.
    const status = async (
      action: string,
      params: Record<string, unknown>,
      p = `buttons.device.${first.id}`,
    ): Promise<string> =>
      ((await client.command('buttons', p, action, params).done).payload as { status: string }).status;
    assert.equal(await status('down', { deviceId: first.id, keyIndex: 0 }), 'completed');
    await until(() => states.get(keyPath(first.id, 0))?.value.pressed === true, 'key 0 down');
    assert.equal(await status('up', { deviceId: first.id, keyIndex: 0 }), 'completed');
    await until(() => states.get(keyPath(first.id, 0))?.value.pressed === false, 'key 0 up');

    // setKey: display text and colour.
    assert.equal(await status('setKey', { text: 'REC', colour: '#FF0000' }, path), 'completed');
    await until(() => states.get(path)?.value.text === 'REC', 'setKey text');
    assert.equal(states.get(path)?.value.colour, '#ff0000');

    // Bad commands: rejected with a reason, nothing changes.
    const before = JSON.stringify([...states.values()].map((s) => s.value));
    for (const [action, params, p] of [
      ['press', { deviceId: first.id, keyIndex: last + 1 }, undefined],
      ['explode', {}, path],
      ['setKey', { colour: 'red' }, path],
      ['press', {}, 'buttons.device.no_such_device.key.0'],
    ] as const) {
      const ack = await client.command('buttons', p ?? `buttons.device.${first.id}`, action, params).done;
      const payload = ack.payload as { status: string; error?: { message?: string } };
      assert.equal(payload.status, 'rejected', `${action} ${JSON.stringify(params)}`);
      assert.ok((payload.error?.message ?? '').length > 0, 'rejection has a reason');
    }
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(
      JSON.stringify([...states.values()].map((s) => s.value)),
      before,
      'rejected commands change nothing',
    );

    // Stopping the adapter leaves its keys in place but stale.
    await bridge.hub.stopAdapters();
    await until(() => [...states.values()].every((s) => s.stale), 'keys stale after stop');
  } finally {
    await client.close();
    await bridge.close();
  }
}
