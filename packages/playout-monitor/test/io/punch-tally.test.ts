// End to end: vMix simulator (TCP API) → monitor → a real punch broker (started here, through the package's
// exports) → a WebSocket peer registered on the mapped stream, which receives the spec's `tally` message,
// and a real `punch agent` process on the same stream, whose `--on-tally` command writes each state to a
// file (packages/punch docs/agent.md "Tally").
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { repoRoot, startProcess, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import type { PunchServer } from '@broadcast-ops/punch';
import { WebSocket } from 'ws';
import { punchTallyMessage } from '../../src/io/punch-tally.ts';
import { PlayoutService } from '../../src/playout-service.ts';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
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
let agent: RunningProcess;
let agentOut: string;
/** The states the agent's --on-tally command was run with, in order. */
const agentRuns = (): string[] =>
  existsSync(agentOut) ? readFileSync(agentOut, 'utf8').trim().split('\n').filter(Boolean) : [];
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

  // The agent takes cam1's other slot; SRT never starts (the WebSocket peer never sends ready).
  const agentToken = (await rest('/api/session/studio/token', { stream: 'cam1', label: 'agent' }, admin))
    .token;
  agentOut = join(dir.path, 'agent-tally.txt');
  const hook = join(dir.path, 'hook.mjs');
  writeFileSync(
    hook,
    `import { appendFileSync } from 'node:fs';\n` +
      `appendFileSync(${JSON.stringify(agentOut)}, ` +
      `process.env.PUNCH_TALLY + ' ' + process.env.PUNCH_STREAM + '\\n');\n`,
  );
  agent = startProcess(
    process.execPath,
    [
      join(repoRoot, 'packages/punch/bin/punch.mjs'),
      'agent',
      '--broker',
      brokerUrl,
      '--session',
      'studio',
      '--role',
      'receiver',
      '--port',
      '9000',
      '--output',
      'udp://127.0.0.1:5999',
      '--srt',
      process.execPath,
      '--on-tally',
      `${process.execPath} ${hook}`,
    ],
    { env: { PUNCH_TOKEN: agentToken, LOG_LEVEL: 'info' } },
  );
  await agent.waitForOutput(/connected to broker/, 20_000);

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
  await agent?.stop();
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

test('the real punch agent prints every tally and runs --on-tally: unknown while vMix is gone, then program', async () => {
  // Every change is printed; the command runs once per change unless changes come faster than a run
  // (then the latest state runs next: docs/agent.md "Tally").
  for (const state of ['program', 'preview', 'off', 'unknown']) {
    await agent.waitForOutput(new RegExp(`"tally":"${state}"[^\\n]*"msg":"tally ${state}"`), 5000);
  }
  await until(() => agentRuns().at(-1) === 'program cam1', 10_000, 'the last run is program');
  const before = agentRuns().length;
  await sim.offline();
  await until(() => agentRuns().length > before, 10_000, 'a run once vMix is gone');
  assert.equal(agentRuns().at(-1), 'unknown cam1', agentRuns().join(', '));
  await sim.online();
  await until(() => agentRuns().at(-1) === 'program cam1', 10_000, 'program again');
  assert.equal(agent.child.exitCode, null, 'the agent keeps running');
});

test('the admin token is not in the published configuration', () => {
  const text = JSON.stringify(service.publicConfig());
  assert.ok(!text.includes(process.env[TOKEN_ENV] ?? 'x'), 'no token');
});
