/**
 * Snapshot streams are bounded per connection (README "Per-client bounds"): a client that stops reading and
 * keeps subscribing with `snapshot: true` is refused once its pending snapshot keys would pass
 * `maxPendingSnapshotKeys`; a replay that falls behind the ring turns into a snapshot only within the same
 * bound, otherwise its subscription is dropped and named. A stream that fails on a timer drops its
 * subscription (no deaf subscription stays behind) and the error names it. The hub on a `ManualClock`;
 * the client library's report of a dropped subscription: test/io/snapshot-bounds.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { HUB_NAMESPACE, Hub, type HubLimits } from '../../src/domain/hub.ts';
import type { ClientSession, SessionTransport } from '../../src/io/client-session.ts';
import { openSession } from '../quick-fixtures.ts';

const SOFT = 1024 * 1024;

/** A socket whose reader can stop: while stalled it reports a backlog just over the soft limit. */
class Transport implements SessionTransport {
  sent: Record<string, unknown>[] = [];
  stalled = false;
  remote = 'test';
  bufferedAmount(): number {
    return this.stalled ? SOFT + 1 : 0;
  }
  send(d: string): void {
    this.sent.push(JSON.parse(d) as Record<string, unknown>);
  }
  close(): void {}
}

function session(hub: Hub, clock: ManualClock, name: string): { s: ClientSession; t: Transport } {
  const t = new Transport();
  return { s: openSession(hub, clock, t, name), t };
}

const frame = (o: Record<string, unknown>): string => JSON.stringify({ timestamp: 1, ...o });

function hubWithKeys(keys: number, limits: Partial<HubLimits>): { hub: Hub; clock: ManualClock } {
  const clock = new ManualClock();
  const hub = new Hub({
    clock,
    logger: silentLogger(),
    limits: { rateLimit: 100_000, ...limits },
  });
  for (let i = 0; i < keys; i++) hub.writeState(HUB_NAMESPACE, `hub.test.k${i}`, i);
  return { hub, clock };
}

type Msg = Record<string, unknown> & { payload: Record<string, unknown> };
const errors = (t: Transport): Msg[] => t.sent.filter((m) => m['type'] === 'error') as Msg[];

test('a client that stops reading cannot queue snapshots beyond maxPendingSnapshotKeys', () => {
  const { hub, clock } = hubWithKeys(5000, { maxPendingSnapshotKeys: 12_000 });
  const c = session(hub, clock, 'abuser');
  c.t.stalled = true;
  for (let i = 0; i < 200; i++)
    c.s.receive(
      frame({
        id: `s${i}`,
        type: 'subscribe',
        path: 'hub.subscriptions',
        payload: { patterns: ['hub.test.**'], snapshot: true },
      }),
    );
  const st = hub.stats();
  // Two snapshots of 5000 keys fit in 12,000; every later one is refused.
  assert.equal(st.streams, 2);
  assert.equal(st.subscriptions, 2);
  assert.equal(st.pendingSnapshotKeys, 10_000);
  assert.ok(st.pendingSnapshotKeys <= 12_000);
  // The reader comes back: the answers arrive, the two snapshots complete, and then there is room again.
  c.t.stalled = false;
  hub.flushClient(hub.clientByNamespace('app.abuser')!.connId);
  for (let i = 0; i < 10 && hub.stats().streams > 0; i++) clock.advance(10);
  const refused = errors(c.t);
  assert.equal(refused.length, 198);
  for (const e of refused) assert.equal(e.payload['code'], 'SUBSCRIPTION_FAILED');
  assert.equal(refused[0]?.payload['relatedMessageId'], 's2');
  assert.match(String(refused[0]?.payload['message']), /at most 12000/);
  assert.equal(hub.stats().streams, 0);
  assert.equal(hub.stats().pendingSnapshotKeys, 0);
  c.s.receive(
    frame({
      id: 'again',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns: ['hub.test.k1'], snapshot: true },
    }),
  );
  assert.equal(errors(c.t).length, 198, 'accepted once the earlier snapshots were sent');
});

test('a replay that falls behind the ring is dropped, and named, when its snapshot would pass the bound', () => {
  const { hub, clock } = hubWithKeys(3000, { maxPendingSnapshotKeys: 1000, replayRingSize: 50 });
  const c = session(hub, clock, 'resumer');
  const epoch = hub.epoch;
  c.t.stalled = true;
  c.s.receive(
    frame({
      id: 'r1',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns: ['hub.test.**'], since: { epoch, offset: hub.offset - 10 } },
    }),
  );
  assert.equal(hub.stats().streams, 1, 'the replay was accepted');
  // The ring moves on past the replay's position while the reader is away.
  for (let i = 0; i < 100; i++) hub.writeState(HUB_NAMESPACE, `hub.other.k${i}`, i);
  c.t.stalled = false;
  hub.flushClient(hub.clientByNamespace('app.resumer')!.connId);
  for (let i = 0; i < 10 && hub.stats().streams > 0; i++) clock.advance(10);

  const ack = c.t.sent.find((m) => m['type'] === 'ack') as Msg;
  const subscriptionId = (ack.payload['result'] as { subscriptionId: string }).subscriptionId;
  const st = hub.stats();
  assert.equal(st.streams, 0);
  assert.equal(st.pendingSnapshotKeys, 0, 'no snapshot of 3000 keys was queued');
  assert.equal(st.subscriptions, 0, 'the subscription is gone, not left deaf');
  assert.equal(st.patterns, 0);
  const e = errors(c.t).at(-1)!;
  assert.equal(e.payload['code'], 'SUBSCRIPTION_FAILED');
  assert.equal(e.payload['relatedMessageId'], 'r1');
  assert.deepEqual(e.payload['details'], { subscriptionId, patterns: ['hub.test.**'] });
});

test('a stream that fails on a timer drops its subscription and says which one; others carry on', () => {
  const { hub, clock } = hubWithKeys(0, {});
  for (let i = 0; i < 10; i++) {
    hub.writeState(HUB_NAMESPACE, `hub.a.k${i}`, i);
    hub.writeState(HUB_NAMESPACE, `hub.b.k${i}`, i);
  }
  const c = session(hub, clock, 'victim');
  c.t.stalled = true;
  for (const [id, pattern] of [
    ['a', 'hub.a.*'],
    ['b', 'hub.b.*'],
  ] as const)
    c.s.receive(
      frame({
        id,
        type: 'subscribe',
        path: 'hub.subscriptions',
        payload: { patterns: [pattern], snapshot: true },
      }),
    );
  // The store fails once while the first snapshot is paged out on a timer.
  const get = hub.store.get.bind(hub.store);
  let failures = 1;
  hub.store.get = (path: string) => {
    if (failures > 0 && path.startsWith('hub.a.')) {
      failures--;
      throw new Error('injected');
    }
    return get(path);
  };
  c.t.stalled = false;
  hub.flushClient(hub.clientByNamespace('app.victim')!.connId);
  for (let i = 0; i < 10 && hub.stats().streams > 0; i++) clock.advance(10);
  const acks = c.t.sent.filter((m) => m['type'] === 'ack') as Msg[];
  assert.equal(acks.length, 2);
  const subA = (acks[0]!.payload['result'] as { subscriptionId: string }).subscriptionId;

  const e = errors(c.t);
  assert.equal(e.length, 1);
  assert.equal(e[0]!.payload['code'], 'INTERNAL_ERROR');
  assert.equal(e[0]!.payload['relatedMessageId'], 'a');
  assert.deepEqual(e[0]!.payload['details'], { subscriptionId: subA, patterns: ['hub.a.*'] });
  const st = hub.stats();
  assert.equal(st.subscriptions, 1, 'the failed subscription was removed');
  assert.equal(st.patterns, 1);
  assert.equal(st.streams, 0, 'the other snapshot completed');
  const done = c.t.sent.filter(
    (m) => m['type'] === 'event' && (m['payload'] as { event: string }).event === 'snapshot_complete',
  );
  assert.equal(done.length, 1);
  // The surviving subscription is live; nothing goes to the dropped one.
  c.t.sent = [];
  hub.writeState(HUB_NAMESPACE, 'hub.b.k1', 'new');
  hub.writeState(HUB_NAMESPACE, 'hub.a.k1', 'new');
  const paths = c.t.sent.filter((m) => m['type'] === 'state').map((m) => m['path']);
  assert.deepEqual(paths, ['hub.b.k1']);
});
