import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { VmixReducer } from '../../src/domain/vmix-reducer.ts';
import { parseVmixXml, VMIX_MAX_XML_BYTES } from '../../src/protocol/vmix.ts';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
import { XMLParser } from 'fast-xml-parser';
import { readFixture } from '../pure-helpers.ts';

function stateOf(xml: string, framerate = 25) {
  const parsed = parseVmixXml(xml);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error.message);
  return {
    snapshot: parsed.value,
    patch: new VmixReducer({ framerate, offlineAfterFailures: 3, defaultFramerate: 50 }).onSnapshot(
      parsed.value,
    ),
  };
}

test('vMix 21: active clip Running while recording is rec, with position, duration and remaining', () => {
  const { snapshot, patch } = stateOf(readFixture('vmix', 'vmix-21-playing-recording.xml'));
  assert.equal(snapshot.version, '21.0.0.55');
  assert.equal(snapshot.recordingDurationSec, 325);
  assert.equal(patch.state, 'rec');
  assert.equal(patch.filename, 'clip.mp4');
  // 22797 ms at 25 fps = frame 569 (22.76 s) -> 00:00:22:19.
  assert.equal(patch.timecode, '00:00:22:19');
  assert.equal(patch.positionMs, 22_797);
  assert.equal(patch.durationMs, 30_000);
  assert.equal(patch.remainingMs, 7203);
  assert.equal(patch.loop, true);
});

test('vMix 24: the <active> input decides, not the first Running input', () => {
  const { patch } = stateOf(readFixture('vmix', 'vmix-24-playing.xml'), 50);
  assert.equal(patch.state, 'play');
  assert.equal(patch.filename, 'Playlist - Opener_HD.mp4');
  assert.equal(patch.timecode, '00:00:04:02');
  assert.equal(patch.remainingMs, 90_960);
});

test('vMix 27: paused active input is stop; markOut bounds the remaining time; entities decoded', () => {
  const { snapshot, patch } = stateOf(readFixture('vmix', 'vmix-27-paused-markout.xml'));
  assert.equal(snapshot.inputCount, 4);
  assert.equal(patch.state, 'stop');
  assert.equal(patch.filename, 'Q&A Promo <v2>.mp4');
  assert.equal(patch.remainingMs, 45_000 - 12_040);
  assert.equal(patch.streaming, true);
  assert.equal(patch.timecode, '00:00:12:01');
});

test('vMix 28: a Completed clip while recording is rec; recording attributes read', () => {
  const { snapshot, patch } = stateOf(readFixture('vmix', 'vmix-28-completed.xml'));
  assert.equal(snapshot.recording, true);
  assert.equal(snapshot.recordingDurationSec, 61);
  assert.equal(patch.state, 'rec');
  assert.equal(patch.remainingMs, 0);
  const notRecording = readFixture('vmix', 'vmix-28-completed.xml').replace(
    /<recording[^>]*>True<\/recording>/,
    '<recording>False</recording>',
  );
  assert.equal(stateOf(notRecording).patch.state, 'stop');
});

test('the simulator XML decodes to its own state (play, pause at an exact position, stop, record)', () => {
  const sim = new VmixSimulator();
  sim.play('opener.mp4', { durationSec: 30, positionMs: 10_000 });
  sim.pause(10_000);
  let { patch } = stateOf(sim.xml());
  assert.deepEqual([patch.state, patch.filename, patch.timecode], ['stop', 'opener.mp4', '00:00:10:00']);
  sim.play('opener.mp4', { durationSec: 30 });
  ({ patch } = stateOf(sim.xml()));
  assert.equal(patch.state, 'play');
  sim.record(true);
  assert.equal(stateOf(sim.xml()).patch.state, 'rec');
  sim.record(false);
  sim.stop();
  ({ patch } = stateOf(sim.xml()));
  assert.deepEqual([patch.state, patch.filename], ['stop', 'Black']);
});

test('broken, truncated, foreign and oversized documents are typed errors', () => {
  const full = readFixture('vmix', 'vmix-21-playing-recording.xml');
  const truncated = parseVmixXml(full.slice(0, full.length / 2));
  assert.equal(truncated.ok, false);
  assert.equal(truncated.ok ? '' : truncated.error.code, 'not-xml');
  const foreign = parseVmixXml('<html><body>login</body></html>');
  assert.equal(foreign.ok ? '' : foreign.error.code, 'not-vmix');
  const big = parseVmixXml('<vmix>' + ' '.repeat(VMIX_MAX_XML_BYTES) + '</vmix>');
  assert.equal(big.ok ? '' : big.error.code, 'too-large');
  assert.equal(parseVmixXml('').ok, false);
});

test('three consecutive failures make offline, a good poll brings it back', () => {
  const r = new VmixReducer({ framerate: 25, offlineAfterFailures: 3, defaultFramerate: 50 });
  const { snapshot } = stateOf(readFixture('vmix', 'vmix-24-playing.xml'));
  r.onSnapshot(snapshot);
  assert.equal(r.onFailure('timeout'), undefined);
  assert.equal(r.onFailure('timeout'), undefined);
  const off = r.onFailure('timeout');
  assert.equal(off?.state, 'offline');
  assert.equal(off?.reason, 'timeout (3 failed polls)');
  // Still offline for the same reason: no change to publish (the count stays the declaration's).
  assert.equal(r.onFailure('timeout'), undefined);
  assert.equal(r.onFailure('timeout'), undefined);
  // Another reason is a change.
  assert.equal(r.onFailure('refused')?.reason, 'refused (6 failed polls)');
  assert.equal(r.onFailure('refused'), undefined);
  assert.equal(r.onSnapshot(snapshot).state, 'play');
  assert.equal(r.consecutiveFailures, 0);
  // Offline again after a good poll: declared again, with the new count.
  r.onFailure('timeout');
  r.onFailure('timeout');
  assert.equal(r.onFailure('timeout')?.reason, 'timeout (3 failed polls)');
});

test('fast-check: random XML-ish text and mutated vMix documents never throw', () => {
  const docs = ['vmix-21-playing-recording.xml', 'vmix-24-playing.xml', 'vmix-27-paused-markout.xml'].map(
    (f) => readFixture('vmix', f),
  );
  const tag = fc.constantFrom('vmix', 'inputs', 'input', 'active', 'recording', 'streaming', 'version', 'x');
  const xmlish: fc.Arbitrary<string> = fc.letrec<{ node: string }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small' },
      fc.string({ maxLength: 12 }),
      fc
        .tuple(
          tag,
          fc.dictionary(
            fc.constantFrom('number', 'state', 'position', 'duration', 'title', 'markOut'),
            fc.string({ maxLength: 8 }),
            { maxKeys: 4 },
          ),
          fc.array(tie('node'), { maxLength: 4 }),
        )
        .map(
          ([t, attrs, kids]) =>
            `<${t}${Object.entries(attrs)
              .map(([k, v]) => ` ${k}="${v.replace(/["<&]/g, '')}"`)
              .join('')}>${kids.join('')}</${t}>`,
        ),
    ),
  })).node;
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ maxLength: 300 }),
        xmlish.map((x) => `<vmix>${x}</vmix>`),
        fc
          .tuple(fc.constantFrom(...docs), fc.nat(), fc.nat(), fc.string({ maxLength: 10 }))
          .map(([d, a, b, ins]) => d.slice(0, a % d.length) + ins + d.slice(b % d.length)),
      ),
      (text) => {
        const r = parseVmixXml(text);
        if (r.ok)
          new VmixReducer({ framerate: 25, offlineAfterFailures: 3, defaultFramerate: 50 }).onSnapshot(
            r.value,
          );
      },
    ),
    { numRuns: 1500 },
  );
});

test('a document with a single input (no array in the XML) still finds the active input', () => {
  const { snapshot, patch } = stateOf(
    '<vmix><version>27.0.0.49</version><inputs><input key="k" number="1" type="Video" title="A.mp4" state="Running" position="40" duration="1000" loop="False">A.mp4</input></inputs><active>1</active><recording>False</recording></vmix>',
  );
  assert.equal(snapshot.inputCount, 1);
  assert.deepEqual([patch.state, patch.filename, patch.timecode], ['play', 'A.mp4', '00:00:00:01']);
});

test('fade to black is stop; preview and overlays are published; numeric character references decoded', () => {
  const { snapshot, patch } = stateOf(readFixture('vmix', 'vmix-27-ftb-overlays.xml'));
  assert.equal(snapshot.fadeToBlack, true);
  assert.equal(patch.state, 'stop', 'program is black');
  assert.equal(patch.fadeToBlack, true);
  assert.equal(patch.filename, 'Café opener 🎬.mp4');
  assert.deepEqual(patch.preview, { number: 4, title: 'Lower third - Zoë Müller' });
  assert.deepEqual(patch.overlays, [
    { number: 1, input: 4, title: 'Lower third - Zoë Müller' },
    { number: 3, input: 5, title: 'Bug & clock' },
  ]);
  const noFtb = readFixture('vmix', 'vmix-27-ftb-overlays.xml').replace(
    '<fadeToBlack>True</fadeToBlack>',
    '<fadeToBlack>False</fadeToBlack>',
  );
  assert.equal(stateOf(noFtb).patch.state, 'play');
  const recording = noFtb
    .replace('<fadeToBlack>False</fadeToBlack>', '<fadeToBlack>True</fadeToBlack>')
    .replace('<recording>False</recording>', '<recording duration="3">True</recording>');
  assert.equal(stateOf(recording).patch.state, 'rec', 'recording goes on through fade to black');
  assert.equal(
    parseVmixXml('<vmix><active>1</active><inputs><input number="1" title="a &bogus; b"/></inputs></vmix>')
      .ok,
    false,
  );
});

test('the single-pass reader agrees with a DOM parser (fast-xml-parser) on every fixture and a 400-input show', () => {
  const sim = new VmixSimulator({ titleInputs: 397 });
  sim.play('Café.mp4', { durationSec: 60 });
  sim.previewInput(9);
  sim.overlay(2, 12);
  const docs = [
    ...[
      'vmix-21-playing-recording.xml',
      'vmix-24-playing.xml',
      'vmix-27-paused-markout.xml',
      'vmix-28-completed.xml',
      'vmix-27-ftb-overlays.xml',
    ].map((f) => readFixture('vmix', f)),
    sim.xml(),
  ];
  const dom = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '',
    htmlEntities: true,
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: true,
    isArray: (name) => name === 'input' || name === 'overlay',
  });
  for (const xml of docs) {
    const ours = parseVmixXml(xml);
    assert.ok(ours.ok);
    const root = (dom.parse(xml) as { vmix: Record<string, unknown> }).vmix;
    const inputs = (root['inputs'] as { input: Record<string, string>[] }).input;
    const byNumber = new Map(inputs.map((i) => [Number(i['number']), i]));
    const text = (v: unknown): string => {
      const t = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)['#text'] : v;
      return typeof t === 'string' || typeof t === 'number' ? String(t) : '';
    };
    assert.equal(ours.value.inputCount, inputs.length);
    assert.equal(ours.value.active, Number(text(root['active'])));
    assert.equal(ours.value.preview, Number(text(root['preview'])));
    assert.equal(ours.value.activeInput?.title, byNumber.get(ours.value.active ?? -1)?.['title']);
    assert.equal(
      ours.value.activeInput?.positionMs,
      Number(byNumber.get(ours.value.active ?? -1)?.['position']),
    );
    assert.equal(ours.value.previewInput?.title, byNumber.get(ours.value.preview ?? -1)?.['title']);
    assert.equal(ours.value.fadeToBlack, text(root['fadeToBlack']) === 'True');
    const overlays = ((root['overlays'] as { overlay?: unknown[] } | undefined)?.overlay ?? [])
      .map((o) => text(o))
      .filter((t) => t !== '');
    assert.deepEqual(
      ours.value.overlays.map((o) => String(o.input)),
      overlays,
    );
  }
  const big = parseVmixXml(sim.xml());
  assert.ok(big.ok);
  assert.equal(big.value.inputCount, 400);
});

test('fast-check: on random vMix documents the one-pass reader and the DOM parser agree on every published field', () => {
  const title = fc.string({ unit: 'grapheme', maxLength: 12 });
  const escape = (t: string): string =>
    t
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      .replace(/[^\x20-\x7e]/gu, (c) =>
        (c.codePointAt(0) ?? 0) % 2 === 0 ? `&#${c.codePointAt(0) ?? 63};` : c,
      );
  const dom = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '',
    htmlEntities: true,
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: false,
    isArray: (name) => name === 'input',
  });
  fc.assert(
    fc.property(
      fc.array(fc.tuple(title, fc.constantFrom('Running', 'Paused', 'Completed'), fc.nat({ max: 99_999 })), {
        minLength: 1,
        maxLength: 30,
      }),
      fc.nat(),
      fc.nat(),
      fc.boolean(),
      (inputs, a, p, ftb) => {
        const active = (a % inputs.length) + 1;
        const preview = (p % inputs.length) + 1;
        const body = inputs
          .map(
            ([t, state, pos], i) =>
              `<input key="k${i}" number="${i + 1}" type="Video" title="${escape(t)}" state="${state}" position="${pos}" duration="100000">${escape(t)}<text index="0">x</text></input>`,
          )
          .join('\r\n');
        const xml = `<?xml version="1.0" encoding="utf-8"?>\r\n<vmix><version>27.0.0.49</version><inputs>${body}</inputs><overlays><overlay number="1">${preview}</overlay><overlay number="2" /></overlays><preview>${preview}</preview><active>${active}</active><fadeToBlack>${ftb ? 'True' : 'False'}</fadeToBlack></vmix>`;
        const ours = parseVmixXml(xml);
        assert.ok(ours.ok, ours.ok ? '' : ours.error.message);
        const root = (dom.parse(xml) as { vmix: { inputs: { input: Record<string, string>[] } } }).vmix;
        const theirs = root.inputs.input;
        assert.equal(ours.value.inputCount, theirs.length);
        assert.equal(ours.value.activeInput?.title, theirs[active - 1]?.['title']);
        assert.equal(ours.value.activeInput?.state, theirs[active - 1]?.['state']);
        assert.equal(ours.value.activeInput?.positionMs, Number(theirs[active - 1]?.['position']));
        assert.equal(ours.value.previewInput?.title, theirs[preview - 1]?.['title']);
        assert.deepEqual(ours.value.overlays, [
          { number: 1, input: preview, title: theirs[preview - 1]?.['title'] },
        ]);
        assert.equal(ours.value.fadeToBlack, ftb);
      },
    ),
    { numRuns: 300 },
  );
});
