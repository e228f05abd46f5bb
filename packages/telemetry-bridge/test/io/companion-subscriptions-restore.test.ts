/**
 * Absolute-location keys across a Companion restart (docs/companion.md "Subscriptions"): the adapter sends
 * `ADD-SUB` again on the new session, the key is stale (with a reason in `companion.subscriptions`) until
 * Companion has sent its `SUB-STATE`, then fresh and updating. A location the new Companion cannot serve
 * stays stale with its reason. The link's own keys (`companion.connection.*`) are never marked stale.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { rig, stateOf, type Rig } from '../companion/harness.ts';
import { waitFor } from '@broadcast-ops/core/testing';

const LOC = 'companion.page.2.row.1.column.3';

interface Seen {
  loc: { text: unknown; stale: boolean }[];
  staleLinkKeys: string[];
}

async function until(pred: () => boolean, what: string, ms = 8000): Promise<void> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  await waitFor(() => pred() || undefined, { timeoutMs: ms, intervalMs: 5, what: what });
}

async function setUp(r: Rig): Promise<Seen> {
  const seen: Seen = { loc: [], staleLinkKeys: [] };
  const c = await r.client('watcher');
  c.on('state', (m) => {
    const p = m.payload as { value: unknown; stale?: boolean };
    if (m.path.startsWith('companion.connection.') && p.stale === true) seen.staleLinkKeys.push(m.path);
    if (m.path === LOC)
      seen.loc.push({ text: (p.value as { text?: unknown } | null)?.text, stale: p.stale === true });
  });
  await c.subscribe(['companion.**'], { snapshot: true });
  await until(() => stateOf(r) === 'connected', 'connected');
  r.sim.setButton(2, 1, 3, { text: 'BEFORE', color: '#00ff00' });
  const done = await c.command('companion', LOC, 'press').done;
  assert.equal(done.payload.status, 'completed');
  await until(() => r.get(LOC)?.stale === false, 'location drawn');
  assert.equal((r.get(LOC)?.value as { text?: string }).text, 'BEFORE');
  return seen;
}

function subStatus(r: Rig): { status: string; reason?: string } | undefined {
  const v = r.get('companion.subscriptions')?.value as Record<string, { status: string; reason?: string }>;
  return v?.['2/1/3'];
}

test('Companion restarted: ADD-SUB sent again, the location stale with a reason until it is redrawn, then live', async () => {
  const r = await rig({ sim: { subscriptions: true } });
  try {
    const seen = await setUp(r);
    assert.equal(r.sim.linesNamed('ADD-SUB').length, 1);
    const port = r.ports.ws;
    const from = seen.loc.length;
    await r.sim.close();
    await until(() => r.get(LOC)?.stale === true, 'location stale while Companion is down');
    assert.match(subStatus(r)?.reason ?? '', /link lost/);
    // Companion comes back with a different drawing at that location.
    r.sim.setButton(2, 1, 3, { text: 'AFTER', color: '#ff0000' });
    await r.sim.listen({ ws: port ?? 0, tcp: null });
    await until(() => r.sim.linesNamed('ADD-SUB').length === 2, 'ADD-SUB sent again');
    await until(
      () => r.get(LOC)?.stale === false && (r.get(LOC)?.value as { text?: string }).text === 'AFTER',
      'location redrawn by the new session',
    );
    assert.equal(subStatus(r)?.status, 'live');
    // The client never saw the location fresh with the old drawing after it went stale.
    // The client's copy arrives after the hub's (a loaded machine can delay it).
    await until(() => seen.loc.slice(from).some((k) => !k.stale && k.text === 'AFTER'), 'client saw AFTER');
    const firstStale = seen.loc.findIndex((k, i) => i >= from && k.stale);
    assert.ok(firstStale >= 0);
    const afterStale = seen.loc.slice(firstStale);
    const firstFresh = afterStale.findIndex((k) => !k.stale);
    assert.equal(afterStale[firstFresh]?.text, 'AFTER', JSON.stringify(seen.loc));
    // And it keeps updating on the new session.
    r.sim.setButton(2, 1, 3, { text: 'LIVE' });
    await until(
      () => (r.get(LOC)?.value as { text?: string }).text === 'LIVE',
      'live update after reconnect',
    );
    assert.deepEqual(seen.staleLinkKeys, [], 'companion.connection.* never marked stale');
  } finally {
    await r.close();
  }
});

test('a location the new Companion cannot serve (subscriptions off) stays stale with the reason', async () => {
  const r = await rig({ sim: { subscriptions: true } });
  const other = new CompanionSimulator({ subscriptions: false });
  try {
    await setUp(r);
    const port = r.ports.ws;
    await r.sim.close();
    await until(() => r.get(LOC)?.stale === true, 'location stale');
    await other.listen({ ws: port ?? 0, tcp: null });
    await until(() => stateOf(r) === 'connected', 'connected to the new Companion');
    await until(() => subStatus(r)?.status === 'unavailable', 'reported unavailable');
    assert.match(subStatus(r)?.reason ?? '', /SUBSCRIPTIONS=0/);
    // Well past the refresh: the other keys are fresh, the location is still stale.
    await new Promise((res) => setTimeout(res, 800));
    assert.equal(r.get('companion.device.tb_test_01.key.0')?.stale, false);
    assert.equal(r.get(LOC)?.stale, true);
    assert.equal(other.linesNamed('ADD-SUB').length, 0);
  } finally {
    await r.close();
    await other.close();
  }
});
