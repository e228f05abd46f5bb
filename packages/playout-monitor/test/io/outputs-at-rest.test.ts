// The outputs' periodic timers at rest (docs/at-rest.md at the repository root): each runs at its documented
// period while something is connected or attached, and sleeps while nothing is — the Ember+ housekeeping
// (docs/EMBERPLUS.md), the WebSocket heartbeat and ping, the TSL refresh and the view's stale-guard check
// (docs/OUTPUTS.md). The outputs run on real timers; the bounded waits below only wait for one tick.
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { connect } from 'node:net';
import { test } from 'node:test';
import WebSocket from 'ws';
import { silentLogger, systemClock } from '@broadcast-ops/core';
import { DeviceStore } from '../../src/domain/device-store.ts';
import { OutputView } from '../../src/domain/output-view.ts';
import { EmberProvider } from '../../src/io/ember-provider.ts';
import { decodeTslPacket } from '../../src/protocol/tsl-umd.ts';
import { TslSender } from '../../src/io/tsl-sender.ts';
import { WsOutput } from '../../src/io/ws-output.ts';
import { startRig, udpReceiver, until } from '../outputs/helpers.ts';

function deckView(): { store: DeviceStore; view: OutputView } {
  const store = new DeviceStore(systemClock, [
    { id: 1, name: 'Deck 1', type: 'tcp_recorder', ip: '127.0.0.1', port: 9993, framerate: 25 },
  ]);
  const view = new OutputView(systemClock);
  view.attach(store, new Map([[1, 5000]]));
  return { store, view };
}

test('Ember+ housekeeping runs while a consumer is connected and sleeps while none is', async () => {
  const { view } = deckView();
  const ember = new EmberProvider({
    view,
    port: 0,
    address: '127.0.0.1',
    version: 'test',
    logger: silentLogger(),
  });
  const port = await ember.start();
  try {
    assert.equal(ember.housekeeping, false, 'no consumer: no timer');
    const socket = connect({ host: '127.0.0.1', port });
    await new Promise<void>((r) => socket.once('connect', () => r()));
    await until(() => ember.consumers === 1 || undefined, 5000, 'consumer accepted');
    assert.equal(ember.housekeeping, true, 'a consumer: checked every 250 ms');
    socket.destroy();
    await until(() => !ember.housekeeping || undefined, 5000, 'housekeeping asleep');
    assert.equal(ember.consumers, 0);
  } finally {
    await ember.close();
  }
});

test('the WebSocket heartbeat and ping run while a client is connected and sleep while none is', async () => {
  const { view } = deckView();
  const ws = new WsOutput({
    view,
    updateIntervalMs: 100,
    logger: silentLogger(),
    protocols: () => ({}),
    config: () => ({}),
    heartbeatMs: 50,
  });
  const http = createHttpServer();
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  ws.attach(http);
  try {
    assert.equal(ws.beating, false, 'no client: no timers');
    const address = http.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const client = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    const kinds: string[] = [];
    client.on('message', (data) =>
      kinds.push((JSON.parse((data as Buffer).toString('utf8')) as { type: string }).type),
    );
    await until(() => kinds.includes('heartbeat') || undefined, 5000, 'a heartbeat');
    assert.equal(kinds[0], 'playoutStates');
    assert.equal(ws.beating, true);
    client.close();
    await until(() => !ws.beating || undefined, 5000, 'timers asleep');
    assert.equal(ws.clients, 0);
  } finally {
    await ws.close();
    await new Promise<void>((r) => http.close(() => r()));
  }
});

test('the TSL refresh slows to restRefreshMs while no device is connected and is back at refreshMs with the first', async () => {
  const { store, view } = deckView();
  const rx = await udpReceiver();
  const tsl = new TslSender({
    view,
    destinations: [{ host: '127.0.0.1', port: rx.port }],
    screen: 0,
    logger: silentLogger(),
    refreshMs: 50,
    restRefreshMs: 10_000,
  });
  try {
    await tsl.start();
    assert.equal(tsl.refreshPeriod, 10_000, 'nothing connected: the rest period');
    store.apply(1, { state: 'stop', connected: true }, true);
    assert.equal(tsl.refreshPeriod, 50, 'a device connected: the refresh period at once');
    const from = rx.packets.length;
    await until(() => rx.packets.length >= from + 3 || undefined, 5000, 'refreshes at 50 ms');
    store.apply(1, { state: 'offline', connected: false, reason: 'gone' }, false);
    await until(() => tsl.refreshPeriod === 10_000 || undefined, 5000, 'back to the rest period');
  } finally {
    await tsl.close();
    await rx.close();
  }
});

test('at rest the TSL refresh sends every device together, once per restRefreshMs × devices', async () => {
  const store = new DeviceStore(systemClock, [
    { id: 1, name: 'Deck 1', type: 'tcp_recorder', ip: '127.0.0.1', port: 9993, framerate: 25 },
    { id: 2, name: 'Deck 2', type: 'tcp_recorder', ip: '127.0.0.1', port: 9994, framerate: 25 },
    { id: 3, name: 'Deck 3', type: 'tcp_recorder', ip: '127.0.0.1', port: 9995, framerate: 25 },
  ]);
  const view = new OutputView(systemClock);
  view.attach(store, new Map());
  const rx = await udpReceiver();
  const tsl = new TslSender({
    view,
    destinations: [{ host: '127.0.0.1', port: rx.port }],
    screen: 0,
    logger: silentLogger(),
    refreshMs: 20,
    restRefreshMs: 40,
  });
  const indices = (from: number): number[] =>
    rx.packets.slice(from).flatMap((p) => {
      const d = decodeTslPacket(p.data);
      return d.ok ? d.value.messages.map((m) => m.index) : [];
    });
  try {
    await tsl.start();
    assert.equal(tsl.refreshPeriod, 120, 'three devices at rest: one round every 3 × 40 ms');
    await until(() => indices(0).length >= 3 || undefined, 5000, 'the start-up round');
    const from = rx.packets.length;
    await until(() => indices(from).length >= 3 || undefined, 5000, 'a rest round');
    assert.deepEqual(indices(from).slice(0, 3), [1, 2, 3], 'the whole round together, in order');
    store.apply(2, { state: 'stop', connected: true }, true);
    assert.equal(tsl.refreshPeriod, 20, 'a device connected: one device every refreshMs at once');
    store.apply(2, { state: 'offline', connected: false, reason: 'gone' }, false);
    await until(() => tsl.refreshPeriod === 120 || undefined, 5000, 'back to whole rounds at rest');
  } finally {
    await tsl.close();
    await rx.close();
  }
});

test('the TSL destination retry runs only while a destination has no socket', async () => {
  const { view } = deckView();
  const rx = await udpReceiver();
  const good = new TslSender({
    view,
    destinations: [{ host: '127.0.0.1', port: rx.port }],
    screen: 0,
    logger: silentLogger(),
    retryMs: 50,
  });
  const bad = new TslSender({
    view,
    destinations: [{ host: 'no-such-receiver.invalid', port: rx.port }],
    screen: 0,
    logger: silentLogger(),
    retryMs: 50,
  });
  try {
    await good.start();
    assert.equal(good.retrying, false, 'every destination connected: no retry timer');
    await bad.start();
    assert.equal(bad.retrying, true, 'an unresolvable destination: retried every retryMs');
    assert.equal(bad.destinations()[0]?.ok, false);
  } finally {
    await good.close();
    await bad.close();
    await rx.close();
  }
});

test("the view's stale-guard check runs while a deck plays and sleeps while it is stopped", async () => {
  const rig = await startRig(1);
  try {
    await until(
      () => rig.service.view.get(1)?.state === 'stop' || undefined,
      5000,
      'deck connected, stopped',
    );
    assert.equal(rig.service.viewTicking, false, 'stopped: nothing to age');
    rig.sims[0]!.play(1);
    await until(() => rig.service.view.get(1)?.state === 'play' || undefined, 5000, 'playing');
    assert.equal(rig.service.viewTicking, true, 'playing: checked every 250 ms');
    rig.sims[0]!.stop();
    await until(() => !rig.service.viewTicking || undefined, 5000, 'asleep again');
    assert.equal(rig.service.view.get(1)?.state, 'stop');
  } finally {
    await rig.close();
  }
});
