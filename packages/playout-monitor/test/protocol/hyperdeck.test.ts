import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { HyperdeckReducer } from '../../src/domain/hyperdeck-reducer.ts';
import {
  encodeCommand,
  HD,
  HYPERDECK_MAX_BLOCK_CHARS,
  HyperdeckReader,
  LineSplitter,
  clipsInfoFrom,
  connectionInfoFrom,
  displayTimecodeFrom,
  transportInfoFrom,
  ResponseAssembler,
  type HyperdeckResponse,
} from '../../src/protocol/hyperdeck.ts';
import { readFixture } from '../pure-helpers.ts';

interface Transcript {
  provenance: string;
  received: string;
  expected: Record<string, unknown>;
}

function transcript(name: string): Transcript {
  return JSON.parse(readFixture('hyperdeck', name)) as Transcript;
}

/** Run responses through the reducer the way the client does. */
function replay(responses: HyperdeckResponse[]): ReturnType<HyperdeckReducer['derive']> {
  const r = new HyperdeckReducer({ framerate: undefined, defaultFramerate: 50 });
  let last = r.derive();
  for (const resp of responses) {
    if (resp.code === HD.CONNECTION_INFO) last = r.onConnected();
    else if (resp.code === HD.TRANSPORT_INFO) last = r.onTransport(transportInfoFrom(resp.params), false);
    else if (resp.code === HD.ASYNC_TRANSPORT_INFO)
      last = r.onTransport(transportInfoFrom(resp.params), true);
    else if (resp.code === HD.CLIPS_INFO) last = r.onClips(clipsInfoFrom(resp.params));
    else if (resp.code === HD.ASYNC_DISPLAY_TIMECODE) {
      const tc = displayTimecodeFrom(resp.params);
      if (tc !== undefined) last = r.onDisplayTimecode(tc);
    } else if (resp.code === HD.TIMELINE_EMPTY) last = r.onTimelineEmpty();
  }
  return last;
}

function readAll(
  text: string,
  chunks: string[] = [text],
): { responses: HyperdeckResponse[]; problems: number } {
  const reader = new HyperdeckReader();
  const responses: HyperdeckResponse[] = [];
  let problems = 0;
  for (const c of chunks) {
    const out = reader.push(c);
    responses.push(...out.responses);
    problems += out.problems.length;
  }
  return { responses, problems };
}

test('Studio Mini session: banner, 200s, 208, 205 clip list, partial 508 -> play of "B-Roll 02.mov"', () => {
  const t = transcript('session-studio-mini.json');
  const { responses, problems } = readAll(t.received);
  assert.equal(problems, 0);
  assert.deepEqual(
    responses.map((r) => r.code),
    [500, 200, 200, 208, 205, 508, 208],
  );
  assert.deepEqual(connectionInfoFrom(responses[0]!.params), {
    protocolVersion: '1.11',
    model: 'HyperDeck Studio Mini',
  });
  assert.deepEqual(clipsInfoFrom(responses[4]!.params), [
    { id: 1, name: 'Interview_A.mov', startTimecode: '00:00:00:00', durationTimecode: '00:02:00:00' },
    { id: 2, name: 'B-Roll 02.mov', startTimecode: '00:02:00:00', durationTimecode: '00:00:30:00' },
  ]);
  for (const [k, v] of Object.entries(t.expected)) assert.deepEqual(replay(responses)[k as 'state'], v, k);
});

test('split at every byte boundary (and byte by byte) gives the same responses', () => {
  for (const name of ['session-studio-mini.json', 'session-async-record.json']) {
    const text = transcript(name).received;
    const whole = readAll(text).responses;
    for (let cut = 1; cut < text.length; cut++) {
      assert.deepEqual(
        readAll(text, [text.slice(0, cut), text.slice(cut)]).responses,
        whole,
        `${name} cut at ${cut}`,
      );
    }
    assert.deepEqual(readAll(text, text.split('')).responses, whole, `${name} character by character`); // ASCII transcripts
  }
});

test('async 508 blocks with only changed keys are merged; active slot and clip id none understood', () => {
  const t = transcript('session-async-record.json');
  const { responses, problems } = readAll(t.received);
  assert.equal(problems, 0);
  assert.deepEqual(
    responses.map((r) => r.code),
    [500, 200, 200, 208, 205, 508, 508, 502],
  );
  const s = replay(responses);
  for (const [k, v] of Object.entries(t.expected)) assert.deepEqual(s[k as 'state'], v, k);
  assert.equal(transportInfoFrom(responses[3]!.params).clipId, null);
  assert.equal(transportInfoFrom(responses[3]!.params).slotId, '1');
});

test('120 connection rejected is one single-line response', () => {
  const { responses } = readAll(transcript('rejected.json').received);
  assert.deepEqual(responses, [{ code: HD.CONNECTION_REJECTED, text: 'connection rejected', params: [] }]);
});

test('LF-only line ends, unknown lines, a cut-short block and overlong lines', () => {
  const { responses, problems } = readAll(
    '200 ok\nnonsense here\n208 transport info:\nstatus: play\n200 ok\n',
  );
  assert.deepEqual(
    responses.map((r) => [r.code, r.params.length]),
    [
      [200, 0],
      [208, 1],
      [200, 0],
    ],
  );
  assert.equal(problems, 2); // the unknown line and the unterminated block
  const splitter = new LineSplitter(100);
  const long = splitter.push('x'.repeat(150));
  assert.equal(long.problems[0]?.kind, 'line-too-long');
  assert.ok(splitter.pending <= 101);
  assert.deepEqual(splitter.push('yyy\r\n200 ok\r\n').lines, ['200 ok']);
});

test('a response block over the character bound is dropped whole; the lines after it are read', () => {
  const assembler = new ResponseAssembler(10_000, 10_000);
  const lines = ['205 clips info:', 'clip count: 40'];
  // 40 clips of about 300 characters each: under the parameter count and the line length, over 10 000 chars.
  for (let i = 1; i <= 40; i++) lines.push(`${i}: ${'n'.repeat(280)}.mov 00:00:00:00 00:00:10:00`);
  lines.push('', '208 transport info:', 'status: play', '', '200 ok');
  const responses: [number, number][] = [];
  const problems: string[] = [];
  for (const line of lines) {
    const r = assembler.push(line);
    responses.push(...r.responses.map((x): [number, number] => [x.code, x.params.length]));
    problems.push(...r.problems.map((x) => x.kind));
  }
  assert.deepEqual(problems, ['too-many-parameters'], 'one problem, not one per skipped line');
  assert.deepEqual(responses, [
    [208, 1],
    [200, 0],
  ]);
  // The default bound holds a large clip list.
  const big = new ResponseAssembler();
  big.push('205 clips info:');
  for (let i = 1; i <= 5000; i++) big.push(`${i}: Clip ${i}.mov 00:00:00:00 00:00:10:00`);
  assert.equal(big.push('').responses[0]?.params.length, 5000);
  assert.ok(HYPERDECK_MAX_BLOCK_CHARS <= 4 * 1024 * 1024);
});

test('command encoding and video formats', () => {
  assert.equal(encodeCommand('transport info'), 'transport info\r\n');
  assert.equal(encodeCommand('notify', [['transport', true]]), 'notify: transport: true\r\n');
  assert.equal(encodeCommand('watchdog', [['period', 6]]), 'watchdog: period: 6\r\n');
});

test('transport status mapping', () => {
  const r = new HyperdeckReducer({ framerate: 25, defaultFramerate: 50 });
  const cases: [string, string][] = [
    ['play', 'play'],
    ['record', 'rec'],
    ['preview', 'stop'],
    ['stopped', 'stop'],
    ['forward', 'stop'],
    ['rewind', 'stop'],
    ['jog', 'stop'],
    ['shuttle', 'stop'],
  ];
  for (const [status, state] of cases) assert.equal(r.onTransport({ status }, false).state, state, status);
  assert.equal(r.onDisconnected('connection rejected (120)').state, 'offline');
});

test('fast-check: random lines and random chunking never throw, and the buffer stays bounded', () => {
  const line = fc.oneof(
    fc.string({ maxLength: 60 }),
    fc.constantFrom(
      '500 connection info:',
      '208 transport info:',
      '508 transport info:',
      '205 clips info:',
      '200 ok',
      '',
      'status: play',
      'clip id: 7',
      '1: a b 00:00:00:00 00:00:01:00',
    ),
    fc
      .tuple(fc.integer({ min: 0, max: 999 }), fc.string({ maxLength: 20 }), fc.boolean())
      .map(([c, t, colon]) => `${c} ${t}${colon ? ':' : ''}`),
  );
  fc.assert(
    fc.property(
      fc.array(line, { maxLength: 40 }),
      fc.array(fc.nat({ max: 50 }), { maxLength: 20 }),
      fc.constantFrom('\r\n', '\n'),
      (lines, cuts, eol) => {
        const text = lines.join(eol) + eol;
        const reader = new HyperdeckReader(256, 64);
        const r = new HyperdeckReducer({ framerate: undefined, defaultFramerate: 25 });
        let at = 0;
        for (const c of [...cuts, text.length]) {
          const chunk = text.slice(at, at + c + 1);
          at += chunk.length;
          for (const resp of reader.push(chunk).responses) {
            r.onTransport(transportInfoFrom(resp.params), resp.code === 508);
            r.onClips(clipsInfoFrom(resp.params));
          }
          if (at >= text.length) break;
        }
      },
    ),
    { numRuns: 1000 },
  );
});

test('protocol 1.11 session: 23.976 format, 513 display timecode pushes, then the disk removed: 502, 508, 107', () => {
  const t = JSON.parse(readFixture('hyperdeck', 'session-display-timecode-eject.json')) as Transcript & {
    expected_before_eject: Record<string, unknown>;
  };
  const { responses, problems } = readAll(t.received);
  assert.equal(problems, 0);
  assert.deepEqual(
    responses.map((r) => r.code),
    [500, 200, 200, 200, 200, 208, 205, 513, 513, 502, 508, 107],
  );
  const before = replay(responses.slice(0, 9));
  for (const [k, v] of Object.entries(t.expected_before_eject)) assert.deepEqual(before[k as 'state'], v, k);
  assert.ok(Math.abs((before.framerate ?? 0) - 24000 / 1001) < 1e-9);
  const after = replay(responses);
  for (const [k, v] of Object.entries(t.expected)) assert.deepEqual(after[k as 'state'], v, k);
});
