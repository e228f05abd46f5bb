/**
 * Hot standby (docs/companion.md "Hot standby") with two Satellite servers: the primary goes away, the adapter
 * is on the secondary within 5 s, `companion.connection.active` names it, keys are redrawn by it (stale until
 * then), a command during the switch fails at once with the reason and one after it succeeds. Failback is
 * not automatic: with the primary back the adapter stays on the secondary until that one fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { DEV, rig, stateOf } from '../companion/harness.ts';
import { waitFor } from '@broadcast-ops/core/testing';

const KEY0 = `companion.device.${DEV}.key.0`;

async function until(pred: () => boolean, what: string, ms = 8000): Promise<void> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  await waitFor(() => pred() || undefined, { timeoutMs: ms, intervalMs: 5, what: what });
}

test('primary lost: on the secondary within 5 s, active host published, keys redrawn, commands fail fast then work; sticky failback', async (t) => {
  const secondary = new CompanionSimulator();
  const { ws: secPort } = await secondary.listen({ tcp: null });
  const primary = new CompanionSimulator();
  const { ws: priPort } = await primary.listen({ tcp: null });
  primary.setButton(1, 0, 0, { text: 'PRIMARY' });
  secondary.setButton(1, 0, 0, { text: 'SECONDARY' });
  const r = await rig({
    sim: {},
    companion: {
      hosts: [
        { host: '127.0.0.1', port: priPort },
        { host: '127.0.0.1', port: secPort },
      ],
      // A visible switch window for the command that must fail during it.
      failoverDelay: 600,
      reconnectDelay: 600,
      maxReconnectDelay: 1200,
      reconnectJitter: 0,
      connectionTimeout: 4000,
    },
  });
  try {
    const active = (): { connected: boolean; port: number; role: string } | undefined =>
      r.get('companion.connection.active')?.value as { connected: boolean; port: number; role: string };
    const text0 = (): string | undefined => (r.get(KEY0)?.value as { text?: string } | undefined)?.text;
    await until(() => stateOf(r) === 'connected' && active()?.connected === true, 'connected');
    assert.equal(
      active()?.port,
      priPort,
      `the first host that answers is the primary (${JSON.stringify(r.get('companion.connection.lastError'))})`,
    );
    assert.equal(active()?.role, 'primary');
    await until(() => text0() === 'PRIMARY' && r.get(KEY0)?.stale === false, 'drawn by the primary');
    assert.equal(secondary.devices.length, 0, 'the standby is not registered while the primary serves');

    const c = await r.client('ops');
    const lostAt = Date.now();
    await primary.close();
    await until(() => stateOf(r) === 'reconnecting', 'reconnecting');
    assert.equal(r.get(KEY0)?.stale, true, 'state from the old host is stale');
    // A command during the switch fails at once, with the reason.
    const t0 = Date.now();
    const during = await c.command('companion', KEY0, 'press').done;
    assert.equal(during.payload.status, 'failed');
    assert.match(during.payload.error?.message ?? '', /failing over to 127\.0\.0\.1:\d+/);
    assert.ok(Date.now() - t0 < 1000, 'failed fast');

    await until(() => active()?.connected === true && active()?.port === secPort, 'on the secondary', 5000);
    const switchMs = Date.now() - lostAt;
    assert.ok(switchMs < 5000, `switched in ${switchMs} ms`);
    t.diagnostic(`primary lost → registered on the secondary in ${switchMs} ms`);
    assert.equal(active()?.role, 'backup');
    await until(() => text0() === 'SECONDARY' && r.get(KEY0)?.stale === false, 'redrawn by the secondary');
    const after = await c.command('companion', KEY0, 'press').done;
    assert.equal(after.payload.status, 'completed');
    assert.equal(secondary.linesNamed('KEY-PRESS').length, 2, 'the press reached the secondary');

    // The primary comes back: no automatic failback (documented), the secondary keeps serving.
    await primary.listen({ ws: priPort ?? 0, tcp: null });
    await new Promise((res) => setTimeout(res, 1500));
    assert.equal(active()?.port, secPort);
    assert.equal(primary.devices.length, 0);
    // The secondary fails: back to the primary.
    await secondary.close();
    await until(
      () => active()?.connected === true && active()?.port === priPort,
      'back on the primary',
      5000,
    );
    await until(() => text0() === 'PRIMARY' && r.get(KEY0)?.stale === false, 'redrawn by the primary');
  } finally {
    await r.close();
    await primary.close();
    await secondary.close();
  }
});
