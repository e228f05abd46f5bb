import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { timingBound } from '@broadcast-ops/core/testing';
import type { MixerInputTally } from '../../src/domain/mixer-tally.ts';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
import { makeConfig, startMonitor, vmixEntry, waitDevice, type MonitorRig } from '../helpers.ts';

const POLL_MS = 100;
const TIMEOUT_MS = 400;
let sim: VmixSimulator;
let monitor: MonitorRig;

before(async () => {
  sim = new VmixSimulator({ tcpPort: 0 });
  await sim.start();
  ({ monitor } = await startMonitor(
    makeConfig([vmixEntry(7, sim, { pollIntervalMs: POLL_MS, timeoutMs: TIMEOUT_MS })]),
  ));
});

after(async () => {
  await monitor?.close();
  await sim?.close();
});

const LETTER = { program: 'P', preview: 'V', off: '-', unknown: '?' } as const;

/** The tally of every input by number: P program, V preview, - off, ? unknown. */
function byNumber(inputs: readonly MixerInputTally[] | undefined): string {
  return (inputs ?? []).map((i) => LETTER[i.tally]).join('');
}

/** The simulator's TCP digits in the same letters (0 off, 1 program, 2 preview). */
function letters(digits: string): string {
  return Array.from(digits, (d) => (d === '1' ? 'P' : d === '2' ? 'V' : '-')).join('');
}

/** Run `action` and measure how long until every input of device `id` shows `unknown` (ms). */
async function msUntilUnknown(m: MonitorRig, id: number, action: () => unknown): Promise<number> {
  let unknownAt: number | undefined;
  const off = m.store.onChange((c) => {
    if (unknownAt === undefined && c.state.inputs?.every((i) => i.tally === 'unknown'))
      unknownAt = performance.now();
  });
  const t0 = performance.now();
  try {
    await action();
    await waitDevice(m, id, () => unknownAt !== undefined);
  } finally {
    off();
  }
  return (unknownAt ?? 0) - t0;
}

test("the TCP API's TALLY digits and its XML agree with the monitor's per-input tally, keyed by GUID", async () => {
  await waitDevice(monitor, 7, (s) => s.tallySource === 'tcp');
  const pushes = sim.tallyPushes;
  sim.cut(1);
  sim.previewInput(2);
  const d = await waitDevice(monitor, 7, (s) => byNumber(s.inputs) === 'PV-');
  assert.equal(d.tallySource, 'tcp');
  assert.equal(sim.tallyDigits(), '120');
  assert.equal(letters(sim.tallyDigits()), byNumber(d.inputs), 'TCP digits and the monitor agree');
  assert.deepEqual(
    d.inputs?.map((i) => [i.number, i.key, i.tally]),
    [
      [1, sim.keyOf(1), 'program'],
      [2, sim.keyOf(2), 'preview'],
      [3, sim.keyOf(3), 'off'],
    ],
  );
  assert.ok(sim.tallyPushes > pushes, 'the tally was pushed over TCP');
});

test('a layer of the program input is program though its TCP digit is 0; a renumbering keeps every key', async () => {
  sim.layer(1, 0, 3); // input 3 as layer 0 of the program input
  sim.cut(1);
  await waitDevice(monitor, 7, (s) => byNumber(s.inputs) === 'PVP');
  assert.equal(sim.tallyDigits(), '120', 'vMix digit of the layer input stays 0');
  const keyProgram = sim.keyOf(1);
  const keyPreview = sim.keyOf(2);
  sim.moveInput(1, 3); // Camera 1 becomes input 3, the others move up
  const d = await waitDevice(
    monitor,
    7,
    (s) => s.inputs?.find((i) => i.key === keyProgram)?.number === 3 && s.tallySource === 'tcp',
  );
  const tallyOf = (key: string) => d.inputs?.find((i) => i.key === key)?.tally;
  assert.equal(tallyOf(keyProgram), 'program');
  assert.equal(tallyOf(keyPreview), 'preview');
  sim.layer(3, 0, undefined);
  sim.moveInput(3, 1);
});

test('fade to black: no input is program; preview stays', async () => {
  sim.cut(1);
  sim.previewInput(2);
  await waitDevice(monitor, 7, (s) => byNumber(s.inputs) === 'PV-');
  sim.fadeToBlack(true);
  const d = await waitDevice(monitor, 7, (s) => s.fadeToBlack === true);
  assert.equal(byNumber(d.inputs), '-V-');
  sim.fadeToBlack(false);
  await waitDevice(monitor, 7, (s) => byNumber(s.inputs) === 'PV-');
});

test('a dropped TCP link makes the tally unknown at once; the HTTP poll brings it back; the link comes back', async (t) => {
  await waitDevice(monitor, 7, (s) => s.tallySource === 'tcp' && byNumber(s.inputs) === 'PV-');
  const took = await msUntilUnknown(monitor, 7, () => sim.tcpOffline());
  t.diagnostic(`TCP link dropped: unknown after ${took.toFixed(1)} ms`);
  const bound = await timingBound(POLL_MS / 2);
  assert.ok(
    took < bound,
    `unknown after ${took.toFixed(1)} ms, bound ${bound.toFixed(1)} ms (half a poll + noise)`,
  );
  const back = await waitDevice(monitor, 7, (s) => s.tallySource === 'http' && byNumber(s.inputs) === 'PV-');
  assert.equal(back.connected, true);
  await sim.tcpOnline();
  await waitDevice(monitor, 7, (s) => s.tallySource === 'tcp', 10_000);
});

test('vMix stopped: every input unknown within two poll intervals, never the last colour', async (t) => {
  sim.cut(2);
  await waitDevice(monitor, 7, (s) => s.tallySource === 'tcp' && byNumber(s.inputs) === 'VP-');
  const took = await msUntilUnknown(monitor, 7, () => sim.offline());
  t.diagnostic(`vMix stopped: unknown after ${took.toFixed(1)} ms (poll ${POLL_MS} ms)`);
  const bound = await timingBound(2 * POLL_MS);
  assert.ok(took < bound, `unknown after ${took.toFixed(1)} ms, bound ${bound.toFixed(1)} ms`);
  const d = monitor.store.get(7);
  assert.deepEqual(
    d?.inputs?.map((i) => i.tally),
    ['unknown', 'unknown', 'unknown'],
  );
  await sim.online();
  await waitDevice(monitor, 7, (s) => byNumber(s.inputs) === 'VP-', 10_000);
});

test('HTTP only (TCP API absent or refused): a hung vMix is unknown within two poll intervals', async (t) => {
  const http = new VmixSimulator();
  const port = await http.start();
  const { monitor: m } = await startMonitor(
    makeConfig([
      {
        id: 8,
        name: 'vMix B',
        type: 'http_mixer',
        ip: '127.0.0.1',
        port,
        tallyApi: 'http',
        pollIntervalMs: POLL_MS,
        timeoutMs: 2000,
      },
    ]),
  );
  try {
    http.cut(1);
    await waitDevice(m, 8, (s) => s.tallySource === 'http' && byNumber(s.inputs) === 'P--');
    const took = await msUntilUnknown(m, 8, () => http.setMode('hang'));
    t.diagnostic(`HTTP only, vMix hung: unknown after ${took.toFixed(1)} ms (poll ${POLL_MS} ms)`);
    const bound = await timingBound(2 * POLL_MS);
    assert.ok(took < bound, `unknown after ${took.toFixed(1)} ms, bound ${bound.toFixed(1)} ms`);
    assert.equal(
      m.store.get(8)?.state,
      'play',
      'the device itself is not offline yet (3 failed polls), its tally is',
    );
  } finally {
    await m.close();
    await http.close();
  }
});
