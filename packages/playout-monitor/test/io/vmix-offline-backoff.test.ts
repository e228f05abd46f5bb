// vMix poller: a mixer declared offline is polled with backoff up to 5 s (domain/backoff.ts pollDelayMs),
// and seen again at its first answer. A ManualClock drives the poll timer; the HTTP requests are real, to a
// loopback server that counts them and answers only when told to.
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import { createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import { ManualClock, waitFor } from '@broadcast-ops/core/testing';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { VmixPoller } from '../../src/io/vmix-poller.ts';
import { MalformedInputs } from '../../src/malformed.ts';
import { makeConfig } from '../pure-helpers.ts';

const DOC =
  '<vmix><version>27.0.0.49</version><edition>4K</edition><inputs>' +
  '<input key="a" number="1" title="A" state="Paused" position="0" duration="0" loop="False"/>' +
  '</inputs><active>1</active><preview>1</preview></vmix>';

/** A loopback "vMix": counts requests; refuses them (closes the socket) unless `answering`. */
async function mixer(): Promise<{
  server: Server;
  port: number;
  requests: () => number;
  answer(on: boolean): void;
}> {
  let n = 0;
  let answering = false;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.on('data', () => {
      n++;
      if (!answering) {
        socket.destroy();
        return;
      }
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: ${Buffer.byteLength(DOC)}\r\n\r\n${DOC}`,
      );
    });
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? address.port : 0,
    requests: () => n,
    answer: (on) => {
      answering = on;
    },
  };
}

/** A ManualClock that records the delay of every timer asked for. */
class RecordingClock extends ManualClock {
  readonly delays: number[] = [];
  override setTimer(ms: number, fn: () => void): ReturnType<ManualClock['setTimer']> {
    this.delays.push(ms);
    return super.setTimer(ms, fn);
  }
}

const TIMEOUT_MS = 1234; // the request timeout, told apart from the poll timers by its value

test('an absent vMix is polled every 250 ms until declared offline, then with backoff to 5 s; its answer brings the period back', async () => {
  const vmix = await mixer();
  const clock = new RecordingClock();
  const config = makeConfig([
    {
      id: 2,
      name: 'vMix',
      type: 'http_mixer',
      ip: '127.0.0.1',
      port: vmix.port,
      tallyApi: 'http',
      timeoutMs: TIMEOUT_MS,
    },
  ]);
  const server = config.servers[0] as never as ConstructorParameters<typeof VmixPoller>[0]['server'];
  assert.equal(server.pollIntervalMs, 250);
  assert.equal(server.offlineAfterFailures, 3);
  const store = new DeviceStore(clock, [
    { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port: vmix.port, framerate: 25 },
  ]);
  const poller = new VmixPoller({
    server,
    port: vmix.port,
    defaultFramerate: 25,
    store,
    clock,
    logger: silentLogger(),
    malformed: new MalformedInputs(silentLogger(), createMetricsRegistry()),
    random: () => 0.5, // no jitter
  });
  // The poll timer is the last one a poll asks for (after an answer the tally-stale timer comes first).
  const pollDelays = (): number[] => clock.delays.filter((d) => d !== TIMEOUT_MS);
  /** Run `polls` polls: wait until the next one is scheduled (the previous request finished), fire it. */
  let known = 0;
  const run = async (polls: number): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < polls; i++) {
      await waitFor(() => pollDelays().length > known || undefined, { timeoutMs: 5000, what: 'next poll' });
      known = pollDelays().length;
      const d = pollDelays().at(-1)!;
      out.push(d);
      clock.advance(d);
    }
    return out;
  };
  try {
    poller.start();
    const first = await run(8);
    assert.equal(vmix.requests(), 7, 'one request per poll fired (the eighth is due)');
    assert.equal(first[0], 0, 'the first poll at once');
    // Three failures at the poll period declare it offline, then 500, 1000, 2000, 4000, 5000 ms.
    assert.deepEqual(first.slice(1, 3), [250, 250]);
    assert.equal(store.get(2)?.state, 'offline');
    assert.deepEqual(first.slice(3), [500, 1000, 2000, 4000, 5000]);
    vmix.answer(true);
    const back = await run(3);
    assert.equal(store.get(2)?.connected, true, 'seen at the first poll after it answers');
    assert.deepEqual(back, [250, 250, 250], 'back to the poll period from the first answer');
  } finally {
    poller.close();
    await new Promise<void>((r) => vmix.server.close(() => r()));
  }
});

test('an absent vMix on a closed port: refused polls arm no request timeout, and an offline poll sends no HTTP request until the port accepts', async () => {
  // A port nothing listens on yet.
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const clock = new RecordingClock();
  const config = makeConfig([
    {
      id: 2,
      name: 'vMix',
      type: 'http_mixer',
      ip: '127.0.0.1',
      port,
      tallyApi: 'http',
      timeoutMs: TIMEOUT_MS,
    },
  ]);
  const store = new DeviceStore(clock, [
    { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port, framerate: 25 },
  ]);
  const poller = new VmixPoller({
    server: config.servers[0] as never,
    port,
    defaultFramerate: 25,
    store,
    clock,
    logger: silentLogger(),
    malformed: new MalformedInputs(silentLogger(), createMetricsRegistry()),
    random: () => 0.5,
  });
  // Connections and HTTP requests reaching the port once it listens.
  let connections = 0;
  let requests = 0;
  const late = createServer((s) => {
    connections++;
    s.on('error', () => undefined);
    s.on('data', () => {
      requests++;
      s.destroy();
    });
  });
  try {
    poller.start();
    for (let i = 0; i < 6; i++) {
      await waitFor(() => clock.pendingTimers === 1 || undefined, {
        timeoutMs: 5000,
        what: 'next poll armed',
      });
      clock.advance(clock.delays.at(-1)!);
    }
    await waitFor(() => clock.pendingTimers === 1 || undefined, { timeoutMs: 5000, what: 'next poll armed' });
    assert.equal(store.get(2)?.state, 'offline');
    assert.match(store.get(2)?.reason ?? '', /ECONNREFUSED/);
    // Every poll after the first (whose request the HTTP client sets up over more than one turn) is refused
    // before its timeout would be armed: an absent mixer costs no timer per poll (io/deadline.ts).
    assert.deepEqual(
      clock.delays.slice(2).filter((d) => d === TIMEOUT_MS),
      [],
      `timers asked for: ${clock.delays.join(', ')}`,
    );
    // The port accepts now but answers nothing: the offline poll connects, then sends its request.
    await new Promise<void>((r) => late.listen(port, '127.0.0.1', r));
    clock.advance(clock.delays.at(-1)!);
    await waitFor(() => requests === 1 || undefined, { timeoutMs: 5000, what: 'the HTTP request' });
    assert.equal(connections, 2, 'the bare connection, then the HTTP request on its own');
  } finally {
    poller.close();
    await new Promise<void>((r) => late.close(() => r()));
  }
});
