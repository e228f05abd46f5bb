import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { RedisBridge, type BridgeOptions, type BridgedSocket } from '../../src/io/redis-bridge.ts';
import type { BusMessage, RedisCluster } from '../../src/io/redis-cluster.ts';
import { msg } from '../hub-fakes.ts';

/**
 * The socket side of the Redis bridge when the owner lease lapses during a Redis outage
 * (docs/multi-instance.md "Failures"): when Redis answers again the lease key is gone until the owner
 * renews it, and a relay's round may read "no owner" first. That is not a change of owner: its bridged
 * sockets stay open and keep going to the owner they joined; only another instance's election closes them
 * (1012). The order of events is fixed here; on real Redis it is a race (test/redis-faults.test.ts).
 */

/** The part of RedisCluster the socket side uses, with the leader in the test's hand. */
class FakeCluster {
  readonly id = 'relay-1';
  leader: string | null = 'owner-1';
  readonly reachable = true;
  readonly isOwner = false;
  readonly published: { to: string; m: BusMessage }[] = [];
  subscribe(): () => void {
    return () => undefined;
  }
  publish(to: string, m: BusMessage): Promise<void> {
    this.published.push({ to, m });
    return Promise.resolve();
  }
}

class FakeSocket implements BridgedSocket {
  readonly ip = '192.0.2.10';
  readonly sent: string[] = [];
  closed: { code: number; reason: string } | null = null;
  send(text: string): void {
    this.sent.push(text);
  }
  end(): void {
    this.closed = { code: 1000, reason: 'end' };
  }
  probe(): Promise<boolean> {
    return Promise.resolve(true);
  }
  closeWith(code: number, reason: string): void {
    this.closed = { code, reason };
  }
}

function bridgeOn(cluster: FakeCluster): RedisBridge {
  const unused = {} as never;
  const options: BridgeOptions = {
    cluster: cluster as unknown as RedisCluster,
    broker: unused,
    hub: unused,
    access: unused,
    clock: new ManualClock(),
    logger: silentLogger(),
    holderOf: (t) => t,
    registerDeadlineMs: 10_000,
    ownerReady: () => false,
  };
  return new RedisBridge(options);
}

test('no owner known for a moment after a Redis outage: bridged sockets stay open and keep their owner', () => {
  const cluster = new FakeCluster();
  const bridge = bridgeOn(cluster);
  try {
    const socket = new FakeSocket();
    const handle = bridge.open(socket, 'show', 'peer-token');
    assert.ok(handle);

    // Redis is back, the lease key lapsed during the outage, the owner has not renewed it yet.
    cluster.leader = null;
    bridge.ownerChanged(null);
    assert.equal(socket.closed, null, 'a lapsed lease alone closed the bridged socket');
    assert.equal(bridge.bridgedSockets, 1);

    // The peer's `ready` still goes to the owner it joined, which renews its lease and answers.
    const ready = msg({ type: 'ready' });
    handle.message(ready);
    assert.deepEqual(cluster.published.at(-1), {
      to: 'owner-1',
      m: { t: 'msg', conn: 'relay-1.0', m: ready },
    });
    cluster.leader = 'owner-1';
    bridge.ownerChanged('owner-1');
    assert.equal(socket.closed, null);
  } finally {
    bridge.stop();
  }
});

test('another instance elected: sockets bridged to the old owner are closed with 1012', () => {
  const cluster = new FakeCluster();
  const bridge = bridgeOn(cluster);
  try {
    const socket = new FakeSocket();
    assert.ok(bridge.open(socket, 'show', 'peer-token'));
    bridge.ownerChanged(null);
    cluster.leader = 'owner-2';
    bridge.ownerChanged('owner-2');
    assert.equal(socket.closed?.code, 1012);
    assert.equal(bridge.bridgedSockets, 0);
  } finally {
    bridge.stop();
  }
});
