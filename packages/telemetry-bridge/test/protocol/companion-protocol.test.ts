/**
 * Satellite line codec. Vectors are transcribed from Companion's own tests and sources (each names its file;
 * bitfocus/companion at 3d76cbad, main after v5.0.3, unless a tag is given), so the codec is checked against
 * the peer's behaviour rather than against notes written for this package.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  LineSplitter,
  LineTooLongError,
  compareVersions,
  formatClientLine,
  formatServerLine,
  fromBase64,
  isFalsey,
  isTruthy,
  splitLine,
  splitParams,
  toBase64,
} from '../../src/protocol/satellite.ts';

// companion/test/Resources/Util.test.ts, describe('parseLineParameters')
const PARAM_VECTORS: [string, Record<string, string | true>][] = [
  ['KEY=value', { KEY: 'value' }],
  ['A=1 B=2 C=3', { A: '1', B: '2', C: '3' }],
  ['KEY=', { KEY: '' }],
  ['N=42 F=0', { N: '42', F: '0' }],
  ['FLAG', { FLAG: true }],
  ['A=1 FLAG B=2', { A: '1', FLAG: true, B: '2' }],
  ['BITMAP=iVBORw0KGgoAAAANSUhEUg==', { BITMAP: 'iVBORw0KGgoAAAANSUhEUg==' }],
  ['X=a=b=c', { X: 'a=b=c' }],
  ['TEXT="hello world"', { TEXT: 'hello world' }],
  ['PATH=0/0 X="a=b=c"', { PATH: '0/0', X: 'a=b=c' }],
  ['KEY=va"lue"', { KEY: 'value' }],
  ['"quoted key"=v', { 'quoted key': 'v' }],
  ['KEY="a\\"b"', { KEY: 'a"b' }],
  ['KEY=a\\ b', { KEY: 'a b' }],
  ['KEY=a\\', { KEY: 'a' }],
  ['FLAG\\', { FLAG: true }],
  ['A=1\tB=2', { A: '1\tB=2' }],
  ['A=1  B=2', { A: '1', B: '2' }],
  ['  A=1 B=2  ', { A: '1', B: '2' }],
];

test('splitParams matches Companion parseLineParameters vectors', () => {
  for (const [input, expected] of PARAM_VECTORS) {
    assert.deepEqual({ ...splitParams(input) }, expected, input);
  }
});

test('prototype-pollution keys are dropped and the result has no prototype', () => {
  const p = splitParams(
    '__proto__=x constructor=y prototype=z __defineGetter__=a __lookupSetter__ OK=1 toString=t',
  );
  assert.equal(Object.getPrototypeOf(p), null);
  assert.deepEqual(Object.keys(p).sort(), ['OK', 'toString']);
  assert.equal(({} as Record<string, unknown>)['x'], undefined);
  fc.assert(
    fc.property(fc.string({ maxLength: 60 }), (s) => {
      const r = splitParams(s);
      assert.equal(Object.getPrototypeOf(r), null);
      for (const k of ['__proto__', 'constructor', 'prototype']) assert.ok(!Object.hasOwn(r, k));
    }),
  );
});

test('server lines: exact strings from companion/test/Service/Satellite/SatelliteApi.test.ts', () => {
  assert.equal(
    formatServerLine('TEST', 'OK', 'dev1', { KEY: 'value', NUM: 42, BOOL: true }),
    'TEST OK DEVICEID="dev1" KEY="value" NUM=42 BOOL=1 \n',
  );
  assert.equal(
    formatServerLine('CMD', 'ERROR', 'dev1', { MESSAGE: 'Something went wrong' }),
    'CMD ERROR DEVICEID="dev1" MESSAGE="Something went wrong" \n',
  );
  assert.equal(formatServerLine('PONG', null, null, {}), 'PONG \n');
  // `PING` with a body is answered by sendMessage(`PONG ${body}`): a bare PING gets two spaces.
  assert.equal(formatServerLine(`PONG abc`, null, null), 'PONG abc \n');
  assert.equal(formatServerLine(`PONG `, null, null), 'PONG  \n');
  // Companion cannot escape inside quotes; the codec refuses rather than corrupting the stream.
  assert.throws(() => formatServerLine('X', null, null, { V: 'a"b' }));
});

test('replies parse into flags: OK/ERROR, DEVICEID, MESSAGE (both dialects)', () => {
  const modern = splitLine('KEY-PRESS ERROR DEVICEID="dev1" MESSAGE="Device not found" ');
  assert.equal(modern.name, 'KEY-PRESS');
  assert.deepEqual({ ...modern.params }, { ERROR: true, DEVICEID: 'dev1', MESSAGE: 'Device not found' });
  // Companion 3.x (lib/Service/Satellite.js at v3.4.0): bare OK, unquoted BEGIN values.
  assert.deepEqual({ ...splitLine('KEY-PRESS OK').params }, { OK: true });
  assert.deepEqual(
    { ...splitLine('BEGIN CompanionVersion=3.4.0+6573-v3.4.0-21e8b7d5 ApiVersion=1.7.0').params },
    { CompanionVersion: '3.4.0+6573-v3.4.0-21e8b7d5', ApiVersion: '1.7.0' },
  );
  // Companion 3.x KEY-STATE: `TYPE=${type} ${params}` with params starting with a space.
  const ks = splitLine(
    'KEY-STATE DEVICEID=dev1 KEY=3 TYPE=BUTTON  COLOR=#ff0000 TEXT=Q0FNIDE= PRESSED=false',
  );
  assert.deepEqual(
    { ...ks.params },
    { DEVICEID: 'dev1', KEY: '3', TYPE: 'BUTTON', COLOR: '#ff0000', TEXT: 'Q0FNIDE=', PRESSED: 'false' },
  );
  assert.equal(fromBase64(ks.params['TEXT'] as string), 'CAM 1');
  // one \r removed (SatelliteApi.test.ts 'strips carriage returns from messages'), command upper-cased
  const p = splitLine('ping test\r');
  assert.equal(p.name, 'PING');
  assert.equal(p.body, 'test');
});

test('Companion booleans: isFalsey / isTruthy (companion/lib/Resources/Util.ts)', () => {
  for (const v of ['0', 'false', 'FALSE', '', undefined]) assert.equal(isFalsey(v), true, String(v));
  for (const v of ['1', 'true', 'yes', 'YES', '2', true] as const) assert.equal(isTruthy(v), true, String(v));
  for (const v of ['-1', 'no', 'abc', '0.5']) assert.equal(isTruthy(v), false, v);
});

test('client lines round-trip through the Companion parser: quotes, backslashes, spaces, = and base64', () => {
  const line = formatClientLine('ADD-DEVICE', {
    DEVICEID: 'dev 1',
    PRODUCT_NAME: 'Say "hi" \\ bye',
    KEYS_TOTAL: 32,
    TEXT: true,
    BITMAPS: false,
    VARIABLES: toBase64('[{"id":"a=b"}]'),
    SKIPPED: undefined,
  });
  assert.ok(line.endsWith('\n') && !line.endsWith(' \n'));
  const p = splitLine(line.slice(0, -1));
  assert.equal(p.name, 'ADD-DEVICE');
  assert.deepEqual(
    { ...p.params },
    {
      DEVICEID: 'dev 1',
      PRODUCT_NAME: 'Say "hi" \\ bye',
      KEYS_TOTAL: '32',
      TEXT: '1',
      BITMAPS: '0',
      VARIABLES: toBase64('[{"id":"a=b"}]'),
    },
  );
  assert.throws(() => formatClientLine('X', { V: 'two\nlines' }), /newline/);
  assert.throws(() => formatClientLine('X', { 'BAD KEY': 'v' }));
  fc.assert(
    fc.property(
      fc.dictionary(
        fc.stringMatching(/^[A-Z][A-Z0-9_]{0,11}$/),
        fc.string({ maxLength: 40 }).filter((s) => !/[\r\n]/.test(s)),
        { maxKeys: 6 },
      ),
      (args) => {
        const back = splitLine(formatClientLine('CMD', args).slice(0, -1));
        assert.deepEqual({ ...back.params }, { ...args });
      },
    ),
  );
});

test('LineSplitter: lines split at every boundary, across chunks and frames, with \\r\\n', () => {
  const text =
    'BEGIN CompanionVersion="5.0.3" ApiVersion="1.12.0" \nKEY-STATE DEVICEID="d" KEY=0 TEXT="w6lsw6k=" \r\nPONG 1 \n';
  const whole = new LineSplitter().push(text);
  assert.equal(whole.length, 3);
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j += 7) {
      const s = new LineSplitter();
      const got = [...s.push(text.slice(0, i)), ...s.push(text.slice(i, j)), ...s.push(text.slice(j))];
      assert.deepEqual(got, whole);
      assert.equal(s.pending, 0);
    }
  }
  assert.equal(splitLine(whole[1] ?? '').params['TEXT'], 'w6lsw6k=');
  // A frame without \n is held, not processed (Companion buffers WebSocket frames the same way).
  const s = new LineSplitter();
  assert.deepEqual(s.push('PING 1'), []);
  assert.deepEqual(s.push(' \n'), ['PING 1 ']);
});

test('LineSplitter: an over-long line is refused and the buffer freed', () => {
  const s = new LineSplitter(64);
  assert.deepEqual(s.push('x'.repeat(64)), []);
  assert.throws(() => s.push('y'), LineTooLongError);
  assert.equal(s.pending, 0);
  // A long line that does end in time passes.
  assert.deepEqual(new LineSplitter(64).push('z'.repeat(60) + '\n'), ['z'.repeat(60)]);
  fc.assert(
    fc.property(fc.array(fc.string({ maxLength: 30 }), { maxLength: 20 }), (chunks) => {
      const sp = new LineSplitter(50);
      let out = 0;
      for (const c of chunks) {
        try {
          out += sp.push(c).length;
        } catch (err) {
          assert.ok(err instanceof LineTooLongError);
        }
        assert.ok(sp.pending <= 50);
      }
      return out >= 0;
    }),
  );
});

test('versions compare numerically (1.10.0 after 1.9.0)', () => {
  assert.equal(compareVersions('1.10.0', '1.9.0'), 1);
  assert.equal(compareVersions('1.7.0', '1.7.1'), -1);
  assert.equal(compareVersions('1.14.0', '1.14.0'), 0);
  assert.equal(compareVersions('1.10.1-beta', '1.10.1'), 0);
});
