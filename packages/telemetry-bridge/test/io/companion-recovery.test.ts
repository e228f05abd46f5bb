/**
 * Recovery as a client sees it: Companion down at start, a dropped connection, a stalled (silent) link and
 * garbage on the wire. Each time `companion.connection.state` moves through the documented values, keys turn
 * stale while the link is down and fresh after the surface is re-added and redrawn. The backoff delays
 * themselves: test/domain/companion-backoff.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BridgeClient } from '@broadcast-ops/bridge-client';
import { freePort } from '../helpers.ts';
import { DEV, rig, stateOf, type Rig } from '../companion/harness.ts';
import { waitFor } from '@broadcast-ops/core/testing';

const KEY0 = `companion.device.${DEV}.key.0`;

interface Seen {
  states: string[];
  key0: { text: unknown; stale: boolean }[];
}

async function watch(c: BridgeClient): Promise<Seen> {
  const seen: Seen = { states: [], key0: [] };
  c.on('state', (m) => {
    const p = m.payload as { value: unknown; stale?: boolean };
    if (m.path === 'companion.connection.state' && !p.stale) {
      if (seen.states.at(-1) !== p.value) seen.states.push(p.value as string);
    }
    if (m.path === KEY0)
      seen.key0.push({ text: (p.value as { text?: unknown } | null)?.text, stale: p.stale === true });
  });
  await c.subscribe(['companion.**'], { snapshot: true });
  return seen;
}

async function until(pred: () => boolean, what: string, ms = 8000): Promise<void> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  await waitFor(() => pred() || undefined, { timeoutMs: ms, intervalMs: 5, what: what });
}

/** The client saw key 0 go stale and then come back fresh with `text`. */
async function staleThenFresh(seen: Seen, from: number, text: string): Promise<void> {
  await until(() => seen.key0.slice(from).some((k) => k.stale), 'key 0 stale');
  const staleAt = seen.key0.findIndex((k, i) => i >= from && k.stale);
  await until(() => seen.key0.slice(staleAt).some((k) => !k.stale && k.text === text), 'key 0 fresh again');
}

async function connected(r: Rig): Promise<void> {
  await until(() => stateOf(r) === 'connected', 'connected');
  await until(() => r.get(KEY0)?.stale === false && r.get(KEY0) !== undefined, 'key 0 fresh');
}

test('Companion down at start: connecting, then reconnecting with backoff, then connected when it comes up', async () => {
  const port = await freePort();
  const r = await rig({ simLater: true, port, companion: { reconnectDelay: 20, maxReconnectDelay: 80 } });
  try {
    const c = await r.client('watcher');
    const seen = await watch(c);
    await until(
      () => r.bridge.metrics.registry !== undefined && stateOf(r) === 'reconnecting',
      'reconnecting',
    );
    assert.match(String(r.get('companion.connection.lastError')?.value), /ECONNREFUSED|connect/);
    await new Promise((res) => setTimeout(res, 150));
    r.sim.setButton(1, 0, 0, { text: 'UP' });
    await r.sim.listen({ ws: port, tcp: null });
    await connected(r);
    await until(() => seen.states.at(-1) === 'connected', 'client saw connected');
    assert.deepEqual(seen.states.slice(-2), ['reconnecting', 'connected']);
    assert.ok(['connecting', 'reconnecting'].includes(seen.states[0] ?? ''), seen.states.join());
    await until(() => seen.key0.some((k) => k.text === 'UP' && !k.stale), 'key drawn');
  } finally {
    await r.close();
  }
});

test('maxReconnectAttempts exhausted: state error with the reason', async () => {
  const port = await freePort();
  const r = await rig({ simLater: true, port, companion: { maxReconnectAttempts: 2, reconnectDelay: 10 } });
  try {
    await until(() => stateOf(r) === 'error', 'error');
    assert.match(String(r.get('companion.connection.lastError')?.value), /gave up after 2 attempts/);
  } finally {
    await r.close();
  }
});

test('connection dropped: keys stale and state reconnecting, then re-added, redrawn and fresh', async () => {
  const r = await rig();
  r.sim.setButton(1, 0, 0, { text: 'A' });
  try {
    await connected(r);
    const c = await r.client('watcher');
    const seen = await watch(c);
    const from = seen.key0.length;
    r.sim.setButton(1, 0, 0, { text: 'B' });
    r.sim.dropConnections();
    await staleThenFresh(seen, from, 'B');
    await until(() => seen.states.at(-1) === 'connected', 'connected again');
    assert.deepEqual(seen.states.slice(-2), ['reconnecting', 'connected']);
    assert.equal(r.sim.linesNamed('ADD-DEVICE').length, 2, 'surface re-added once');
    assert.equal(r.sim.devices.length, 1);
    // Commands work on the new link.
    const ack = await c.command('companion', KEY0, 'press').done;
    assert.equal((ack.payload as { status: string }).status, 'completed');
  } finally {
    await r.close();
  }
});

test('stalled link (no replies, socket open): detected by silence, stale, reconnect once Companion answers again', async () => {
  const r = await rig({ companion: { deadAfter: 400, connectionTimeout: 400 } });
  r.sim.setButton(1, 0, 0, { text: 'S' });
  try {
    await connected(r);
    const c = await r.client('watcher');
    const seen = await watch(c);
    const from = seen.key0.length;
    r.sim.stall(true);
    await until(() => seen.key0.slice(from).some((k) => k.stale), 'stale after silence');
    assert.match(
      String(r.get('companion.connection.lastError')?.value),
      /no data from Companion|no registration/,
    );
    // A command while down fails at once with the reason, it does not hang.
    const during = await c.command('companion', KEY0, 'press').done;
    assert.equal((during.payload as { status: string }).status, 'failed');
    await new Promise((res) => setTimeout(res, 300));
    r.sim.stall(false);
    await staleThenFresh(seen, from, 'S');
    await until(() => seen.states.at(-1) === 'connected', 'connected');
    assert.ok(seen.states.includes('reconnecting'));
  } finally {
    await r.close();
  }
});

test('garbage lines are ignored; an over-long line drops the link and the adapter recovers', async () => {
  const r = await rig({ transport: 'tcp' });
  r.sim.setButton(1, 0, 0, { text: 'G1' });
  try {
    await connected(r);
    const c = await r.client('watcher');
    const seen = await watch(c);
    r.sim.sendRaw('\u0000\u00ff%%% not a satellite line\nKEY-STATE DEVICEID="x" KEY=zz\n=== \n\r\n');
    r.sim.setButton(1, 0, 0, { text: 'G2' });
    await until(() => seen.key0.some((k) => k.text === 'G2' && !k.stale), 'next draw still processed');
    assert.equal(stateOf(r), 'connected');
    const from = seen.key0.length;
    // More than 2 MiB without a newline: bounded buffer, link dropped, clean reconnect.
    const chunk = 'x'.repeat(256 * 1024);
    for (let i = 0; i < 9; i++) r.sim.sendRaw(chunk);
    r.sim.setButton(1, 0, 0, { text: 'G3' });
    await staleThenFresh(seen, from, 'G3');
    assert.match(String(r.get('companion.connection.lastError')?.value), /line exceeds/);
    assert.equal(stateOf(r), 'connected');
  } finally {
    await r.close();
  }
});

test('slow replies: a command completes late but correctly; one whose ttl runs out is answered timeout', async () => {
  const r = await rig();
  try {
    await connected(r);
    const c = await r.client('ops');
    r.sim.replyDelayMs = 150;
    const t0 = performance.now();
    const slow = await c.command('companion', KEY0, 'down').done;
    assert.equal((slow.payload as { status: string }).status, 'completed');
    assert.ok(performance.now() - t0 >= 140, 'waited for the delayed OK');
    const late = await c.command('companion', KEY0, 'up', {}, { ttl: 50 }).done;
    assert.equal((late.payload as { status: string }).status, 'timeout');
    r.sim.replyDelayMs = 0;
    // The link itself stays up (PONGs keep coming, delayed) and the next command is fine.
    await until(() => r.sim.linesNamed('KEY-PRESS').length >= 2, 'the up line reached Companion');
    const ok = await c.command('companion', KEY0, 'press').done;
    assert.equal((ok.payload as { status: string }).status, 'completed');
    assert.equal(stateOf(r), 'connected');
  } finally {
    await r.close();
  }
});
