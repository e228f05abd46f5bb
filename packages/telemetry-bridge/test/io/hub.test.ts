import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '@broadcast-ops/core/testing';
import { createLogger } from '@broadcast-ops/core';
import { UUID_V7_RE } from '../../src/domain/ids.ts';
import { BridgeError } from '@broadcast-ops/bridge-client';
import { record, sleep, startTestBridge } from '../helpers.ts';

test('snapshot, then snapshot_complete, then deltas to every matching subscriber (same name twice)', async () => {
  const t = await startTestBridge();
  try {
    t.adapter.set('fake.a.b', 1);
    t.adapter.set('fake.a.c', { x: 2 });
    t.adapter.set('fake.z', 'other');
    const a = await t.client('viewer');
    const b = await t.client('viewer');
    assert.equal(a.namespace, 'app.viewer');
    assert.equal(b.namespace, 'app.viewer_2', 'a second client with the same name is told apart');
    const ra = record(a);
    const rb = record(b);
    const subId = await a.subscribe(['fake.a.*'], { snapshot: true });
    assert.match(subId, UUID_V7_RE, 'subscription ids are hub ids too');
    await b.subscribe(['fake.**'], { snapshot: false });
    t.adapter.set('fake.a.b', 3);
    t.adapter.set('fake.a.b', 3); // unchanged: no delta
    t.adapter.set('fake.z', 'changed');
    await waitFor(() => rb.all.filter((x) => x.type === 'state').length >= 2, { what: 'b deltas' });
    await waitFor(() => ra.all.filter((x) => x.type === 'state').length >= 3, { what: 'a snapshot + delta' });
    await sleep(50);
    const seqA = ra.all.filter((x) => x.type !== 'ack').map((x) => `${x.type}:${String(x.m['path'])}`);
    assert.deepEqual(seqA.slice(0, 2).sort(), ['state:fake.a.b', 'state:fake.a.c']);
    assert.equal(seqA[2], 'event:hub.subscriptions');
    assert.equal(
      (ra.all.find((x) => x.type === 'event')?.m['payload'] as { event: string }).event,
      'snapshot_complete',
    );
    assert.deepEqual(
      seqA.slice(3),
      ['state:fake.a.b'],
      'one delta for the change, none for the unchanged write',
    );
    const delta = ra.all.at(-1)!.m;
    assert.deepEqual(delta['payload'], { value: 3, owner: 'fake.device', version: 2 });
    assert.match(String(delta['id']), UUID_V7_RE);
    const snapEvent = ra.all.find((x) => x.type === 'event')!.m;
    assert.match(String(snapEvent['id']), UUID_V7_RE, 'hub ids are UUID v7, snapshot_complete included');
    assert.deepEqual(
      rb.all
        .filter((x) => x.type === 'state')
        .map((x) => [x.m['path'], (x.m['payload'] as { value: unknown }).value]),
      [
        ['fake.a.b', 3],
        ['fake.z', 'changed'],
      ],
    );
    // Offsets are hub-wide and increase along a connection.
    const offsets = rb.all.filter((x) => x.type === 'state').map((x) => Number(x.m['offset']));
    assert.ok(offsets[1]! > offsets[0]!);
    // Unsubscribe removes exactly the listed pattern.
    assert.equal(await b.unsubscribe(['fake.**']), 1);
    t.adapter.set('fake.z', 'again');
    t.adapter.set('fake.a.c', 5);
    await waitFor(() => ra.all.filter((x) => x.type === 'state').length >= 4);
    await sleep(50);
    assert.equal(rb.all.filter((x) => x.type === 'state').length, 2, 'no delivery after unsubscribe');
  } finally {
    await t.close();
  }
});

test('client ids are any bounded string; README-style example id works', async () => {
  const t = await startTestBridge();
  try {
    const c = await t.client('readme');
    const r = record(c);
    c.sendRaw(
      JSON.stringify({
        id: 'sub-1',
        type: 'subscribe',
        source: 'app.readme',
        path: 'hub.subscriptions',
        payload: { patterns: ['fake.**'], snapshot: true },
        timestamp: Date.now(),
        sequence: 1,
      }),
    );
    await waitFor(() => r.all.find((x) => x.type === 'ack'));
    const ack = r.all.find((x) => x.type === 'ack')!.m;
    assert.equal((ack['payload'] as { commandId: string; status: string }).commandId, 'sub-1');
    assert.equal((ack['payload'] as { status: string }).status, 'completed');
  } finally {
    await t.close();
  }
});

test('ownership: a client writes only app.<name>.custom.*; conflicts are refused', async () => {
  const t = await startTestBridge();
  try {
    t.adapter.set('fake.owned', 1);
    const a = await t.client('cam');
    const a2 = await t.client('cam');
    const ack = await a.setState('tally', 'red');
    assert.equal(ack.payload.status, 'completed');
    assert.equal(t.bridge.hub.store.get('app.cam.custom.tally')?.owner, 'app.cam');
    await assert.rejects(a.setStatePath('fake.owned', 2), (e: BridgeError) => e.code === 'STATE_CONFLICT');
    await assert.rejects(
      a2.setStatePath('app.cam.custom.tally', 'x'),
      (e: BridgeError) => e.code === 'STATE_CONFLICT',
    );
    await assert.rejects(a.setStatePath('nobody.key', 1), (e: BridgeError) => e.code === 'FORBIDDEN');
    await assert.rejects(a.publishEvent('fake.owned', 'pressed'), (e: BridgeError) => e.code === 'FORBIDDEN');
    assert.equal(t.bridge.hub.store.get('fake.owned')?.value, 1, 'refused writes change nothing');
    assert.throws(() => t.adapter.ctx!.setState('app.cam.custom.tally', 'blue'), /may not write/);
    // Unchanged write: acked, no new version.
    const same = await a.setState('tally', 'red');
    assert.deepEqual(same.payload.result, { unchanged: true });
  } finally {
    await t.close();
  }
});

test('stale on owner disconnect, cleared when the owner returns (clients and adapters)', async () => {
  const t = await startTestBridge();
  try {
    const watcher = await t.client('watcher');
    const rw = record(watcher);
    await watcher.subscribe(['app.*.custom.**', 'fake.**']);
    const owner = await t.client('gfx');
    await owner.setState('clip', 'intro');
    t.adapter.set('fake.k', 1);
    await owner.close();
    const states = (): Record<string, unknown>[] => rw.all.filter((x) => x.type === 'state').map((x) => x.m);
    await waitFor(() => states().some((m) => (m['payload'] as { stale?: boolean }).stale === true), {
      what: 'stale delta',
    });
    const stale = states().find((m) => (m['payload'] as { stale?: boolean }).stale === true)!;
    assert.equal(stale['path'], 'app.gfx.custom.clip');
    assert.deepEqual(stale['payload'], { value: 'intro', owner: 'app.gfx', version: 2, stale: true });
    const back = await t.client('gfx');
    assert.equal(back.namespace, 'app.gfx', 'the name is free again');
    await waitFor(() => states().length >= 4, { what: 'stale cleared' });
    assert.deepEqual(states()[3]!['payload'], { value: 'intro', owner: 'app.gfx', version: 3 });
    // Adapter link down: its keys go stale, one delta each; back up: cleared.
    t.adapter.ctx!.setConnected(false);
    await waitFor(() =>
      states().some((m) => m['path'] === 'fake.k' && (m['payload'] as { stale?: boolean }).stale),
    );
    t.adapter.ctx!.setConnected(true);
    await waitFor(() => states().filter((m) => m['path'] === 'fake.k').length === 3);
    assert.equal((states().at(-1)!['payload'] as { stale?: boolean }).stale, undefined);
  } finally {
    await t.close();
  }
});

test('command lifecycle: received then completed/failed/rejected; correlation id carried through', async () => {
  const t = await startTestBridge();
  try {
    const c = await t.client('ctl');
    const rc = record(c);
    await c.subscribe(['fake.**']);
    const ok = c.command(
      'fake',
      'fake.page.1.bank.1',
      'set',
      { key: 'lamp', value: 'on' },
      { correlationId: 'corr-1' },
    );
    const final = await ok.done;
    assert.deepEqual(
      ok.acks.map((a) => a.payload.status),
      ['received', 'completed'],
    );
    assert.equal(final.source, 'fake.device');
    assert.equal(ok.acks[0]!.source, 'hub.core');
    for (const a of ok.acks) {
      assert.equal(a.correlationId, 'corr-1');
      assert.equal(a.payload.commandId, ok.id);
      assert.equal(a.target, 'app.ctl');
      assert.equal(a.path, 'fake.page.1.bank.1');
    }
    await waitFor(() => rc.all.find((x) => x.type === 'state'));
    assert.equal(
      rc.all.find((x) => x.type === 'state')!.m['correlationId'],
      'corr-1',
      'state change carries it',
    );
    const echoed = await c.command('fake', 'fake.x', 'ok', { keyIndex: 0 }).done;
    assert.deepEqual(echoed.payload.result, { echoed: { keyIndex: 0 } });
    const failed = await c.command('fake', 'fake.x', 'fail').done;
    assert.equal(failed.payload.status, 'failed');
    assert.equal(failed.payload.error?.code, 'ADAPTER_ERROR');
    const rejected = await c.command('fake', 'fake.x', 'reject').done;
    assert.equal(rejected.payload.status, 'rejected');
    assert.equal(rejected.payload.error?.code, 'FORBIDDEN');
    const thrown = await c.command('fake', 'fake.x', 'throw').done;
    assert.equal(thrown.payload.status, 'failed');
    assert.match(thrown.payload.error?.message ?? '', /exploded/);
    // Command without a correlation id: its own id becomes the correlation id.
    const plain = c.command('fake', 'fake.x', 'ok');
    await plain.done;
    assert.ok(plain.acks.every((a) => a.correlationId === plain.id));
    // Target by adapter name works as well as by alias.
    assert.equal((await c.command('fake.device', 'fake.x', 'ok').done).payload.status, 'completed');
    await assert.rejects(
      c.command('nothere', 'fake.x', 'ok').done,
      (e: BridgeError) => e.code === 'UNKNOWN_TARGET',
    );
    await assert.rejects(
      c.command('fake', 'fake.x', '').done,
      (e: BridgeError) => e.code === 'INVALID_MESSAGE',
    );
    assert.deepEqual(t.adapter.unexpected, []);
  } finally {
    await t.close();
  }
});

test('ttl: expiry in flight answers timeout and aborts; expired on arrival is never dispatched', async () => {
  const t = await startTestBridge();
  try {
    const c = await t.client('ctl');
    const h = c.command('fake', 'fake.x', 'hang', {}, { ttl: 150 });
    const final = await h.done;
    assert.deepEqual(
      h.acks.map((a) => a.payload.status),
      ['received', 'timeout'],
    );
    assert.equal(final.payload.error?.code, 'TIMEOUT');
    await waitFor(() => t.adapter.aborted.includes(h.id), { what: 'adapter abort signal' });
    const before = t.adapter.executed.length;
    const late = c.command('fake', 'fake.x', 'ok', {}, { ttl: 1000, timestamp: Date.now() - 5000 });
    assert.equal((await late.done).payload.status, 'timeout');
    assert.equal(t.adapter.executed.length, before, 'an expired command is not executed');
    // Without ttl the configured default timeout applies.
    const t2 = await startTestBridge({ commands: { defaultTimeout: 100 } });
    try {
      const c2 = await t2.client('ctl');
      assert.equal((await c2.command('fake', 'fake.x', 'hang').done).payload.status, 'timeout');
    } finally {
      await t2.close();
    }
  } finally {
    await t.close();
  }
});

test('idempotency: a repeated key replays the cached acks and executes once (done and in flight)', async () => {
  const t = await startTestBridge();
  try {
    const c = await t.client('ctl');
    const first = c.command('fake', 'fake.x', 'ok', { n: 1 }, { idempotencyKey: 'press-1' });
    await first.done;
    const again = c.command('fake', 'fake.x', 'ok', { n: 1 }, { idempotencyKey: 'press-1' });
    const finalAgain = await again.done;
    assert.equal(t.adapter.executed.filter((e) => e.id === first.id).length, 1, 'executed once');
    assert.deepEqual(
      again.acks.map((a) => [a.payload.status, a.payload.commandId, a.id]),
      first.acks.map((a) => [a.payload.status, a.payload.commandId, a.id]),
      'the very same acks are replayed',
    );
    assert.deepEqual(finalAgain.payload.result, { echoed: { n: 1 } });
    // In flight: the repeat gets `received` at once and the final ack too; still one execution.
    const d1 = c.command('fake', 'fake.x', 'deferred', {}, { idempotencyKey: 'slow-1' });
    await waitFor(() => d1.acks.length === 1);
    const d2 = c.command('fake', 'fake.x', 'deferred', {}, { idempotencyKey: 'slow-1' });
    await waitFor(() => d2.acks.length === 1, { what: 'received replayed' });
    t.adapter.resolveDeferred({ status: 'completed', result: 'done' });
    const [f1, f2] = await Promise.all([d1.done, d2.done]);
    assert.equal(f1.id, f2.id);
    assert.equal(t.adapter.executed.filter((e) => e.action === 'deferred').length, 1);
    // A different key executes again.
    await c.command('fake', 'fake.x', 'ok', { n: 1 }, { idempotencyKey: 'press-2' }).done;
    assert.equal(t.adapter.executed.filter((e) => e.action === 'ok').length, 2);
  } finally {
    await t.close();
  }
});

test('rate limit: every message over the limit is answered RATE_LIMITED and counted', async () => {
  const t = await startTestBridge({ clientTransport: { rateLimit: 20, rateLimitWindow: 60_000 } });
  try {
    const c = await t.client('chatty');
    const r = record(c);
    for (let i = 0; i < 50; i++) {
      c.sendRaw(
        JSON.stringify({
          id: `m-${i}`,
          type: 'state',
          path: 'app.chatty.custom.n',
          payload: { value: i },
          timestamp: Date.now(),
        }),
      );
    }
    await waitFor(() => r.all.length >= 50, { what: '50 answers' });
    await sleep(50);
    const acks = r.all.filter((x) => x.type === 'ack');
    const limited = r.all.filter(
      (x) => x.type === 'error' && (x.m['payload'] as { code: string }).code === 'RATE_LIMITED',
    );
    assert.equal(acks.length, 20);
    assert.equal(limited.length, 30, 'not silently dropped');
    assert.deepEqual(
      limited.map((x) => (x.m['payload'] as { relatedMessageId?: string }).relatedMessageId),
      Array.from({ length: 30 }, (_, k) => `m-${k + 20}`),
      'each refusal names the refused message',
    );
    assert.equal(r.all.length, 50);
    const text = await t.bridge.metrics.registry.metrics();
    assert.match(text, /telemetry_bridge_rate_limit_hits_total\{client="app"\} 30/);
  } finally {
    await t.close();
  }
});

test('bad input: clear errors, connection stays usable, others unaffected', async () => {
  const t = await startTestBridge();
  try {
    const bad = await t.client('bad');
    const good = await t.client('good');
    const rb = record(bad);
    const rg = record(good);
    await good.subscribe(['fake.**']);
    bad.sendRaw('not json');
    bad.sendRaw(JSON.stringify({ id: 'x1', type: 'command', path: 'fake.x', payload: {}, timestamp: 1 }));
    bad.sendRaw(
      JSON.stringify({
        id: 'x2',
        type: 'subscribe',
        path: 'hub.subscriptions',
        payload: { patterns: ['a.**.b'] },
        timestamp: 1,
      }),
    );
    await waitFor(() => rb.all.length >= 3);
    assert.equal(rb.all[0]!.m['code'], 'PARSE_ERROR', 'transport-level error, not an envelope');
    assert.equal(
      (rb.all[1]!.m['payload'] as { code: string; relatedMessageId: string }).code,
      'INVALID_MESSAGE',
    );
    assert.equal((rb.all[1]!.m['payload'] as { relatedMessageId: string }).relatedMessageId, 'x1');
    assert.equal((rb.all[2]!.m['payload'] as { code: string }).code, 'INVALID_MESSAGE');
    t.adapter.set('fake.still', 'works');
    await waitFor(() => rg.all.some((x) => x.type === 'state'));
    assert.equal((await bad.setState('ok', 1)).payload.status, 'completed');
  } finally {
    await t.close();
  }
});

test('resume after reconnect: since {offset, epoch} replays the missed deltas, once each', async () => {
  const t = await startTestBridge();
  try {
    const c = await t.client('resume', { reconnect: { enabled: true, initialDelayMs: 50 } });
    const r = record(c);
    await c.subscribe(['fake.**'], { snapshot: true });
    t.adapter.set('fake.n', 1);
    await waitFor(() => r.all.some((x) => x.type === 'state'));
    const replayed: number[] = [];
    c.on('snapshotComplete', (i) => {
      if (i.replayed !== undefined) replayed.push(i.replayed);
    });
    c.socket!.terminate();
    await waitFor(() => !c.connected);
    t.adapter.set('fake.n', 2);
    t.adapter.set('fake.m', 3);
    await waitFor(() => c.connected, { what: 'reconnected' });
    await waitFor(() => replayed.length === 1, { what: 'replay done' });
    assert.equal(replayed[0], 2);
    t.adapter.set('fake.n', 4);
    await waitFor(() => r.all.filter((x) => x.type === 'state').length === 4);
    const values = r.all
      .filter((x) => x.type === 'state')
      .map((x) => (x.m['payload'] as { value: unknown }).value);
    assert.deepEqual(values, [1, 2, 3, 4]);
    const offsets = r.all.filter((x) => x.type === 'state').map((x) => Number(x.m['offset']));
    assert.deepEqual(
      [...offsets].sort((a, b) => a - b),
      offsets,
    );
    assert.equal(new Set(offsets).size, offsets.length);
    // Two overlapping subscriptions resumed on one connection: each missed message once.
    const two = await t.client('two', { reconnect: { enabled: true, initialDelayMs: 50 } });
    const seen: number[] = [];
    two.on('state', (m) => seen.push(m.offset!));
    await two.subscribe(['fake.**']);
    await two.subscribe(['fake.n']);
    two.socket!.terminate();
    await waitFor(() => !two.connected);
    t.adapter.set('fake.n', 5);
    t.adapter.set('fake.m', 6);
    await waitFor(() => two.connected && seen.length >= 2);
    t.adapter.set('fake.n', 7);
    await waitFor(() => seen.length >= 3);
    await sleep(50);
    assert.equal(seen.length, 3, 'no duplicate from the overlapping replay');
    assert.equal(new Set(seen).size, 3);
    // A wrong epoch cannot be replayed: recovery_failed, then a full snapshot.
    const other = await t.client('other');
    const ro = record(other);
    const failed: string[] = [];
    other.on('recoveryFailed', (i) => failed.push(i.reason));
    other.sendRaw(
      JSON.stringify({
        id: 's-1',
        type: 'subscribe',
        path: 'hub.subscriptions',
        payload: { patterns: ['fake.**'], since: { offset: 1, epoch: 'not-this-one' } },
        timestamp: Date.now(),
      }),
    );
    await waitFor(() => failed.length === 1 && ro.all.filter((x) => x.type === 'state').length === 2);
    assert.equal(failed[0], 'epoch changed');
  } finally {
    await t.close();
  }
});

test('log records: JSON with numeric level, ISO time, service, component and the command correlationId', async () => {
  const lines: string[] = [];
  const logger = createLogger({
    service: 'telemetry-bridge',
    destination: { write: (s: string) => void lines.push(s) },
  });
  const t = await startTestBridge({}, { logger });
  try {
    const c = await t.client('logs');
    await c.command('fake', 'fake.x', 'fail', {}, { correlationId: 'corr-log-1' }).done;
    await waitFor(() => lines.some((l) => l.includes('corr-log-1')));
    const rec = JSON.parse(lines.find((l) => l.includes('corr-log-1'))!) as Record<string, unknown>;
    assert.equal(rec['level'], 40);
    assert.match(String(rec['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(rec['service'], 'telemetry-bridge');
    assert.equal(rec['component'], 'hub');
    assert.equal(rec['correlationId'], 'corr-log-1');
    assert.equal(rec['msg'], 'command finished');
    assert.equal(rec['status'], 'failed');
  } finally {
    await t.close();
  }
});

test('a 10,000-key snapshot reaches a new subscriber whole, then snapshot_complete', async () => {
  const t = await startTestBridge();
  try {
    for (let k = 0; k < 10_000; k++) t.adapter.set(`fake.keys.k${k}`, { k, label: `key number ${k}` });
    const c = await t.client('big');
    let states = 0;
    let completeAfter = -1;
    c.on('state', () => states++);
    c.on('snapshotComplete', () => {
      completeAfter = states;
    });
    await c.subscribe(['fake.keys.*'], { snapshot: true });
    await waitFor(() => completeAfter >= 0, { timeoutMs: 20_000, what: 'snapshot_complete' });
    assert.equal(completeAfter, 10_000);
    assert.ok(c.connected, 'a big snapshot is not a slow consumer');
  } finally {
    await t.close();
  }
});
