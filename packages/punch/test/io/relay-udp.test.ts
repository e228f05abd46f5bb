import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { after, describe, test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { UdpRelay, type RelayAllocation } from '../../src/io/relay/udp-relay.ts';

/**
 * The relay's UDP forwarder on real loopback sockets. Loopback addresses stand for the peers' public
 * addresses (127.0.0.1 is peer A, 127.0.0.3 peer B, 127.0.0.2 a stranger); the relay is told to allow them.
 * Time is a ManualClock, so the byte-rate cap and the expiry are exact.
 */
const PEER_A = '127.0.0.1';
const PEER_B = '127.0.0.3';
const STRANGER = '127.0.0.2';

interface Client {
  socket: Socket;
  got: Buffer[];
  port: number;
  send: (port: number, payload: Buffer | string) => Promise<void>;
}

const sockets: Socket[] = [];
async function client(address: string): Promise<Client> {
  const socket = createSocket('udp4');
  sockets.push(socket);
  const got: Buffer[] = [];
  socket.on('message', (m) => got.push(m));
  await new Promise<void>((r) => socket.bind(0, address, r));
  return {
    socket,
    got,
    port: socket.address().port,
    send: (port, payload) =>
      new Promise((resolve, reject) =>
        socket.send(typeof payload === 'string' ? Buffer.from(payload) : payload, port, '127.0.0.1', (err) =>
          err ? reject(err) : resolve(),
        ),
      ),
  };
}
after(() => {
  for (const s of sockets) s.close();
});

async function setup(limits: ConstructorParameters<typeof UdpRelay>[0] = {}) {
  const clock = new ManualClock();
  const relay = new UdpRelay({
    host: '127.0.0.1',
    clock,
    ...limits,
    limits: { allow: ['127.0.0.0/8'], ...limits.limits },
  });
  const made = await relay.allocate({ sessionId: 's', peers: [PEER_A, PEER_B], bytesPerSecond: 40_000 });
  assert.ok(made.ok, JSON.stringify(made));
  const a = await client(PEER_A);
  const b = await client(PEER_B);
  return { clock, relay, alloc: made as RelayAllocation, a, b };
}

/** Both peers latch (B first: A's first datagram is then forwarded). */
async function latch(relay: UdpRelay, alloc: RelayAllocation, a: Client, b: Client) {
  await b.send(alloc.ports[1], 'b-hello');
  // The two ports are separate sockets: wait until B has latched before A sends.
  await waitFor(() => relay.allocations.get(alloc.id)?.latched[1], { timeoutMs: 5000, what: 'B latched' });
  await a.send(alloc.ports[0], 'a-hello');
  await waitFor(() => b.got.length === 1, { timeoutMs: 5000, what: "A's first datagram at B" });
}

const settle = () => new Promise((r) => setTimeout(r, 150));

describe('UDP relay on loopback', () => {
  test('forwards unread both ways from the other side’s relay port; a stranger is dropped and counted', async () => {
    const { relay, alloc, a, b } = await setup();
    try {
      await latch(relay, alloc, a, b);
      assert.equal(b.got[0]?.toString(), 'a-hello');
      assert.equal(relay.allocations.drops.peer_not_latched, 1);
      // The reply reaches A from the relay port A talks to (SRT drops packets from any other source).
      const fromRelay = new Promise<number>((r) => a.socket.once('message', (_m, rinfo) => r(rinfo.port)));
      await b.send(alloc.ports[1], Buffer.from([0x80, 0x02, 0xff]));
      assert.equal(await fromRelay, alloc.ports[0]);
      assert.deepEqual([...(a.got[0] ?? [])], [0x80, 0x02, 0xff]);

      const stranger = await client(STRANGER);
      await stranger.send(alloc.ports[0], 'inject to B');
      await stranger.send(alloc.ports[1], 'inject to A');
      await waitFor(() => relay.allocations.drops.unpinned_source === 2, {
        timeoutMs: 5000,
        what: 'two drops',
      });
      await settle();
      assert.deepEqual(
        [a.got.length, b.got.length, stranger.got.length],
        [1, 1, 0],
        'nothing from the stranger delivered, nothing sent to it',
      );
    } finally {
      await relay.close();
    }
  });

  test('a third client behind a pinned address cannot use a latched relay port', async () => {
    const { relay, alloc, a, b } = await setup();
    try {
      await latch(relay, alloc, a, b);
      const third = await client(PEER_A);
      await third.send(alloc.ports[0], 'hijack');
      await third.send(alloc.ports[1], 'hijack side 1');
      await waitFor(
        () => relay.allocations.drops.unlatched_port === 1 && relay.allocations.drops.unpinned_source === 1,
        { timeoutMs: 5000, what: 'the third client dropped on both ports' },
      );
      await b.send(alloc.ports[1], 'to A');
      await waitFor(() => a.got.length === 1, { timeoutMs: 5000, what: "B's datagram at A" });
      await settle();
      assert.equal(b.got.length, 1);
      assert.equal(third.got.length, 0, 'the third client receives nothing');
    } finally {
      await relay.close();
    }
  });

  test('traffic above the byte-rate cap is dropped and counted, and passes again as the bucket refills', async () => {
    // 40 kB/s with a 250 ms burst: 10,000 bytes at once.
    const { clock, relay, alloc, a, b } = await setup();
    try {
      await latch(relay, alloc, a, b);
      const chunk = Buffer.alloc(1000, 0x47);
      for (let i = 0; i < 20; i++) await a.send(alloc.ports[0], chunk);
      await waitFor(() => b.got.length + relay.allocations.drops.over_rate >= 21, {
        timeoutMs: 5000,
        what: 'twenty datagrams judged',
      });
      // 7 bytes of the latching datagram, then 9 whole kilobytes fit the 10,000-byte bucket.
      assert.equal(b.got.length, 1 + 9);
      assert.equal(relay.allocations.drops.over_rate, 11);
      clock.advance(100); // 4,000 bytes of tokens
      for (let i = 0; i < 5; i++) await a.send(alloc.ports[0], chunk);
      await waitFor(() => relay.allocations.drops.over_rate === 12, {
        timeoutMs: 5000,
        what: 'one more drop',
      });
      await settle();
      assert.equal(b.got.length, 1 + 9 + 4);
    } finally {
      await relay.close();
    }
  });

  test('an allocation expires: its ports close and the end is reported', async () => {
    const { clock, relay, alloc, a, b } = await setup({
      sweepMs: 1000,
      limits: { defaultLifetimeMs: 10_000 },
    });
    const ended: string[] = [];
    relay.onEnd = (id, reason) => ended.push(`${id}:${reason}`);
    try {
      await latch(relay, alloc, a, b);
      clock.advance(9_000);
      assert.deepEqual(ended, []);
      clock.advance(1_000);
      assert.deepEqual(ended, [`${alloc.id}:expired`]);
      assert.equal(relay.allocations.size, 0);
      await a.send(alloc.ports[0], 'late');
      await settle();
      assert.equal(b.got.length, 1, 'nothing forwarded after expiry');
      // The port is free again: a new socket can bind it.
      const reuse = createSocket('udp4');
      await new Promise<void>((resolve, reject) => {
        reuse.once('error', reject);
        reuse.bind(alloc.ports[0], '127.0.0.1', resolve);
      });
      reuse.close();
    } finally {
      await relay.close();
    }
  });

  test('the sweep sleeps while the relay holds no allocation and runs every sweepMs while it holds one', async () => {
    const clock = new ManualClock();
    const relay = new UdpRelay({
      host: '127.0.0.1',
      clock,
      sweepMs: 1000,
      limits: { allow: ['127.0.0.0/8'] },
    });
    const ended: string[] = [];
    relay.onEnd = (id, reason) => ended.push(`${id}:${reason}`);
    try {
      assert.equal(relay.sweeping, false, 'no allocation: no timer');
      assert.equal(clock.pendingTimers, 0);
      const made = await relay.allocate({ sessionId: 's', peers: [PEER_A, PEER_B], lifetimeMs: 2_500 });
      assert.ok(made.ok);
      assert.equal(relay.sweeping, true);
      clock.advance(1_000);
      clock.advance(1_000);
      assert.deepEqual(ended, [], 'swept twice, not yet expired');
      assert.equal(relay.sweeping, true);
      clock.advance(1_000); // the sweep at 3 s ends it (expiry at 2.5 s)
      assert.deepEqual(ended, [`${made.id}:expired`]);
      assert.equal(relay.sweeping, false, 'the last allocation gone: the sweep sleeps');
      assert.equal(clock.pendingTimers, 0);
      // A new allocation wakes it; a release leaves one more sweep, which finds nothing and sleeps.
      const again = await relay.allocate({ sessionId: 't', peers: [PEER_A, PEER_B], lifetimeMs: 60_000 });
      assert.ok(again.ok);
      assert.equal(relay.sweeping, true);
      relay.release(again.id);
      clock.advance(1_000);
      assert.equal(relay.sweeping, false);
    } finally {
      await relay.close();
    }
  });

  test('allocations at the server cap, or beyond the port range, are refused', async () => {
    const relay = new UdpRelay({
      host: '127.0.0.1',
      clock: new ManualClock(),
      limits: { allow: ['127.0.0.0/8'], maxAllocations: 2 },
    });
    try {
      assert.ok((await relay.allocate({ sessionId: 'a', peers: [PEER_A, PEER_B] })).ok);
      assert.ok((await relay.allocate({ sessionId: 'b', peers: [PEER_A, PEER_B] })).ok);
      assert.deepEqual(await relay.allocate({ sessionId: 'c', peers: [PEER_A, PEER_B] }), {
        ok: false,
        reason: 'server_cap',
      });
      assert.equal(relay.allocations.refusals.get('server_cap'), 1);
    } finally {
      await relay.close();
    }
    assert.deepEqual(await relay.allocate({ sessionId: 'd', peers: [PEER_A, PEER_B] }), {
      ok: false,
      reason: 'closed',
    });

    // A range of two ports holds one allocation (two sides); the next is refused and leaves nothing behind.
    const probe = createSocket('udp4');
    await new Promise<void>((r) => probe.bind(0, '127.0.0.1', r));
    const base = probe.address().port;
    probe.close();
    const ranged = new UdpRelay({
      host: '127.0.0.1',
      clock: new ManualClock(),
      portRange: [base, base + 1],
      limits: { allow: ['127.0.0.0/8'] },
    });
    try {
      const first = await ranged.allocate({ sessionId: 'a', peers: [PEER_A, PEER_B] });
      assert.ok(first.ok);
      assert.deepEqual([...first.ports].sort(), [base, base + 1]);
      assert.deepEqual(await ranged.allocate({ sessionId: 'b', peers: [PEER_A, PEER_B] }), {
        ok: false,
        reason: 'no_port',
      });
      assert.equal(ranged.allocations.size, 1);
    } finally {
      await ranged.close();
    }
  });
});
