// Our HyperDeck simulator against an independent client: Sofie's `hyperdeck-connection` 2.0.1 (the
// reference client the reference cites). If the simulator spoke the protocol wrongly, this client would
// fail to connect, mis-parse transport info or clip lists, or miss the asynchronous 508 notifications.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Commands, Hyperdeck, TransportStatus } from 'hyperdeck-connection';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';

const sims: HyperdeckSimulator[] = [];
const clients: Hyperdeck[] = [];

after(async () => {
  for (const c of clients) await c.disconnect().catch(() => undefined);
  for (const s of sims) await s.close();
});

// Only whole writes: hyperdeck-connection 2.0.1's MultilineParser splits each TCP chunk on CR LF without
// keeping a partial last line, so a line cut across two segments is mis-read (model "Hyper"). Our own
// codec keeps partial lines (test/protocol/hyperdeck.test.ts splits transcripts at every byte).
for (const splitWrites of [false]) {
  test(`hyperdeck-connection 2.0.1 reads the simulator${splitWrites ? ' with split writes' : ''}`, async () => {
    const sim = new HyperdeckSimulator({ port: 0, videoFormat: '1080i50', splitWrites });
    sims.push(sim);
    const port = await sim.start();
    const deck = new Hyperdeck({ pingPeriod: 0 });
    clients.push(deck);
    const connected = new Promise<{ model: string; protocolVersion: number }>((resolve) =>
      deck.once('connected', (info) => resolve(info as never)),
    );
    deck.on('error', () => undefined);
    deck.connect('127.0.0.1', port);
    const info = await connected;
    assert.equal(info.model, 'HyperDeck Studio Mini');
    assert.equal(info.protocolVersion, 1.11);

    const transport = await deck.sendCommand(new Commands.TransportInfoCommand());
    assert.equal(transport.status, TransportStatus.STOPPED);
    assert.equal(transport.clipId, 1);
    assert.equal(transport.displayTimecode, '00:00:00:00');

    const clips = await deck.sendCommand(new Commands.ClipsGetCommand());
    assert.equal(clips.clipCount, 2);
    assert.deepEqual(
      clips.clips.map((c) => [c.clipId, c.name, c.startTime, c.duration]),
      [
        [1, 'Interview_A.mov', '00:00:00:00', '00:02:00:00'],
        [2, 'B-Roll 02.mov', '00:02:00:00', '00:00:30:00'],
      ],
    );

    const notify = new Commands.NotifySetCommand();
    notify.transport = true;
    await deck.sendCommand(notify);
    const pushed = new Promise<{ status?: string; clipId?: number | null }>((resolve) =>
      deck.once('notify.transport', (t) => resolve(t)),
    );
    sim.play(2);
    const change = await pushed;
    assert.equal(change.status, TransportStatus.PLAY);
    assert.equal(change.clipId, 2);
  });
}

test('a second hyperdeck-connection client is rejected with 120 while the first holds the deck', async () => {
  const sim = new HyperdeckSimulator({ port: 0 });
  sims.push(sim);
  const port = await sim.start();
  const first = new Hyperdeck({ pingPeriod: 0 });
  clients.push(first);
  first.on('error', () => undefined);
  const up = new Promise((r) => first.once('connected', r));
  first.connect('127.0.0.1', port);
  await up;
  const second = new Hyperdeck({ pingPeriod: 0 });
  clients.push(second);
  const outcome = await new Promise<string>((resolve) => {
    second.on('error', (msg) => resolve(`error: ${msg}`));
    second.once('connected', () => resolve('connected'));
    second.once('disconnected', () => resolve('disconnected'));
    second.connect('127.0.0.1', port);
  });
  assert.notEqual(outcome, 'connected');
  assert.equal(sim.hasClient, true);
});
