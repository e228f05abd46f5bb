// End to end: vMix simulator (TCP API) → monitor → a real punch broker (started here, through the package's
// exports) → a WebSocket peer registered on the mapped stream, which receives the spec's `tally` message.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import type { PunchServer } from '@broadcast-ops/punch';
import { WebSocket } from 'ws';
import { punchTallyMessage } from '../../src/io/punch-tally.ts';
import { PlayoutService } from '../../src/playout-service.ts';
import { VmixSimulator } from '../../src/simulators/vmix-sim.ts';
import { makeConfig, vmixEntry } from '../helpers.ts';
import { startPunchBroker } from '../punch-broker.ts';
import { until } from '../outputs/helpers.ts';

const TOKEN_ENV = `PLAYOUT_TEST_PUNCH_TOKEN_${process.pid}`;
let dir: ReturnType<typeof tempDir>;
let broker: PunchServer;
let brokerUrl: string;
let sim: VmixSimulator;
let service: PlayoutService;
let peer: WebSocket;
const received: {
  atMs: number;
  msg: { type: string; stream?: string; state?: string; stale?: boolean; age?: number };
}[] = [];

before(async () => {
  dir = tempDir('punch-tally-');
  ({ broker, url: brokerUrl } = await startPunchBroker(dir.path));
  const rest = async (path: string, body: unknown, token?: string) => {
    const res = await fetch(brokerUrl + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 201, await res.clone().text());
    return (await res.json()) as { token: string };
  };
  const admin = (await rest('/api/session', { name: 'studio', streams: ['cam1', 'cam2'] })).token;
  const peerToken = (await rest('/api/session/studio/token', { stream: 'cam1', label: 'camera 1' }, admin))
    .token;
  // The admin token reaches the monitor through the environment, never a URL.
  process.env[TOKEN_ENV] = admin;

  peer = new WebSocket(`${brokerUrl.replace(/^http/, 'ws')}/api/ws/studio`, {
    headers: { authorization: `Bearer ${peerToken}` },
  });
  peer.on('message', (raw: Buffer) => {
    const msg = JSON.parse(raw.toString()) as (typeof received)[number]['msg'];
    received.push({ atMs: performance.now(), msg });
  });
  await new Promise((resolve) => peer.once('open', resolve));
  peer.send(JSON.stringify({ type: 'register', stream: 'cam1', port: 9000, role: 'sender' }));
  await until(() => received.some((r) => r.msg.type === 'session'), 5000, 'registered');

  sim = new VmixSimulator({ tcpPort: 0 });
  await sim.start();
  const config = makeConfig([vmixEntry(1, sim)], {
    emberPlusPort: 0,
    punchTally: [
      {
        brokerUrl,
        session: 'studio',
        adminTokenEnv: TOKEN_ENV,
        inputs: [
          { device: 1, key: sim.keyOf(1), stream: 'cam1' },
          { device: 1, key: sim.keyOf(2), stream: 'cam2' },
        ],
      },
    ],
  });
  service = new PlayoutService({ config, logger: silentLogger() });
  await service.start({ http: 0, ember: 0 });
});

after(async () => {
  peer?.close();
  await service?.close();
  await sim?.close();
  await broker?.close();
  dir?.remove();
  Reflect.deleteProperty(process.env, TOKEN_ENV);
});

const tallies = () => received.filter((r) => r.msg.type === 'tally' && r.msg.stream === 'cam1');
const lastTally = () => tallies().at(-1)?.msg;

test('the peer of the mapped stream gets program, preview and off as its input changes', async () => {
  sim.cut(1);
  await until(() => lastTally()?.state === 'program', 5000, 'program');
  assert.deepEqual(lastTally(), { type: 'tally', stream: 'cam1', state: 'program' });
  sim.cut(2); // Camera 1 goes to preview (vMix's Cut swaps)
  await until(() => lastTally()?.state === 'preview', 5000, 'preview');
  sim.previewInput(3);
  await until(() => lastTally()?.state === 'off', 5000, 'off');
  assert.equal(
    received.filter((r) => r.msg.type === 'tally' && r.msg.stream !== 'cam1').length,
    0,
    'the peer of cam1 gets only its own stream',
  );
});

test('a renumbering does not move the tally; vMix stopped reaches the peer as off, never the last colour', async () => {
  sim.cut(1);
  await until(() => lastTally()?.state === 'program', 5000, 'program');
  const count = tallies().length;
  sim.moveInput(1, 3); // Camera 1 becomes input 3: still program, nothing new to say
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(lastTally()?.state, 'program');
  assert.equal(tallies().length, count, 'no tally message for a renumbering');
  sim.moveInput(3, 1);
  await sim.offline();
  // The monitor sends off with stale: true; punch relays the flag (and the age of the stale state), so
  // the peer sees unknown, never the last colour (packages/punch README "Tally").
  await until(() => lastTally()?.stale === true, 5000, 'stale when vMix is gone');
  const { age, ...rest } = lastTally() as { age?: unknown };
  assert.deepEqual(rest, { type: 'tally', stream: 'cam1', state: 'off', stale: true });
  assert.equal(typeof age, 'number');
  assert.deepEqual(punchTallyMessage('cam1', 'unknown'), {
    type: 'tally',
    stream: 'cam1',
    state: 'off',
    stale: true,
  });
  await sim.online();
  await until(() => lastTally()?.state === 'program', 10_000, 'program again when vMix is back');
});

test('the admin token is not in the published configuration', () => {
  const text = JSON.stringify(service.publicConfig());
  assert.ok(!text.includes(process.env[TOKEN_ENV] ?? 'x'), 'no token');
});
