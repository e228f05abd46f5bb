import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { parseClientMessage } from '../../src/protocol/ws-messages.ts';
import { startTestServer, type TestServer } from '../helpers.ts';
import { connect, sleep, type WsClient } from '../ws-helpers.ts';

const TYPES = ['register', 'health', 'status', 'tally', 'ready', 'watch', 'peer', 'start', ''];

/** Messages shaped like the protocol's, with random field values: they reach the handlers, not just the parser. */
const shaped = fc.record(
  {
    type: fc.oneof(fc.constantFrom(...TYPES), fc.string({ maxLength: 12 })),
    stream: fc.oneof(
      fc.constantFrom('cam-a', 'cam-b', 'nope', ''),
      fc.string({ maxLength: 70 }),
      fc.integer(),
    ),
    port: fc.oneof(fc.integer({ min: -10, max: 70_000 }), fc.double(), fc.string({ maxLength: 6 })),
    role: fc.oneof(fc.constantFrom('sender', 'receiver'), fc.string({ maxLength: 8 })),
    meta: fc.oneof(fc.object({ maxDepth: 2 }), fc.jsonValue({ maxDepth: 2 })),
    rtt: fc.oneof(fc.double(), fc.integer(), fc.string({ maxLength: 4 })),
    retransmit: fc.oneof(fc.double(), fc.integer()),
    bitrate: fc.oneof(fc.double(), fc.integer()),
    srt: fc.oneof(
      fc.constantFrom('connecting', 'connected', 'disconnected', 'error'),
      fc.string({ maxLength: 6 }),
    ),
    state: fc.oneof(fc.constantFrom('off', 'preview', 'program'), fc.string({ maxLength: 6 })),
    v: fc.oneof(fc.integer(), fc.string({ maxLength: 3 })),
  },
  { requiredKeys: [] },
);

const frame = fc.oneof(
  shaped.map((m) => ({ data: JSON.stringify(m), binary: false })),
  fc.jsonValue({ maxDepth: 3 }).map((v) => ({ data: JSON.stringify(v) ?? 'null', binary: false })),
  fc.string({ maxLength: 200 }).map((s) => ({ data: s, binary: false })),
  fc.uint8Array({ maxLength: 300 }).map((b) => ({ data: b, binary: true })),
  // Random bytes in a text frame: invalid UTF-8 makes `ws` close that connection with 1007.
  fc.uint8Array({ maxLength: 300 }).map((b) => ({ data: b, binary: false })),
);

test('parseClientMessage never throws on any string', () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string(),
        shaped.map((m) => JSON.stringify(m)),
      ),
      (text) => {
        const r = parseClientMessage(text);
        assert.equal(typeof r.ok, 'boolean');
      },
    ),
    { numRuns: 2000 },
  );
});

/**
 * A connection with a token for stream cam-b sends random JSON and random bytes. The matched peers of cam-a
 * never receive anything but `session` broadcasts, their slots and the stream state never change, and the
 * server keeps serving (a tally from the admin reaches A after every run).
 */
describe('random frames never crash the broker or change another peer', () => {
  let t: TestServer;
  let admin: string;
  let fuzzToken: string;
  let a: WsClient;
  let b: WsClient;
  let obs: WsClient;
  before(async () => {
    t = await startTestServer({ limits: { wsConnectPerMinute: 100_000 } });
    const r = await t.call('POST', '/api/session', { body: { name: 'fz', streams: ['cam-a', 'cam-b'] } });
    admin = r.json.token as string;
    const tok = async (stream: string, label: string) =>
      (await t.call('POST', '/api/session/fz/token', { token: admin, body: { stream, label } })).json
        .token as string;
    fuzzToken = await tok('cam-b', 'fuzz');
    a = await connect(t.url, 'fz', { token: await tok('cam-a', 'A') });
    b = await connect(t.url, 'fz', { token: await tok('cam-a', 'B') });
    obs = await connect(t.url, 'fz', { token: admin });
    a.send({ type: 'register', stream: 'cam-a', port: 7000 });
    await a.next('session');
    await a.next('session');
    b.send({ type: 'register', stream: 'cam-a', port: 7000 });
    await b.next('peer');
    await a.next('peer');
  });
  after(async () => t.close());

  test('property', async () => {
    const camA = () => JSON.stringify(t.server.broker.get('fz')?.streams.find((s) => s.name === 'cam-a'));
    const before = camA();
    let fuzz = await connect(t.url, 'fz', { token: fuzzToken });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(frame, { maxLength: 15 }), async (frames) => {
        for (const f of frames) {
          if (fuzz.ws.readyState !== fuzz.ws.OPEN) fuzz = await connect(t.url, 'fz', { token: fuzzToken });
          fuzz.sendRaw(Buffer.from(f.data), f.binary);
        }
        await sleep(5);
        const state = (['off', 'preview', 'program'] as const)[run++ % 3];
        obs.send({ type: 'tally', stream: 'cam-a', state });
        for (const peer of [a, b]) {
          const got = await peer.next('tally');
          assert.equal(got['state'], state);
          const others = peer.pending().filter((m) => m['type'] !== 'session');
          assert.deepEqual(others, []);
          while (peer.pending().length > 0) await peer.next();
        }
        assert.equal(camA(), before);
      }),
      { numRuns: 60 },
    );
    fuzz.close();
    const view = await t.call('GET', '/api/session/fz', { token: admin });
    assert.equal(view.status, 200);
    assert.equal(view.json.streams['cam-a'].peer_a.label, 'A');
  });
});
