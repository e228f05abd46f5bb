/**
 * End to end: a client app subscribed to `companion.**` sees the simulated Companion's key and variable
 * changes, presses a key and gets `completed` only after the simulator has received the KEY-PRESS lines.
 * Latencies are printed (the "within 50 ms" figure); the assertion bound is generous, shared CI runners
 * are noisy, and the bench is the place for a threshold.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEV, DEVICE, rig } from '../companion/harness.ts';

test('client subscribes to companion.**, sees key and variable changes, presses a key: completed after KEY-PRESS', async (t) => {
  const r = await rig();
  try {
    await r.until(() => r.get('companion.connection.state')?.value === 'connected', 'connected');
    const c = await r.client('studio-app');
    const seen = new Map<string, { value: unknown; at: number }>();
    c.on('state', (m) =>
      seen.set(m.path, { value: (m.payload as { value: unknown }).value, at: performance.now() }),
    );
    await c.subscribe(['companion.**'], { snapshot: true });
    assert.equal(seen.get('companion.connection.state')?.value, 'connected');

    const lat: { key: number[]; variable: number[] } = { key: [], variable: [] };
    for (let i = 0; i < 20; i++) {
      const text = `PGM ${i}`;
      const t0 = performance.now();
      r.sim.setButton(1, 0, 2, { text, color: '#ff0000' });
      await r.until(
        () =>
          (seen.get(`companion.device.${DEV}.key.2`)?.value as { text?: string } | undefined)?.text === text,
        'key delta',
      );
      lat.key.push((seen.get(`companion.device.${DEV}.key.2`)?.at ?? 0) - t0);
      const v = `10:00:${String(i).padStart(2, '0')}`;
      const t1 = performance.now();
      r.sim.setOutput('internal:time_hms', v);
      await r.until(() => seen.get('companion.variables.internal.time_hms')?.value === v, 'variable delta');
      lat.variable.push((seen.get('companion.variables.internal.time_hms')?.at ?? 0) - t1);
    }

    const events: [string, string, string | undefined][] = [];
    c.on('event', (m) => events.push([m.path, (m.payload as { event: string }).event, m.correlationId]));
    const before = r.sim.linesNamed('KEY-PRESS').length;
    let receivedAtCompletion = -1;
    const t2 = performance.now();
    const handle = c.command('companion', `companion.device.${DEV}.key.2`, 'press');
    c.on('ack', (m) => {
      if ((m.payload as { status: string }).status === 'completed' && m.payload.commandId === handle.id)
        receivedAtCompletion = r.sim.linesNamed('KEY-PRESS').length - before;
    });
    const ack = await handle.done;
    const roundTrip = performance.now() - t2;
    assert.equal((ack.payload as { status: string }).status, 'completed');
    assert.deepEqual(
      handle.acks.map((a) => (a.payload as { status: string }).status),
      ['received', 'completed'],
    );
    assert.equal(
      receivedAtCompletion,
      2,
      'both KEY-PRESS lines had reached Companion when completed arrived',
    );
    const lines = r.sim
      .linesNamed('KEY-PRESS')
      .slice(before)
      .map((l) => l.line);
    assert.deepEqual(lines, [
      `KEY-PRESS DEVICEID="${DEVICE}" KEY=2 PRESSED=1`,
      `KEY-PRESS DEVICEID="${DEVICE}" KEY=2 PRESSED=0`,
    ]);

    const p = (xs: number[], q: number): number =>
      [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? 0;
    const fmt = (xs: number[]): string =>
      `p50 ${p(xs, 0.5).toFixed(2)} ms, max ${Math.max(...xs).toFixed(2)} ms`;
    t.diagnostic(`Companion draw → client delta: ${fmt(lat.key)} (anchor: 50 ms)`);
    t.diagnostic(`Companion VARIABLE-VALUE → client delta: ${fmt(lat.variable)} (anchor: 50 ms)`);
    t.diagnostic(`press round trip (received → completed): ${roundTrip.toFixed(2)} ms`);
    // Generous bound: catches a broken path (a poll, a lost wake-up), not a slow machine.
    assert.ok(p(lat.key, 0.5) < 1000 && p(lat.variable, 0.5) < 1000, 'median delivery under a second');
  } finally {
    await r.close();
  }
});
