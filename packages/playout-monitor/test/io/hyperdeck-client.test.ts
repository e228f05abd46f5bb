// HyperdeckClient against a strict fake deck on 127.0.0.1:0, with a ManualClock so its timers can be counted.
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import { ManualClock, waitFor } from '@broadcast-ops/core/testing';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { HyperdeckClient } from '../../src/io/hyperdeck-client.ts';
import { MalformedInputs } from '../../src/malformed.ts';
import { makeConfig } from '../helpers.ts';

const BANNER = '500 connection info:\r\nprotocol version: 1.11\r\nmodel: Fake Deck\r\n\r\n';

test('a repeated 500 banner is counted, not obeyed: no second set of poll and ping timers', async () => {
  const commands: string[] = [];
  let deck: Socket | undefined;
  const server = createServer((s) => {
    deck = s;
    s.on('error', () => undefined);
    s.setEncoding('utf8');
    s.write(BANNER + BANNER);
    s.on('data', (chunk: string) => {
      for (const line of chunk.split('\r\n').filter(Boolean)) {
        commands.push(line);
        if (line === 'transport info') s.write('208 transport info:\r\nstatus: stopped\r\n\r\n');
        else if (line === 'clips get') s.write('205 clips info:\r\nclip count: 0\r\n\r\n');
        else if (line.startsWith('notify') || line.startsWith('watchdog') || line === 'ping')
          s.write('200 ok\r\n');
        else throw new Error(`unplanned command ${line}`);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const config = makeConfig([{ id: 3, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port }]);
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 3, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port, framerate: 50 },
  ]);
  const malformed = new MalformedInputs(silentLogger(), createMetricsRegistry());
  const client = new HyperdeckClient({
    server: config.servers[0] as never,
    port,
    defaultFramerate: 50,
    store,
    clock,
    logger: silentLogger(),
    malformed,
    random: () => 0.5,
  });
  try {
    client.start();
    await waitFor(() => commands.includes('clips get'), { what: 'the initial commands' });
    assert.equal(store.get(3)?.connected, true);
    assert.equal(malformed.counts()['hyperdeck-unexpected-response'], 1);
    // One connection: the watchdog, the transport-info poll and the ping, each armed once.
    assert.equal(clock.pendingTimers, 3);
    assert.equal(commands.filter((c) => c.startsWith('notify')).length, 3, 'notify sent once per key');
  } finally {
    client.close();
    deck?.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  }
});

/** A ManualClock that records the delay of every timer asked for. */
class RecordingClock extends ManualClock {
  readonly delays: number[] = [];
  override setTimer(ms: number, fn: () => void): ReturnType<ManualClock['setTimer']> {
    this.delays.push(ms);
    return super.setTimer(ms, fn);
  }
}

function deckClient(port: number, clock: ManualClock, store: DeviceStore): HyperdeckClient {
  const config = makeConfig([
    { id: 3, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port, timeoutMs: 3000 },
  ]);
  return new HyperdeckClient({
    server: config.servers[0] as never,
    port,
    defaultFramerate: 50,
    store,
    clock,
    logger: silentLogger(),
    malformed: new MalformedInputs(silentLogger(), createMetricsRegistry()),
    random: () => 0.5,
  });
}

test('a refused attempt arms no timer but the reconnect: no banner deadline, no 250 ms watchdog', async () => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  const clock = new RecordingClock();
  const store = new DeviceStore(clock, [
    { id: 3, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port, framerate: 50 },
  ]);
  const client = deckClient(port, clock, store);
  try {
    client.start();
    await waitFor(() => store.get(3)?.reason === 'connection refused', { what: 'refused' });
    // Refused within the turn: no banner deadline was armed (io/deadline.ts), no 250 ms watchdog; only the
    // reconnect after 1 s (reconnectMinMs, no jitter at 0.5).
    assert.deepEqual(clock.delays, [1000]);
    assert.equal(clock.pendingTimers, 1, 'only the reconnect waits');
  } finally {
    client.close();
  }
});

test('a deck that accepts but sends no banner is dropped at timeoutMs; the watchdog runs once connected', async () => {
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const clock = new RecordingClock();
  const store = new DeviceStore(clock, [
    { id: 3, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port, framerate: 50 },
  ]);
  const client = deckClient(port, clock, store);
  try {
    client.start();
    await waitFor(() => clock.delays.includes(250), { what: 'connected: the 250 ms watchdog armed' });
    assert.equal(clock.pendingTimers, 1, 'the watchdog alone (the banner deadline is handed over to it)');
    clock.advance(2750);
    assert.equal(store.get(3)?.connected, false);
    assert.notEqual(store.get(3)?.reason, 'no connection banner', 'not before timeoutMs');
    clock.advance(500);
    await waitFor(() => store.get(3)?.reason === 'no connection banner', { what: 'dropped for no banner' });
  } finally {
    client.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
