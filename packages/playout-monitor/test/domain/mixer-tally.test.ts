import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tallyFromSnapshot, tallyOfKey, type MixerInputTally } from '../../src/domain/mixer-tally.ts';
import { VmixReducer } from '../../src/domain/vmix-reducer.ts';
import { parseVmixXml, type VmixSnapshot } from '../../src/protocol/vmix.ts';
import { readFixture } from '../pure-helpers.ts';

const NEWS = '26cae087-b7b6-4d45-98e4-de03ab4feb6b';
const VSET = '55cbe357-a801-4d54-8ff2-08ee68766fae';
const HOST = '2fe8ff9d-e400-4504-85ab-df7c17a1edd4';
const GUEST = '20e4ee9a-05cc-4f58-bb69-cd179e1c1958';
const DESK = '94b88db0-c5cd-49d8-98a2-27d83d4bf3fe';
const WIDE = '7a1c0e55-3b1d-4e8f-9a6b-0c2d3e4f5a66';
const PIP = 'd3e4f5a6-1111-4c2d-8e9f-a0b1c2d3e4f7';

function snapshot(xml: string): VmixSnapshot {
  const parsed = parseVmixXml(xml);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error.message);
  return parsed.value;
}

function byKey(list: MixerInputTally[]): Record<string, string> {
  return Object.fromEntries(list.map((i) => [i.key, i.tally]));
}

test("the manual's example: a VirtualSet on program puts its three layers on program; an overlay input is program over preview", () => {
  const s = snapshot(readFixture('vmix', 'vmix-help-developer-api.xml'));
  assert.deepEqual(
    s.inputRefs.find((i) => i.key === VSET),
    { number: 2, key: VSET, title: 'LateNightNews', layers: [HOST, GUEST, DESK] },
  );
  const tally = tallyFromSnapshot(s);
  assert.deepEqual(
    tally.map((i) => [i.number, i.title, i.tally]),
    [
      [1, 'NewsHD.xaml', 'program'], // on overlay channel 2, though also on preview
      [2, 'LateNightNews', 'program'],
      [3, 'Host', 'program'],
      [4, 'Guest (SRT)', 'program'],
      [5, 'Desk background.png', 'program'],
      [6, 'Wide', 'off'],
    ],
  );
});

test('renumbered inputs keep their tally by key; a layer of the preview input is preview', () => {
  const before = byKey(tallyFromSnapshot(snapshot(readFixture('vmix', 'vmix-help-developer-api.xml'))));
  const afterList = tallyFromSnapshot(snapshot(readFixture('vmix', 'vmix-27-renumbered-pip.xml')));
  const after = byKey(afterList);
  for (const key of [VSET, HOST, GUEST, DESK]) assert.equal(after[key], before[key], key);
  assert.equal(after[VSET], 'program');
  // Wide moved from number 6 to 1: it is preview as the layer of the PiP on preview, not input 1's old tally.
  assert.equal(after[WIDE], 'preview');
  assert.equal(after[PIP], 'preview');
  assert.equal(after[NEWS], 'off', 'no overlay channel in use any more');
  assert.deepEqual(
    afterList.filter((i) => i.key === WIDE || i.key === NEWS).map((i) => [i.number, i.title]),
    [
      [1, 'Wide'],
      [2, 'NewsHD.xaml'],
    ],
  );
  assert.equal(tallyOfKey(afterList, VSET), 'program');
  assert.equal(tallyOfKey(afterList, 'not-a-key'), 'unknown');
});

test('fade to black: no input is program (active, overlays and layers), preview kept', () => {
  const s = snapshot(readFixture('vmix', 'vmix-27-ftb-overlays.xml'));
  assert.equal(s.fadeToBlack, true);
  const tally = tallyFromSnapshot(s, [0, 1, 0, 2, 0]);
  assert.deepEqual(
    tally.map((i) => [i.number, i.tally]),
    [
      [1, 'off'],
      [2, 'off'], // active, faded
      [3, 'off'],
      [4, 'preview'], // preview (also on overlay 1, faded)
      [5, 'off'], // overlay 3, faded
    ],
  );
  const unfaded = tallyFromSnapshot(
    snapshot(
      readFixture('vmix', 'vmix-27-ftb-overlays.xml').replace(
        '<fadeToBlack>True</fadeToBlack>',
        '<fadeToBlack>False</fadeToBlack>',
      ),
    ),
  );
  assert.deepEqual(
    unfaded.map((i) => i.tally),
    ['off', 'program', 'off', 'program', 'program'],
  );
});

test('TCP tally digits add to the document (mapped through its numbers) only when they agree with it; a cycle of layers ends', () => {
  const s = snapshot(readFixture('vmix', 'vmix-help-developer-api.xml'));
  // The document has <active>2 and <preview>1; digits that agree with it add input 6 on preview.
  const t = byKey(tallyFromSnapshot(s, [2, 1, 0, 0, 0, 2]));
  assert.equal(t[WIDE], 'preview');
  // Digits from before a renumbering (input 6 was on program then) disagree with the document's <active>:
  // mapped through its numbers they would put Wide on air, so the document decides alone.
  const older = tallyFromSnapshot(s, [0, 0, 0, 0, 0, 1]);
  assert.deepEqual(older, tallyFromSnapshot(s));
  assert.notEqual(byKey(older)[WIDE], 'program');
  const cyclic = snapshot(
    '<vmix><inputs><input key="a" number="1" title="A"><overlay index="0" key="b"/></input>' +
      '<input key="b" number="2" title="B"><overlay index="0" key="a"/></input>' +
      '<input key="c" number="3" title="C"/></inputs><active>1</active><preview>3</preview></vmix>',
  );
  assert.deepEqual(byKey(tallyFromSnapshot(cyclic)), { a: 'program', b: 'program', c: 'preview' });
});

test('recording and streaming are mixer state; a lost mixer makes every input unknown, not its last colour', () => {
  const r = new VmixReducer({ framerate: 25, offlineAfterFailures: 2, defaultFramerate: 50 });
  const patch = r.onSnapshot(snapshot(readFixture('vmix', 'vmix-27-renumbered-pip.xml')));
  assert.equal(patch.recording, true);
  assert.equal(patch.streaming, true);
  assert.equal(patch.fadeToBlack, false);
  assert.equal(patch.tallySource, 'http');
  assert.equal(patch.inputs?.length, 7);
  const stale = r.tallyUnknown();
  assert.deepEqual(
    stale.inputs?.map((i) => [i.key, i.number, i.tally]),
    patch.inputs?.map((i) => [i.key, i.number, 'unknown']),
  );
  r.onSnapshot(snapshot(readFixture('vmix', 'vmix-27-renumbered-pip.xml')));
  assert.equal(r.onFailure('refused'), undefined);
  const offline = r.onFailure('refused');
  assert.equal(offline?.state, 'offline');
  assert.ok(offline?.inputs?.every((i) => i.tally === 'unknown'));
});
