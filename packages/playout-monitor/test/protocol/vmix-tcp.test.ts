import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { refusal } from '@broadcast-ops/core/testing';
import {
  parseTallyDigits,
  VMIX_TCP_MAX_LINE,
  VmixTcpFramer,
  type VmixTcpMessage,
} from '../../src/protocol/vmix-tcp.ts';
import { VMIX_MAX_XML_BYTES } from '../../src/protocol/vmix.ts';

function feed(framer: VmixTcpFramer, bytes: Buffer, cuts: number[] = []): VmixTcpMessage[] {
  const out: VmixTcpMessage[] = [];
  let at = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length)]
    .sort((a, b) => a - b)
    .concat(bytes.length)) {
    const r = framer.push(bytes.subarray(at, cut));
    if ('error' in r) throw new Error(r.error);
    out.push(...r.messages);
    at = cut;
  }
  return out;
}

// The exchange of vMix help, "TCP API": SUBSCRIBE's answer, two tally pushes, an XML answer whose length
// counts the document's UTF-8 bytes (an "é" is two), then the line break vMix sends after the data.
const XML =
  '<vmix><version>27.0.0.49</version><inputs><input key="k" number="1" title="Café"/></inputs></vmix>';
const SESSION = Buffer.concat([
  Buffer.from('SUBSCRIBE OK TALLY\r\nTALLY OK 0121\r\n'),
  Buffer.from(`XML ${Buffer.byteLength(XML)}\r\n`),
  Buffer.from(XML),
  Buffer.from('\r\nTALLY OK 1200\r\nFUNCTION ER Input not found\r\n'),
]);
const EXPECTED: VmixTcpMessage[] = [
  { command: 'SUBSCRIBE', status: 'OK', text: 'TALLY' },
  { command: 'TALLY', status: 'OK', text: '0121' },
  { command: 'XML', status: 'data', text: '', data: XML },
  { command: 'TALLY', status: 'OK', text: '1200' },
  { command: 'FUNCTION', status: 'ER', text: 'Input not found' },
];

test('a session of the TCP API frames the same whole and cut at every byte', () => {
  assert.deepEqual(feed(new VmixTcpFramer(), SESSION), EXPECTED);
  for (let cut = 1; cut < SESSION.length; cut++) {
    assert.deepEqual(feed(new VmixTcpFramer(), SESSION, [cut]), EXPECTED, `cut at ${cut}`);
  }
});

test('TALLY digits: 0 off, 1 program, 2 preview; anything else is refused', () => {
  assert.deepEqual(parseTallyDigits('0121'), { ok: true, value: [0, 1, 2, 1] });
  assert.deepEqual(parseTallyDigits(''), { ok: true, value: [] });
  assert.equal(refusal(parseTallyDigits('01x')), 'bad-digit');
  assert.equal(refusal(parseTallyDigits('3')), 'bad-digit');
  assert.equal(refusal(parseTallyDigits('1'.repeat(1001))), 'too-many-inputs');
});

test('bounds: a line over the bound, a length over the XML bound and a bad status are errors; the framer then refuses more', () => {
  const long = new VmixTcpFramer();
  const r1 = long.push(Buffer.alloc(VMIX_TCP_MAX_LINE + 2, 0x41));
  assert.ok('error' in r1 && /over 8192 bytes/.test(r1.error));
  assert.equal(long.buffered, 0, 'nothing held after the error');
  assert.ok('error' in long.push(Buffer.from('TALLY OK 1\r\n')));
  const big = new VmixTcpFramer().push(Buffer.from(`XML ${VMIX_MAX_XML_BYTES + 1}\r\n`));
  assert.ok('error' in big);
  assert.ok('error' in new VmixTcpFramer().push(Buffer.from('TALLY maybe 1\r\n')));
  assert.ok('error' in new VmixTcpFramer().push(Buffer.from('<vmix>\r\n')));
});

test('fuzz: random bytes in random chunks never throw and never hold more than the bounds allow', () => {
  fc.assert(
    fc.property(
      fc.array(fc.uint8Array({ maxLength: 600 }), { maxLength: 20 }),
      fc.boolean(),
      (chunks, withLength) => {
        const framer = new VmixTcpFramer();
        if (withLength) framer.push(Buffer.from('XML 2000\r\n'));
        for (const c of chunks) {
          const r = framer.push(c);
          if ('error' in r) {
            assert.equal(framer.buffered, 0);
            return;
          }
          assert.ok(framer.buffered <= Math.max(VMIX_TCP_MAX_LINE, 2000) + 600, `${framer.buffered}`);
        }
      },
    ),
    { numRuns: 800, interruptAfterTimeLimit: 20_000 },
  );
});

test('fuzz: any sequence of well-formed answers, cut anywhere, comes back unchanged', () => {
  const command = fc.constantFrom('TALLY', 'XML', 'FUNCTION', 'SUBSCRIBE', 'ACTS');
  const line = fc.record({
    command,
    status: fc.constantFrom('OK' as const, 'ER' as const),
    text: fc.stringMatching(/^[ -~]{0,40}$/).map((t) => t.trim().replace(/ +/g, ' ')),
  });
  const data = fc.record({
    command,
    status: fc.constant('data' as const),
    text: fc.constant(''),
    data: fc.string({ maxLength: 300, unit: 'grapheme' }),
  });
  fc.assert(
    fc.property(
      fc.array(fc.oneof(line, data), { maxLength: 12 }),
      fc.array(fc.nat(), { maxLength: 8 }),
      (msgs, cuts) => {
        const bytes = Buffer.concat(
          msgs.map((m) =>
            m.status === 'data'
              ? Buffer.concat([
                  Buffer.from(`${m.command} ${Buffer.byteLength(m.data)}\r\n`),
                  Buffer.from(m.data),
                ])
              : Buffer.from(`${m.command} ${m.status}${m.text === '' ? '' : ` ${m.text}`}\r\n`),
          ),
        );
        const got = feed(
          new VmixTcpFramer(),
          bytes,
          cuts.map((c) => (bytes.length === 0 ? 0 : c % bytes.length)),
        );
        assert.deepEqual(
          got,
          msgs.map((m) => ({ ...m })),
        );
      },
    ),
    { numRuns: 500, interruptAfterTimeLimit: 20_000 },
  );
});
