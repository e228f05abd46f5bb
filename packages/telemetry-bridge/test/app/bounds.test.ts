/**
 * Per-client bounds and honest failure: keys per client capped, a departed client's keys stale then
 * expired, the replay ring bounded in bytes, INTERNAL_ERROR when the hub fails (never silence), commands in
 * flight capped per client: the hub and its client sessions on a `ManualClock`, no socket (quick tier).
 * Authentication failures logged and counted on a running bridge: test/io/bounds.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock, waitFor } from '@broadcast-ops/core/testing';
import { Hub } from '../../src/domain/hub.ts';
import type { EventLogSink } from '../../src/domain/journal.ts';
import { ReplayRing } from '../../src/domain/replay-ring.ts';
import type { ClientSession, SessionTransport } from '../../src/io/client-session.ts';
import { FakeAdapter, openSession } from '../quick-fixtures.ts';

class Transport implements SessionTransport {
  sent: Record<string, unknown>[] = [];
  closed: number | undefined;
  remote = 'test';
  bufferedAmount(): number {
    return 0;
  }
  send(d: string): void {
    this.sent.push(JSON.parse(d) as Record<string, unknown>);
  }
  close(code: number): void {
    this.closed = code;
  }
}

/** A client handshaken on the hub through an in-memory transport (no socket). */
function session(hub: Hub, clock: ManualClock, name: string): { s: ClientSession; t: Transport } {
  const t = new Transport();
  return { s: openSession(hub, clock, t, name), t };
}

const frame = (o: Record<string, unknown>): string => JSON.stringify({ timestamp: 1, ...o });

test('keys per client are capped; a departed client keeps its keys stale, then they expire', () => {
  const clock = new ManualClock();
  const hub = new Hub({
    clock,
    logger: silentLogger(),
    limits: { maxKeysPerClient: 3, departedKeyTtlMs: 60_000 },
  });
  const w = session(hub, clock, 'writer');
  for (let k = 0; k < 4; k++)
    w.s.receive(
      frame({ id: `w${k}`, type: 'state', path: `app.writer.custom.k${k}`, payload: { value: k } }),
    );
  const err = w.t.sent.find((m) => m['type'] === 'error')!;
  assert.equal((err['payload'] as { code: string }).code, 'FORBIDDEN');
  assert.deepEqual((err['payload'] as { details: unknown }).details, { limit: 3 });
  assert.equal(hub.store.countOf('app.writer'), 3, 'the fourth key was refused');
  // Overwriting and deleting existing keys is still allowed at the cap.
  w.s.receive(frame({ id: 'w5', type: 'state', path: 'app.writer.custom.k0', payload: { value: 'x' } }));
  assert.equal(hub.store.get('app.writer.custom.k0')?.value, 'x');

  const watcher = session(hub, clock, 'watcher');
  watcher.s.receive(
    frame({
      id: 's',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns: ['app.writer.**'] },
    }),
  );
  w.s.closed(1000);
  assert.equal(hub.store.get('app.writer.custom.k1')?.stale, true, 'stale while departed');
  clock.advance(59_000);
  assert.equal(hub.store.countOf('app.writer'), 3);
  clock.advance(1_000);
  assert.equal(hub.store.countOf('app.writer'), 0, 'expired after departedKeyTtl');
  const deletions = watcher.t.sent.filter(
    (m) => m['type'] === 'state' && (m['payload'] as { value: unknown }).value === null,
  );
  assert.equal(deletions.length, 3, 'one deletion delta per expired key');
  // A client that comes back in time keeps its keys.
  const again = session(hub, clock, 'writer');
  again.s.receive(frame({ id: 'a', type: 'state', path: 'app.writer.custom.z', payload: { value: 1 } }));
  again.s.closed(1000);
  clock.advance(30_000);
  const back = session(hub, clock, 'writer');
  assert.equal(back.s.namespace, 'app.writer');
  clock.advance(60_000);
  assert.equal(hub.store.get('app.writer.custom.z')?.value, 1, 'not expired: the owner came back');
  assert.equal(hub.store.get('app.writer.custom.z')?.stale, false);
  hub.abortAll();
});

test('the replay ring is bounded in bytes as well as in messages', () => {
  const ring = new ReplayRing({ maxMessages: 1000, maxBytes: 10_000 });
  const big = 'x'.repeat(3000);
  for (let o = 1; o <= 10; o++) ring.push(o, 'state', 'a.b', big);
  assert.ok(ring.bytes <= 10_000);
  assert.equal(ring.size, 3);
  assert.equal(ring.floor, 7, 'offsets 1..7 can no longer be replayed');
  assert.equal(ring.nextAfter(7)?.offset, 8);
  assert.equal(ring.nextAfter(10), undefined);
  const small = new ReplayRing({ maxMessages: 2, maxBytes: 1 << 20 });
  for (let o = 1; o <= 5; o++) small.push(o, 'event', 'a', '{}');
  assert.equal(small.size, 2);
  assert.equal(small.floor, 3);
});

test('INTERNAL_ERROR instead of silence: a failing event log refuses acks; a failing handler is answered', () => {
  const clock = new ManualClock();
  const failing: EventLogSink = {
    append: () => undefined,
    whenDurable: (done) => done(new Error('disk full')),
    writePending: () => undefined,
  };
  const hub = new Hub({ clock, logger: silentLogger(), log: failing, limits: { rateLimit: 1000 } });
  const adapter = new FakeAdapter();
  hub.registerAdapter(adapter);
  void hub.startAdapters();
  const c = session(hub, clock, 'app');
  c.s.receive(
    frame({ id: 'c1', type: 'command', target: 'fake', path: 'fake.x', payload: { action: 'ok' } }),
  );
  c.s.receive(frame({ id: 's1', type: 'state', path: 'app.app.custom.k', payload: { value: 1 } }));
  const errors = c.t.sent
    .filter((m) => m['type'] === 'error')
    .map((m) => m['payload'] as Record<string, unknown>);
  assert.deepEqual(
    errors.map((e) => [e['code'], e['relatedMessageId']]),
    [
      ['INTERNAL_ERROR', 'c1'],
      ['INTERNAL_ERROR', 's1'],
    ],
  );
  assert.equal(adapter.executed.length, 0, 'a command that could not be recorded is not executed');
  assert.equal(
    c.t.sent.filter((m) => m['type'] === 'ack').length,
    0,
    'no ack promised what a restart undoes',
  );
  // A bug while handling a frame: answered INTERNAL_ERROR, the connection carries on.
  const ok = new Hub({ clock, logger: silentLogger() });
  const d = session(ok, clock, 'app');
  const handle = ok.handle.bind(ok);
  ok.handle = () => {
    throw new Error('bug');
  };
  d.s.receive(
    frame({ id: 'u1', type: 'unsubscribe', path: 'hub.subscriptions', payload: { patterns: ['a'] } }),
  );
  const e = d.t.sent.at(-1)!;
  assert.equal((e['payload'] as { code: string }).code, 'INTERNAL_ERROR');
  assert.equal((e['payload'] as { relatedMessageId: string }).relatedMessageId, 'u1');
  ok.handle = handle;
  d.s.receive(
    frame({ id: 'u2', type: 'unsubscribe', path: 'hub.subscriptions', payload: { patterns: ['a'] } }),
  );
  assert.equal(d.t.sent.at(-1)!['type'], 'ack');
  assert.equal(d.t.closed, undefined);
  hub.abortAll();
});

test('paging: a blocked replay whose position leaves the ring turns into recovery_failed and a snapshot', () => {
  const clock = new ManualClock();
  const hub = new Hub({
    clock,
    logger: silentLogger(),
    limits: {
      replayRingSize: 10,
      outbound: { softLimitBytes: 1000, hardLimitBytes: 1 << 20, maxQueuedMessages: 1000, pollMs: 5 },
    },
  });
  hub.store.claim('dev', 'dev');
  for (let k = 0; k < 5; k++) hub.writeState('dev', `dev.k${k}`, 0);
  const since = hub.offset;
  for (let k = 0; k < 5; k++) hub.writeState('dev', `dev.k${k}`, 1);
  const c = session(hub, clock, 'slowreader');
  // The socket is full: nothing paged can be written.
  c.t.bufferedAmount = () => 5000;
  c.s.receive(
    frame({
      id: 'r',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns: ['dev.**'], since: { offset: since, epoch: hub.epoch } },
    }),
  );
  assert.deepEqual(
    c.t.sent.map((m) => m['type']),
    ['handshake_response'],
    'nothing more can go out (the ack waits in the queue)',
  );
  // Meanwhile the ring (10 messages) moves past the replay position.
  for (let k = 0; k < 5; k++) hub.writeState('dev', `dev.k${k}`, 2);
  for (let k = 0; k < 5; k++) hub.writeState('dev', `dev.k${k}`, 3);
  c.t.bufferedAmount = () => 0;
  clock.advance(5);
  const events = c.t.sent
    .filter((m) => m['type'] === 'event')
    .map((m) => (m['payload'] as { event: string }).event);
  assert.deepEqual(events, ['recovery_failed', 'snapshot_complete']);
  const states = c.t.sent.filter((m) => m['type'] === 'state');
  assert.deepEqual(
    states.map((m) => [m['path'], (m['payload'] as { value: unknown }).value]),
    [0, 1, 2, 3, 4].map((k) => [`dev.k${k}`, 3]),
    'the snapshot carries the current values, nothing from the stale replay',
  );
  // Live again: the next change arrives as a delta.
  hub.writeState('dev', 'dev.k0', 4);
  assert.equal((c.t.sent.at(-1)!['payload'] as { value: unknown }).value, 4);
  hub.abortAll();
});

test('commands in flight are capped per client: more are refused RATE_LIMITED, others unaffected, room again after', async () => {
  const clock = new ManualClock();
  const hub = new Hub({
    clock,
    logger: silentLogger(),
    limits: { rateLimit: 10_000, maxCommandsInFlightPerClient: 3 },
  });
  const adapter = new FakeAdapter();
  hub.registerAdapter(adapter);
  await hub.startAdapters();
  const cmd = (id: string, action: string, ttl?: number): string =>
    frame({
      id,
      type: 'command',
      target: 'fake',
      path: 'fake.x',
      payload: { action, params: {} },
      ...(ttl === undefined ? {} : { ttl }),
      timestamp: clock.now(),
    });
  const greedy = session(hub, clock, 'greedy');
  for (let i = 0; i < 10; i++) greedy.s.receive(cmd(`g${i}`, 'hang', 60_000));
  await waitFor(() => hub.stats().inflightCommands === 3 && greedy.t.sent.some((m) => m['type'] === 'error'));
  const refused = greedy.t.sent.filter((m) => m['type'] === 'error');
  assert.equal(refused.length, 7);
  for (const e of refused) {
    const p = e['payload'] as { code: string; details: unknown };
    assert.equal(p.code, 'RATE_LIMITED');
    assert.deepEqual(p.details, { limit: 3 });
  }
  assert.equal((refused[0]!['payload'] as { relatedMessageId: string }).relatedMessageId, 'g3');
  // Another client is not affected by the greedy one's cap.
  const other = session(hub, clock, 'other');
  other.s.receive(cmd('o1', 'hang', 60_000));
  await waitFor(() => hub.stats().inflightCommands === 4);
  assert.equal(other.t.sent.filter((m) => m['type'] === 'error').length, 0);
  // The greedy client's commands time out: room again.
  clock.advance(60_001);
  await waitFor(() => hub.stats().inflightCommands === 0);
  greedy.s.receive(cmd('g-again', 'hang', 60_000));
  await waitFor(() => hub.stats().inflightCommands === 1);
  assert.equal(greedy.t.sent.filter((m) => m['type'] === 'error').length, 7);
  hub.abortAll();
});
