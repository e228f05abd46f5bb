import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import { expectDecoded, waitFor, timingBound } from '@broadcast-ops/core/testing';
import { arrivalTime, kernelRxDelay, kernelRxTimestampsAvailable } from '../../src/io/kernel-rx-timestamp.ts';
import { ServedClock } from '../../src/io/served-clock.ts';
import { decodeNtpPacket, timestampDiffSeconds } from '../../src/protocol/ntp-packet.ts';
import type { TimesvcService } from '../../src/io/service.ts';
import { startService } from '../helpers/service.ts';

/** Block the event loop for `ms`: the datagram that arrived before is then handled that much later. */
function block(ms: number): number {
  const start = performance.now();
  while (performance.now() - start < ms) {
    /* spin */
  }
  return performance.now() - start;
}

test('the kernel receive-timestamp addon is built (Linux)', () => {
  assert.ok(
    kernelRxTimestampsAvailable(),
    'packages/timesvc/build/Release/rx_timestamp.node is missing: run `npm rebuild -w packages/timesvc` ' +
      '(needs g++, make, python3 and Node headers: apt-get install -y build-essential python3)',
  );
});

test('kernelRxDelay reports when the kernel received the datagram, not when the handler ran', async () => {
  const rx = createSocket('udp4');
  const tx = createSocket('udp4');
  await new Promise<void>((r) => rx.bind(0, '127.0.0.1', r));
  const delayOf = kernelRxDelay(rx);
  assert.ok(delayOf, 'kernel timestamps available on a bound socket');
  try {
    const delays: number[] = [];
    let blocked = 0;
    rx.on('message', () => {
      delays.push(delayOf(performance.timeOrigin + performance.now()) ?? -1);
    });
    // The datagram is in the socket's queue when send's callback runs (loopback delivers synchronously);
    // blocking there delays the handler by at least the block.
    await new Promise<void>((resolve) => {
      tx.send(Buffer.from('x'), rx.address().port, '127.0.0.1', () => {
        blocked = block(25);
        resolve();
      });
    });
    await waitFor(() => delays.length === 1, { what: 'the datagram' });
    assert.ok(delays[0]! >= blocked - 1, `delay ${delays[0]} ms after a ${blocked.toFixed(1)} ms block`);
    assert.ok(delays[0]! < (await timingBound(1000)));
  } finally {
    rx.close();
    tx.close();
  }
});

let svc: TimesvcService;
let port: number;

before(async () => {
  // The JavaScript responder, whose event loop this test blocks (the native responder's thread is not
  // blocked by it: test/io/ntp-native-responder.test.ts).
  ({ service: svc, port } = await startService({ local_stratum: true, stratum: 5, native_responder: false }));
  await waitFor(() => svc.manager.state === 'LOCKED', { timeoutMs: 10_000, what: 'LOCKED' });
});

after(async () => {
  await svc.close();
});

test('the NTP server stamps T2 at arrival: a busy event loop shows as T3 - T2, not as offset', async () => {
  assert.equal(svc.server()!.rxTimestamps, 'kernel');
  const health = await svc.app.inject({ method: 'GET', url: '/api/health' });
  assert.equal(health.json<{ rx_timestamps: string }>().rx_timestamps, 'kernel');
  const client = createSocket('udp4');
  await new Promise<void>((r) => client.bind(0, '127.0.0.1', r));
  try {
    const replies: Buffer[] = [];
    client.on('message', (m) => replies.push(m));
    const req = Buffer.alloc(48);
    req[0] = 0x23; // LI 0, version 4, mode 3
    req.writeUInt32BE(0xdeadbeef, 40);
    let blocked = 0;
    await new Promise<void>((resolve) => {
      client.send(req, port, '127.0.0.1', () => {
        blocked = block(30); // the server shares this event loop
        resolve();
      });
    });
    await waitFor(() => replies.length === 1, { what: 'the reply' });
    const reply = expectDecoded(decodeNtpPacket(replies[0]!));
    assert.equal(reply.mode, 4);
    const heldS = timestampDiffSeconds(reply.transmitTimestamp, reply.receiveTimestamp);
    assert.ok(heldS * 1000 >= blocked - 1, `T3 - T2 = ${(heldS * 1000).toFixed(3)} ms, block ${blocked} ms`);
  } finally {
    client.close();
  }
});

test('after a host clock step not yet noticed, kernel timestamps are not carried by the stale offset', async () => {
  // A served clock whose kernel-realtime mapping is 500 ms ahead of the kernel: what a 500 ms backward step
  // of the host clock leaves until served-clock.ts re-measures (checked once a second).
  const realNow = Date.now;
  Date.now = () => realNow() + 500;
  let clock: ServedClock;
  try {
    clock = new ServedClock();
  } finally {
    Date.now = realNow;
  }
  const rx = createSocket('udp4');
  const tx = createSocket('udp4');
  await new Promise<void>((r) => rx.bind(0, '127.0.0.1', r));
  const arrival = arrivalTime(rx, clock, { kernel: true, correctionMs: 0 });
  assert.ok(arrival.kernel);
  try {
    const ages: number[] = [];
    rx.on('message', () => {
      const perf = performance.now();
      ages.push(perf - arrival.at(perf));
    });
    for (let i = 0; i < 3; i++) tx.send(Buffer.alloc(48), rx.address().port, '127.0.0.1');
    await waitFor(() => ages.length === 3, { timeoutMs: 5000 });
    // Without the check each datagram would be dated ~500 ms before it was handled.
    const bound = await timingBound(100);
    for (const a of ages)
      assert.ok(a >= 0 && a < bound, `arrival dated ${a} ms before the handler (bound ${bound})`);
  } finally {
    rx.close();
    tx.close();
  }
});
