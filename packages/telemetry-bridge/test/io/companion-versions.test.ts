/**
 * The Companion adapter against the simulator at the ApiVersions that changed what a surface can do:
 * 1.6.0 (row/col keys, TEXTCOLOR; Companion 3.x wire dialect), 1.7.0 (variables; Companion 3.4/3.5),
 * 1.10.0 (CAPS, subscriptions; Companion 4.3) and the newest, 1.14.0 (ROTARY_AMOUNT). Commands go through a
 * real client and the hub, so every assertion covers the acks a user sees.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { atLeast } from '../../src/protocol/satellite.ts';
import { DEV, DEVICE, rig, stateOf, type Rig } from '../companion/harness.ts';
import type { BridgeClient } from '@broadcast-ops/bridge-client';

async function command(
  c: BridgeClient,
  path: string,
  action: string,
  params?: Record<string, unknown>,
): Promise<{ status: string; error?: { message: string }; result?: unknown }> {
  const ack = await c.command('companion', path, action, params).done;
  return ack.payload;
}

const KEY = (i: number): string => `companion.device.${DEV}.key.${i}`;

async function exercise(r: Rig, version: string, subscriptions: boolean): Promise<void> {
  const v = (min: string): boolean => atLeast(version, min);
  await r.until(() => stateOf(r) === 'connected', 'connected');
  await r.until(
    () => (r.get(KEY(1))?.value as { text?: string } | undefined)?.text === 'CAM 1',
    'key 1 drawn',
  );

  // Registration: what ADD-DEVICE asked for depends on what this Companion understands.
  const add = r.sim.linesNamed('ADD-DEVICE')[0]?.parsed.params;
  assert.ok(add);
  assert.equal(add['DEVICEID'], DEVICE);
  assert.equal(add['PRODUCT_NAME'], 'Telemetry "Bridge" Test');
  assert.equal(add['KEYS_TOTAL'], '8');
  assert.equal(add['COLORS'], v('1.6.0') ? 'hex' : '1');
  assert.equal(add['VARIABLES'] !== undefined, v('1.7.0'));
  assert.equal(add['PINCODE_LOCK'] !== undefined, v('1.8.0'));

  const caps = r.get('companion.capabilities')?.value as {
    apiVersion: string;
    features: Record<string, boolean>;
    caps: Record<string, unknown>;
  };
  assert.equal(caps.apiVersion, version);
  assert.equal(caps.features['subscriptions'], subscriptions && v('1.10.0'));
  assert.equal(caps.features['rotaryAmount'], v('1.14.0'));
  if (v('1.10.0')) assert.equal(caps.caps['SUBSCRIPTIONS'], subscriptions);

  // Key state: text decoded, colours, pressed; the page only where KEY-STATE carries LOCATION (1.10.0).
  const k1 = r.get(KEY(1))?.value as Record<string, unknown>;
  assert.equal(k1['colour'], '#ff0000');
  assert.equal(k1['textColour'], '#ffffff');
  assert.equal(k1['pressed'], false);
  assert.equal(k1['row'], 0);
  assert.equal(k1['column'], 1);
  assert.equal(k1['page'], v('1.10.0') ? 1 : undefined);
  assert.equal(k1['image'], undefined, 'no bitmap unless configured');
  for (let i = 0; i < 8; i++) assert.ok(r.get(KEY(i)), `key ${i} published`);

  // Brightness pushed by Companion.
  await r.until(() => r.get(`companion.device.${DEV}.brightness`)?.value === 100, 'brightness 100');
  r.sim.setBrightness(40);
  await r.until(() => r.get(`companion.device.${DEV}.brightness`)?.value === 40, 'brightness 40');

  // Declared outputs (1.7.0): published under companion.variables.<group>.<variable>.
  r.sim.setOutput('internal:time_hms', '10:00:01');
  if (v('1.7.0')) {
    await r.until(
      () => r.get('companion.variables.internal.time_hms')?.value === '10:00:01',
      'output variable',
    );
    r.sim.setOutput('custom:tally_pgm', '1');
    await r.until(() => r.get('companion.variables.custom.tally_pgm')?.value === '1', 'second output');
  }

  const c = await r.client('ops');

  // Press on the surface: KEY-PRESS PRESSED=1 then 0, `completed` only after both OKs.
  const press = await command(c, KEY(2), 'press');
  assert.equal(press.status, 'completed', JSON.stringify(press));
  const presses = r.sim
    .linesNamed('KEY-PRESS')
    .map((l) => [l.parsed.params['KEY'], l.parsed.params['PRESSED']]);
  assert.deepEqual(presses, [
    ['2', '1'],
    ['2', '0'],
  ]);
  assert.equal(r.sim.linesNamed('KEY-PRESS')[0]?.parsed.params['DEVICEID'], DEVICE);
  // Down alone shows as pressed in the key state Companion redraws.
  assert.equal((await command(c, 'companion.device', 'down', { keyIndex: 5 })).status, 'completed');
  await r.until(() => (r.get(KEY(5))?.value as { pressed?: boolean }).pressed === true, 'key 5 pressed');
  assert.equal((await command(c, 'companion.device', 'up', { row: 1, column: 1 })).status, 'completed');
  await r.until(() => (r.get(KEY(5))?.value as { pressed?: boolean }).pressed === false, 'key 5 released');

  // Rotate (1.3.0+); step counts only with ROTARY_AMOUNT.
  assert.equal((await command(c, KEY(0), 'rotate', { direction: -1 })).status, 'completed');
  assert.equal(r.sim.linesNamed('KEY-ROTATE').at(-1)?.parsed.params['DIRECTION'], '-1');
  const steps = await command(c, KEY(0), 'rotate', { direction: 3 });
  const rotates = r.sim.linesNamed('KEY-ROTATE').length;
  if (v('1.14.0')) {
    assert.equal(steps.status, 'completed');
    assert.equal(r.sim.linesNamed('KEY-ROTATE').at(-1)?.parsed.params['DIRECTION'], '3');
  } else {
    assert.equal(steps.status, 'rejected');
    assert.match(steps.error?.message ?? '', /ROTARY_AMOUNT/);
    assert.equal(rotates, 1, 'a rejected command is never sent');
  }

  // Set a declared input (1.7.0).
  const set = await command(c, 'companion.variables', 'setVariable', {
    variable: 'custom:cue',
    value: 'Take 2 "wide"',
  });
  if (v('1.7.0')) {
    assert.equal(set.status, 'completed', JSON.stringify(set));
    assert.equal(r.sim.inputValues.get('custom:cue'), 'Take 2 "wide"');
  } else {
    assert.equal(set.status, 'rejected');
    assert.match(set.error?.message ?? '', /1\.7\.0/);
    assert.equal(r.sim.linesNamed('SET-VARIABLE-VALUE').length, 0);
  }
  const undeclared = await command(c, 'companion.variables', 'setVariable', {
    variable: 'custom:other',
    value: 'x',
  });
  assert.equal(undeclared.status, 'rejected');

  // Absolute page/row/column: ADD-SUB + SUB-PRESS only when Companion offers subscriptions.
  r.sim.setButton(2, 1, 3, { text: 'REC', color: '#00ff00' });
  const abs = await command(c, 'companion.page.2.row.1.column.3', 'press');
  const bank = await command(c, 'companion.page.2.bank.12', 'press');
  if (subscriptions && v('1.10.0')) {
    assert.equal(abs.status, 'completed', JSON.stringify(abs));
    assert.equal(bank.status, 'completed', JSON.stringify(bank));
    assert.deepEqual(
      r.sim.linesNamed('ADD-SUB').map((l) => l.parsed.params['LOCATION']),
      ['2/1/3'],
      'one subscription, reused by the legacy bank form (bank 12 = row 1, column 3)',
    );
    assert.deepEqual(
      r.sim.linesNamed('SUB-PRESS').map((l) => l.parsed.params['PRESSED']),
      ['1', '0', '1', '0'],
    );
    await r.until(
      () =>
        (r.get('companion.page.2.row.1.column.3')?.value as { text?: string } | undefined)?.text === 'REC',
      'subscription state',
    );
  } else {
    for (const a of [abs, bank]) {
      assert.equal(a.status, 'rejected');
      assert.match(a.error?.message ?? '', v('1.10.0') ? /SUBSCRIPTIONS=0/ : /1\.10\.0/);
    }
    assert.equal(r.sim.linesNamed('ADD-SUB').length + r.sim.linesNamed('SUB-PRESS').length, 0);
  }

  // Bad or unknown commands are rejected with a reason and never reach Companion.
  const before = r.sim.received.filter((l) => l.parsed.name !== 'PING').length;
  assert.equal((await command(c, KEY(0), 'explode')).status, 'rejected');
  assert.equal((await command(c, 'companion.device', 'press', { keyIndex: 8 })).status, 'rejected');
  assert.equal((await command(c, 'companion.device.someone_else.key.1', 'press')).status, 'rejected');
  assert.equal(r.sim.received.filter((l) => l.parsed.name !== 'PING').length, before);

  // Page change redraws every key; a lock is published where Companion reports it (1.8.0).
  r.sim.setButton(3, 0, 0, { text: 'P3' });
  r.sim.setPage(DEVICE, 3);
  await r.until(() => (r.get(KEY(0))?.value as { text?: string }).text === 'P3', 'page 3 drawn');
  if (v('1.8.0')) {
    r.sim.setLocked(true);
    await r.until(
      () =>
        (r.get(`companion.device.${DEV}.locked`)?.value as { locked?: boolean } | undefined)?.locked === true,
      'locked',
    );
    r.sim.setLocked(false);
    await r.until(
      () => (r.get(`companion.device.${DEV}.locked`)?.value as { locked?: boolean }).locked === false,
      'unlocked',
    );
  }
  // Companion answered every PING of the heartbeat.
  await r.sim.waitFor(() => r.sim.linesNamed('PING').length >= 1, 2000, 'a PING');
}

const CASES: { version: string; subscriptions: boolean; transport: 'ws' | 'tcp' }[] = [
  { version: '1.6.0', subscriptions: false, transport: 'tcp' },
  { version: '1.7.0', subscriptions: false, transport: 'ws' },
  { version: '1.10.0', subscriptions: false, transport: 'tcp' },
  { version: '1.10.0', subscriptions: true, transport: 'ws' },
  { version: '1.14.0', subscriptions: false, transport: 'ws' },
  { version: '1.14.0', subscriptions: true, transport: 'tcp' },
];

for (const c of CASES) {
  test(`ApiVersion ${c.version}, subscriptions ${c.subscriptions ? 'on' : 'off'}, over ${c.transport}`, async () => {
    const r = await rig({
      sim: { apiVersion: c.version, subscriptions: c.subscriptions },
      transport: c.transport,
    });
    r.sim.setButton(1, 0, 1, { text: 'CAM 1', color: '#ff0000', textColor: '#ffffff' });
    try {
      await exercise(r, c.version, c.subscriptions);
    } finally {
      await r.close();
    }
  });
}

test('an ApiVersion 2.x server is refused with state error, and the adapter keeps retrying', async () => {
  const r = await rig({ sim: { apiVersion: '2.0.0' } });
  try {
    await r.until(() => r.sim.connections > 0 || stateOf(r) === 'error', 'attempt');
    await r.until(
      () =>
        String(r.get('companion.connection.lastError')?.value).includes('unsupported Satellite ApiVersion'),
      'error',
    );
    assert.equal(r.sim.linesNamed('ADD-DEVICE').length, 0);
    const seen = new Set<string>();
    await r.until(() => {
      seen.add(stateOf(r) ?? '');
      return seen.has('error') && seen.has('reconnecting');
    }, 'error then reconnecting');
  } finally {
    await r.close();
  }
});

test('capabilities are read from CAPS, not assumed from the version: 1.14.0 without ROTARY_AMOUNT', async () => {
  const r = await rig({ sim: { apiVersion: '1.14.0', caps: { ROTARY_AMOUNT: false } } });
  try {
    await r.until(() => stateOf(r) === 'connected', 'connected');
    const caps = r.get('companion.capabilities')?.value as {
      caps: Record<string, unknown>;
      features: Record<string, boolean>;
    };
    assert.equal(caps.caps['ROTARY_AMOUNT'], false);
    assert.equal(caps.features['rotaryAmount'], false);
    const c = await r.client('ops');
    const ack = await c.command('companion', `companion.device.${DEV}.key.0`, 'rotate', { direction: 2 })
      .done;
    assert.equal((ack.payload as { status: string }).status, 'rejected');
    assert.equal(r.sim.linesNamed('KEY-ROTATE').length, 0);
  } finally {
    await r.close();
  }
});
