/**
 * Resume that never lies: connections cut in the middle of a snapshot or a replay by a proxy that resets
 * them, a large snapshot to a fast reader, many subscriptions across a reconnect, a throwing listener, and
 * a reconnect racing its own lingering socket. In each case the client library ends with the hub's state or
 * says `recoveryFailed`, never `snapshotComplete` over a partial view.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { startBridge } from '../../src/app.ts';
import { BridgeClient, BridgeError } from '@broadcast-ops/bridge-client';
import type { Hub } from '../../src/domain/hub.ts';
import { FakeAdapter, freePort, startTestBridge, sleep, testConfig } from '../helpers.ts';
import { ResetProxy } from '../reset-proxy.ts';

/** What an application keeps: the latest value per path; cleared when told recovery failed. */
function track(c: BridgeClient): { view: Map<string, unknown>; completes: number; failures: string[] } {
  const out = { view: new Map<string, unknown>(), completes: 0, failures: [] as string[] };
  c.on('state', (m) => {
    if (m.payload.value === null) out.view.delete(m.path);
    else out.view.set(m.path, m.payload.value);
  });
  c.on('recoveryFailed', (i) => {
    out.failures.push(i.reason);
    out.view.clear();
  });
  c.on('snapshotComplete', () => out.completes++);
  return out;
}

function hubView(hub: Hub, prefix: string): Map<string, unknown> {
  const m = new Map<string, unknown>();
  for (const e of hub.store.entries()) if (e.path.startsWith(prefix)) m.set(e.path, e.value);
  return m;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

test('a drop mid-snapshot: the library says recoveryFailed and ends with the complete state', async () => {
  const t = await startTestBridge();
  const proxy = new ResetProxy(portOf(t.bridge.clientUrl));
  await proxy.listen();
  const c = new BridgeClient({
    url: proxy.url,
    name: 'snap',
    reconnect: { initialDelayMs: 30, maxDelayMs: 60 },
  });
  try {
    const blob = 's'.repeat(10_000);
    for (let k = 0; k < 300; k++) t.adapter.set(`fake.snap.k${k}`, { k, blob });
    // The first connection is reset after ~1 MB of the ~3 MB snapshot.
    proxy.plan({ resetAfterBytes: 1_000_000 });
    const s = track(c);
    let dropped = false;
    c.on('disconnected', () => {
      if (dropped) return;
      dropped = true;
      // While the client is away: changes, deletions and new keys.
      for (let k = 0; k < 300; k += 3) t.adapter.set(`fake.snap.k${k}`, { k, blob: 'changed' });
      for (let k = 1; k < 300; k += 7) t.adapter.set(`fake.snap.k${k}`, null);
      t.adapter.set('fake.snap.new', 'fresh');
    });
    await c.connect();
    await c.subscribe(['fake.snap.**'], { snapshot: true });
    await waitFor(() => proxy.resets === 1 && c.connected && s.completes === 1, {
      timeoutMs: 15_000,
      what: 'reset, reconnect, snapshot complete',
    });
    assert.equal(s.failures.length, 1, 'the cut-off snapshot is reported');
    assert.match(s.failures[0]!, /interrupted/);
    assert.deepEqual(s.view, hubView(t.bridge.hub, 'fake.snap.'), 'complete after the new snapshot');
  } finally {
    await c.close();
    await proxy.close();
    await t.close();
  }
});

test('a drop mid-replay: the resume position stays at what was delivered; the next replay completes it', async () => {
  const t = await startTestBridge();
  const proxy = new ResetProxy(portOf(t.bridge.clientUrl));
  await proxy.listen();
  const c = new BridgeClient({
    url: proxy.url,
    name: 'replay',
    reconnect: { initialDelayMs: 30, maxDelayMs: 60 },
  });
  try {
    for (let k = 0; k < 500; k++) t.adapter.set(`fake.rep.k${k}`, 0);
    const s = track(c);
    const replays: number[] = [];
    c.on('snapshotComplete', (i) => {
      if (i.replayed !== undefined) replays.push(i.replayed);
    });
    await c.connect();
    await c.subscribe(['fake.rep.**'], { snapshot: true });
    await waitFor(() => s.completes === 1);
    // Second connection: reset ~400 KB into the ~1.2 MB replay; the third passes.
    proxy.plan({ resetAfterBytes: 400_000 });
    let away = true;
    c.on('connected', () => {
      away = false;
    });
    c.socket!.terminate();
    await waitFor(() => !c.connected);
    const pad = 'r'.repeat(2000);
    for (let k = 0; k < 500; k++) t.adapter.set(`fake.rep.k${k}`, { v: 1, pad });
    // The writes went into the ring while the client was away (its reconnect waits at least 30 ms), so the
    // resume must replay them; the planned reset has not fired yet (it cuts the next connection).
    assert.equal(away, true, 'the 500 writes happened while the client was disconnected');
    assert.equal(proxy.resets, 0);
    await waitFor(() => proxy.resets === 1 && c.connected && replays.length === 1, {
      timeoutMs: 15_000,
      what: 'reset mid-replay, then a replay that completes',
    });
    assert.deepEqual(s.failures, [], 'the ring still covers the position: no recovery failure needed');
    assert.deepEqual(s.view, hubView(t.bridge.hub, 'fake.rep.'), 'every key has its latest value');
    assert.ok(replays[0]! > 0 && replays[0]! <= 500);
  } finally {
    await c.close();
    await proxy.close();
    await t.close();
  }
});

test('a 48 MB snapshot reaches a fast reader whole (paged by drain, not cut at the hard limit)', async () => {
  const t = await startTestBridge();
  try {
    const blob = 'x'.repeat(100 * 1024);
    for (let k = 0; k < 480; k++) t.adapter.set(`fake.big.k${k}`, { k, blob });
    const c = await t.client('big');
    const s = track(c);
    let closed: number | undefined;
    c.on('disconnected', (d) => {
      closed = d.code;
    });
    await c.subscribe(['fake.big.**'], { snapshot: true });
    await waitFor(() => s.completes === 1 || closed !== undefined, { timeoutMs: 30_000, what: 'snapshot' });
    assert.equal(closed, undefined, 'not disconnected');
    assert.equal(s.view.size, 480);
    const q = t.bridge.hub.clientByNamespace('app.big')!;
    assert.ok(q.maxQueuedBytes < 1024 * 1024, `snapshot pages bypass the live queue (${q.maxQueuedBytes} B)`);
  } finally {
    await t.close();
  }
});

test('120 subscriptions across a reconnect: all restored in batches; a rate-limited batch is retried', async () => {
  const t = await startTestBridge();
  const c = new BridgeClient({
    url: t.bridge.clientUrl,
    name: 'many',
    reconnect: { initialDelayMs: 30, maxDelayMs: 60 },
  });
  try {
    await c.connect();
    // 120 subscribe calls against the default 100 messages/s: two halves a window apart.
    for (let half = 0; half < 2; half++) {
      await Promise.all(Array.from({ length: 60 }, (_, k) => c.subscribe([`fake.many.k${half * 60 + k}`])));
      await sleep(1050);
    }
    c.socket!.terminate();
    await waitFor(() => !c.connected);
    await waitFor(() => c.connected);
    await waitFor(() => t.bridge.hub.stats().patterns === 120, { what: '120 patterns restored' });
    for (let k = 0; k < 120; k++) t.adapter.set(`fake.many.k${k}`, k);
    const got = new Set<string>();
    c.on('state', (m) => got.add(m.path));
    await waitFor(() => got.size === 120, {
      what: 'a delta for each of the 120 patterns',
      timeoutMs: 10_000,
    });
  } finally {
    await c.close();
    await t.close();
  }
  // Retry on RATE_LIMITED, then a refusal reported with the patterns it lost.
  const strict = await startTestBridge({
    clientTransport: { rateLimit: 1, rateLimitWindow: 1000, maxPatternsPerClient: 100 },
  });
  const d = new BridgeClient({
    url: strict.bridge.clientUrl,
    name: 'strict',
    reconnect: { initialDelayMs: 30, maxDelayMs: 60 },
  });
  try {
    await d.connect();
    await d.subscribe(Array.from({ length: 60 }, (_, k) => `fake.a.k${k}`));
    await sleep(1050);
    await d.subscribe(
      Array.from({ length: 40 }, (_, k) => `fake.b.k${k}`),
      { filter: 'state' },
    );
    await sleep(1050);
    await assert.rejects(d.subscribe(['fake.c']), (e: BridgeError) => e.code === 'SUBSCRIPTION_FAILED');
    const lost: { patterns: string[]; code: string }[] = [];
    d.on('subscriptionLost', (l) => lost.push(l));
    let rateLimited = 0;
    d.on('error', (m) => {
      if ('payload' in m && m.payload.code === 'RATE_LIMITED') rateLimited++;
    });
    d.socket!.terminate();
    await waitFor(() => !d.connected);
    await waitFor(() => d.connected);
    await waitFor(() => strict.bridge.hub.stats().patterns === 100, {
      what: 'both batches restored',
      timeoutMs: 10_000,
    });
    assert.ok(rateLimited >= 1, 'the second batch met the rate limit');
    assert.deepEqual(lost, [], 'and was retried and restored');
    assert.equal(d.positions().length, 2);
    strict.adapter.set('fake.a.k5', 1);
    strict.adapter.set('fake.b.k39', 2);
    const paths: string[] = [];
    d.on('state', (m) => paths.push(m.path));
    await waitFor(() => paths.includes('fake.a.k5') && paths.includes('fake.b.k39'));
  } finally {
    await d.close();
    await strict.close();
  }
});

test('a pattern the restarted hub refuses is reported with subscriptionLost', async () => {
  const dir = tempDir('tb-lost-');
  const port = await freePort();
  const cfg = (max: number) => testConfig({ clientTransport: { port, maxPatternsPerClient: max } });
  let bridge = await startBridge({
    config: cfg(1000),
    logger: silentLogger(),
    adapters: [new FakeAdapter()],
  });
  const c = new BridgeClient({
    url: `ws://127.0.0.1:${port}/`,
    name: 'lost',
    reconnect: { initialDelayMs: 30, maxDelayMs: 60 },
  });
  try {
    await c.connect();
    await c.subscribe(Array.from({ length: 100 }, (_, k) => `fake.p.k${k}`));
    await c.subscribe(Array.from({ length: 20 }, (_, k) => `fake.q.k${k}`));
    const lost: { patterns: string[]; code: string }[] = [];
    c.on('subscriptionLost', (l) => lost.push(l));
    await bridge.close();
    bridge = await startBridge({ config: cfg(100), logger: silentLogger(), adapters: [new FakeAdapter()] });
    await waitFor(() => lost.length === 1, { what: 'the refused batch reported' });
    assert.equal(lost[0]!.code, 'SUBSCRIPTION_FAILED');
    assert.deepEqual(
      lost[0]!.patterns,
      Array.from({ length: 20 }, (_, k) => `fake.q.k${k}`),
    );
    assert.equal(c.positions().length, 1, 'only what was restored is kept');
  } finally {
    await c.close();
    await bridge.close();
    dir.remove();
  }
});

test('a throwing listener is reported and never wedges the connection', async () => {
  const t = await startTestBridge();
  try {
    const c = await t.client('thrower');
    const errors: string[] = [];
    c.on('listenerError', (e) => errors.push(`${e.event}: ${(e.error as Error).message}`));
    c.on('state', () => {
      throw new Error('app bug');
    });
    c.on('ack', () => {
      throw new Error('ack bug');
    });
    const values: unknown[] = [];
    c.on('state', (m) => values.push(m.payload.value));
    await c.subscribe(['fake.**']);
    t.adapter.set('fake.x', 1);
    t.adapter.set('fake.x', 2);
    await waitFor(() => values.length === 2, { what: 'later listeners still run' });
    assert.ok(c.connected);
    const ack = await c.setState('k', 1);
    assert.equal(ack.payload.status, 'completed', 'requests still answered');
    const done = await c.command('fake', 'fake.cmd', 'ok').done;
    assert.equal(done.payload.status, 'completed');
    assert.ok(errors.some((e) => e === 'state: app bug'));
    assert.ok(errors.some((e) => e === 'ack: ack bug'));
  } finally {
    await t.close();
  }
});

test('a reconnect while the old socket lingers: same namespace, and an idempotent retry runs once', async () => {
  const t = await startTestBridge();
  const proxy = new ResetProxy(portOf(t.bridge.clientUrl));
  await proxy.listen();
  const c = new BridgeClient({
    url: proxy.url,
    name: 'cam',
    reconnect: { initialDelayMs: 30, maxDelayMs: 60 },
  });
  try {
    await c.connect();
    assert.equal(c.namespace, 'app.cam');
    await c.setState('tally', 'red');
    const first = c.command('fake', 'fake.cmd', 'deferred', {}, { idempotencyKey: 'take-1' });
    await waitFor(() => t.adapter.executed.length === 1);
    // The network eats the connection: the client sees a reset, the hub's socket lingers, half open.
    proxy.strandLast();
    await assert.rejects(first.done, (e: BridgeError) => e.code === 'DISCONNECTED');
    await waitFor(() => c.connected, { what: 'reconnected' });
    assert.equal(c.namespace, 'app.cam', 'same namespace, not app.cam_2');
    const retry = c.command('fake', 'fake.cmd', 'deferred', {}, { idempotencyKey: 'take-1' });
    await waitFor(() => retry.acks.length === 1, { what: 'received (replayed)' });
    t.adapter.resolveDeferred({ status: 'completed', result: { ran: true } });
    const final = await retry.done;
    assert.equal(final.payload.status, 'completed');
    assert.equal(t.adapter.executed.length, 1, 'the retried idempotent command ran once');
    assert.equal(t.bridge.hub.store.get('app.cam.custom.tally')?.value, 'red');
    assert.equal(t.bridge.hub.store.get('app.cam.custom.tally')?.stale, false, 'its keys never went stale');
    assert.equal(t.bridge.hub.stats().clients, 1, 'the lingering connection was closed');
  } finally {
    await c.close();
    await proxy.close();
    await t.close();
  }
});

test('the same bearer token proves the identity: the newcomer takes the namespace, the old one stops (4005)', async () => {
  const token = 'shared-studio-token-0123456789';
  const t = await startTestBridge({ clientTransport: { requireAuth: true, authTokens: [token] } });
  try {
    const first = await t.client('graphics', { authToken: token, reconnect: { initialDelayMs: 30 } });
    await first.setState('page', 1);
    const gone: { code: number; willReconnect: boolean }[] = [];
    first.on('disconnected', (d) => gone.push(d));
    const second = await t.client('graphics', { authToken: token, reconnect: { initialDelayMs: 30 } });
    assert.equal(second.namespace, 'app.graphics', 'same token, same name: the namespace comes back');
    await waitFor(() => gone.length === 1);
    assert.deepEqual(gone[0], {
      code: 4005,
      reason: 'Superseded by a newer connection',
      willReconnect: false,
    });
    await sleep(100);
    assert.equal(first.connected, false, 'no tug of war');
    assert.equal(t.bridge.hub.store.get('app.graphics.custom.page')?.stale, false);
    // Without the token there is no way in, let alone into this namespace.
    const other = new BridgeClient({
      url: t.bridge.clientUrl,
      name: 'graphics',
      reconnect: { enabled: false },
    });
    await assert.rejects(other.connect(), BridgeError, 'no token: refused');
  } finally {
    await t.close();
  }
});
