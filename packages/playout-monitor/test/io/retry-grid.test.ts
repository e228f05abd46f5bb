// RetryGrid: absent devices' retries at their cap share one timer per instant (one wake of the process),
// shorter delays keep their own timer. A ManualClock counts the timers.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import { ManualClock, waitFor } from '@broadcast-ops/core/testing';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { OutputView } from '../../src/domain/output-view.ts';
import { HyperdeckClient } from '../../src/io/hyperdeck-client.ts';
import { RetryGrid } from '../../src/io/retry-grid.ts';
import { TslSender } from '../../src/io/tsl-sender.ts';
import { VmixPoller } from '../../src/io/vmix-poller.ts';
import { MalformedInputs } from '../../src/malformed.ts';
import { udpReceiver } from '../outputs/helpers.ts';
import { makeConfig } from '../pure-helpers.ts';

test('retries at the cap from different moments share one timer and run together', () => {
  const clock = new ManualClock();
  const grid = new RetryGrid(clock, 5000, 0);
  const ran: string[] = [];
  grid.schedule(4500, () => ran.push('deck'));
  clock.advance(700);
  grid.schedule(4100, () => ran.push('mixer'));
  assert.equal(grid.pendingInstants, 1);
  assert.equal(clock.pendingTimers, 1, 'one timer for both');
  clock.advance(4299);
  assert.deepEqual(ran, [], 'not before the instant');
  clock.advance(1);
  assert.deepEqual(ran, ['deck', 'mixer'], 'both at the same instant');
  assert.equal(clock.pendingTimers, 0);
});

test('a short delay keeps its own timer; cancelling the last retry of an instant cancels its timer', () => {
  const clock = new ManualClock();
  const grid = new RetryGrid(clock, 5000, 0);
  const ran: string[] = [];
  grid.schedule(1000, () => ran.push('early step'));
  assert.equal(grid.pendingInstants, 0);
  assert.equal(clock.pendingTimers, 1);
  const a = grid.schedule(4500, () => ran.push('a'));
  const b = grid.schedule(4600, () => ran.push('b'));
  assert.equal(clock.pendingTimers, 2);
  a.cancel();
  assert.equal(clock.pendingTimers, 2, 'b still waits on the instant');
  b.cancel();
  assert.equal(clock.pendingTimers, 1, 'no retry left: its timer is gone');
  clock.advance(10_000);
  assert.deepEqual(ran, ['early step']);
});

/** A loopback port with nothing listening: connects to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

test('an absent HyperDeck and an absent vMix are retried at the same instants once at the cap', async () => {
  const deckPort = await closedPort();
  const mixerPort = await closedPort();
  const config = makeConfig([
    { id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port: deckPort },
    // The TCP API link is left out (`http`): its own backoff (1 s to 30 s) is tested in vmix-tally.
    { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port: mixerPort, tallyApi: 'http' },
  ]);
  const clock = new ManualClock();
  const store = new DeviceStore(clock, [
    { id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port: deckPort, framerate: 50 },
    { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port: mixerPort, framerate: 50 },
  ]);
  const malformed = new MalformedInputs(silentLogger(), createMetricsRegistry());
  const grid = new RetryGrid(clock, 5000, 0);
  const common = { defaultFramerate: 50, store, clock, logger: silentLogger(), malformed, retryGrid: grid };
  const deck = new HyperdeckClient({ ...common, server: config.servers[0] as never, port: deckPort });
  const mixer = new VmixPoller({ ...common, server: config.servers[1] as never, port: mixerPort });
  const together = (): boolean => grid.pendingInstants === 1 && clock.pendingTimers === 1;
  try {
    deck.start();
    mixer.start();
    // Walk both backoffs (1, 2, 4 s; 250 ms × 3, 0.5, 1, 2, 4 s) up to the cap, letting each refusal land.
    for (let i = 0; i < 400 && !together(); i++) {
      clock.advance(100);
      await new Promise((r) => setTimeout(r, 2));
    }
    assert.equal(store.get(1)?.connected, false);
    assert.equal(store.get(2)?.connected, false);
    assert.ok(together(), 'both retries on one instant, one timer: one wake');
    // The instant comes: both are tried, refused, and wait on the next instant together again.
    clock.advance(5000);
    await waitFor(together, { what: 'both waiting on the next instant' });
    assert.match(store.get(1)?.reason ?? '', /refused/);
  } finally {
    deck.close();
    mixer.close();
  }
});

test('a TSL rest round of 5 s or more runs at the grid instants, in the same wake as a retry', async () => {
  const clock = new ManualClock();
  const grid = new RetryGrid(clock, 5000, 0);
  const store = new DeviceStore(
    clock,
    [1, 2, 3].map((id) => ({
      id,
      name: `Deck ${id}`,
      type: 'tcp_recorder' as const,
      ip: '127.0.0.1',
      port: 9990 + id,
      framerate: 25,
    })),
  );
  const view = new OutputView(clock);
  view.attach(store, new Map());
  const rx = await udpReceiver();
  const tsl = new TslSender({
    view,
    destinations: [{ host: '127.0.0.1', port: rx.port }],
    screen: 0,
    logger: silentLogger(),
    restRefreshMs: 2000,
    restGrid: grid,
  });
  try {
    await tsl.start();
    await waitFor(() => rx.packets.length >= 3, { what: 'the start-up round' });
    assert.equal(tsl.refreshPeriod, 6000, 'three devices at rest: a round at most every 3 × 2 s');
    assert.equal(grid.pendingInstants, 1, 'the round waits on a grid instant');
    let retried = 0;
    grid.schedule(4500, () => retried++);
    assert.equal(grid.pendingInstants, 1, 'a device retry at the cap shares that instant');
    assert.equal(clock.pendingTimers, 1, 'one timer for both: one wake');
    clock.advance(5000);
    assert.equal(retried, 1);
    await waitFor(() => rx.packets.length >= 6, { what: 'the rest round at the instant' });
    assert.equal(grid.pendingInstants, 1, 'the next round waits on the next instant');
  } finally {
    await tsl.close();
    await rx.close();
  }
  assert.equal(clock.pendingTimers, 0, 'closed: nothing left on the grid');
});
