import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@broadcast-ops/core/testing';
import { OutboundQueue, type OutboundSink } from '../../src/domain/outbound-queue.ts';

class FakeSocket implements OutboundSink {
  buffered = 0;
  grows = true;
  sent: string[] = [];
  closedWith: string | undefined;
  bufferedAmount(): number {
    return this.buffered;
  }
  send(data: string): void {
    this.sent.push(data);
    if (this.grows) this.buffered += data.length;
  }
  close(reason: string): void {
    this.closedWith = reason;
  }
}

const limits = { softLimitBytes: 100, hardLimitBytes: 400, maxQueuedMessages: 5, pollMs: 5 };

test('below the soft limit messages go straight out; above it state deltas coalesce per path', () => {
  const clock = new ManualClock();
  const sock = new FakeSocket();
  let slow = 0;
  const q = new OutboundQueue(
    sock,
    limits,
    clock,
    (n) => `gap:${n}`,
    () => slow++,
  );
  q.push('state', 'a'.repeat(60), 'p.a');
  q.push('state', 'b'.repeat(60), 'p.b'); // 60 < 100: still sent
  assert.equal(sock.sent.length, 2);
  q.push('state', 'A1', 'p.a'); // 120 ≥ 100: queued
  q.push('state', 'A2', 'p.a'); // replaces A1
  q.push('control', 'ACK');
  q.push('state', 'A3', 'p.a'); // replaces A2, moves behind the ack
  assert.ok(q.coalescing);
  assert.equal(q.queuedMessages, 2);
  assert.equal(q.coalescedTotal, 2);
  sock.buffered = 0; // socket drained
  clock.advance(5);
  assert.deepEqual(sock.sent.slice(2), ['gap:2', 'ACK', 'A3']);
  assert.ok(!q.coalescing);
  assert.equal(slow, 0);
});

test('hard limit or too many queued events: closed 4008, queue released', () => {
  const clock = new ManualClock();
  const sock = new FakeSocket();
  let slow = 0;
  const q = new OutboundQueue(
    sock,
    limits,
    clock,
    (n) => `gap:${n}`,
    () => slow++,
  );
  sock.buffered = 150;
  for (let i = 0; i < 5; i++) q.push('event', `e${i}`);
  assert.equal(sock.closedWith, undefined);
  q.push('event', 'e5');
  assert.equal(sock.closedWith, 'slow_consumer');
  assert.equal(slow, 1);
  assert.equal(q.queuedBytes, 0);
  q.push('event', 'after');
  assert.equal(sock.sent.length, 0, 'nothing after close');

  const sock2 = new FakeSocket();
  const q2 = new OutboundQueue(
    sock2,
    limits,
    clock,
    () => 'gap',
    () => undefined,
  );
  sock2.buffered = 300;
  q2.push('state', 'x'.repeat(50), 'a');
  assert.equal(sock2.closedWith, undefined);
  q2.push('state', 'y'.repeat(60), 'b'); // 300 + 110 ≥ 400
  assert.equal(sock2.closedWith, 'slow_consumer');
});

test('flush waits for the socket to fall below half the soft limit; memory stays O(paths)', () => {
  const clock = new ManualClock();
  const sock = new FakeSocket();
  const q = new OutboundQueue(
    sock,
    { ...limits, hardLimitBytes: 1e9 },
    clock,
    (n) => `gap:${n}`,
    () => undefined,
  );
  sock.buffered = 100;
  for (let i = 0; i < 100_000; i++) q.push('state', `v${i}`, `p.${i % 10}`);
  assert.equal(q.queuedMessages, 10);
  assert.ok(q.maxQueuedBytes < 200, `queued bytes bounded by distinct paths, got ${q.maxQueuedBytes}`);
  sock.buffered = 60;
  clock.advance(5);
  assert.equal(sock.sent.length, 0, 'still above half the soft limit');
  sock.buffered = 0;
  sock.grows = false;
  clock.advance(5);
  assert.equal(sock.sent[0], 'gap:99990');
  assert.deepEqual(
    sock.sent.slice(1),
    Array.from({ length: 10 }, (_, k) => `v${99_990 + k}`),
  );
});

test('queued bytes are UTF-8 bytes (what the socket carries), not UTF-16 characters', () => {
  const clock = new ManualClock();
  const sock = new FakeSocket();
  sock.buffered = 150; // above the soft limit: everything is queued
  let slow = 0;
  const q = new OutboundQueue(
    sock,
    limits,
    clock,
    (n) => `gap:${n}`,
    () => slow++,
  );
  // 'é' is 2 bytes, '🎬' 4 bytes (2 UTF-16 units): 40 + 40 = 80 characters-ish, 160 bytes.
  const accented = 'é'.repeat(40);
  const clapper = '🎬'.repeat(20);
  q.push('control', accented);
  q.push('state', clapper, 'p.c');
  assert.equal(q.queuedBytes, Buffer.byteLength(accented) + Buffer.byteLength(clapper));
  assert.equal(q.queuedBytes, 160);
  // Coalescing subtracts the replaced message in bytes too.
  q.push('state', '🎬', 'p.c');
  assert.equal(q.queuedBytes, 80 + 4);
  // 84 queued + 150 buffered is under 400; 'ü' × 90 is 180 bytes (90 characters): 414 ≥ 400, so 4008.
  assert.equal(slow, 0);
  q.push('control', 'ü'.repeat(90));
  assert.equal(slow, 1, 'the hard limit counts bytes: 90 non-ASCII characters overflow it');
});
