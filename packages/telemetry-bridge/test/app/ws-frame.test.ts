/**
 * The fan-out writes frames it builds itself (io/ws-transport.ts, docs/performance.md): checked here against
 * the `ws` library's own frame parser (its Receiver, as a client reads server frames) at each of the three
 * payload-length encodings of RFC 6455 §5.2 and with multi-byte UTF-8.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { textFrame } from '../../src/io/ws-transport.ts';

interface ReceiverLike {
  on(event: 'message', fn: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'error', fn: (err: Error) => void): this;
  write(chunk: Buffer): boolean;
}
const require = createRequire(import.meta.url);
// ws exports its Receiver (CommonJS `require('ws').Receiver`); @types/ws does not describe it.
const Receiver = (require('ws') as { Receiver: unknown }).Receiver as new (o: {
  isServer: boolean;
  maxPayload: number;
}) => ReceiverLike;

function parse(frame: Buffer): Promise<{ text: string; isBinary: boolean }> {
  return new Promise((resolve, reject) => {
    const r = new Receiver({ isServer: false, maxPayload: 0 });
    r.on('message', (data, isBinary) => resolve({ text: data.toString('utf8'), isBinary }));
    r.on('error', reject);
    r.write(frame);
    // The receiver parses synchronously: no message by now means the frame was not one whole message.
    setImmediate(() => reject(new Error(`no message parsed from a ${frame.length}-byte frame`)));
  });
}

test('fan-out text frames parse in ws as the same text: 7-, 16- and 64-bit lengths, multi-byte UTF-8', async () => {
  const samples = [
    '',
    '{"a":1}',
    'x'.repeat(125),
    'x'.repeat(126),
    '€'.repeat(42), // 126 bytes from 42 characters
    'y'.repeat(65_535),
    'z'.repeat(65_536),
    JSON.stringify({ value: 'ü'.repeat(40_000) }),
  ];
  for (const text of samples) {
    const frame = textFrame(text);
    const bytes = Buffer.byteLength(text);
    assert.equal(frame[0], 0x81, 'FIN + text opcode');
    assert.equal(frame.length, bytes + (bytes < 126 ? 2 : bytes < 65_536 ? 4 : 10));
    const got = await parse(frame);
    assert.equal(got.isBinary, false);
    assert.equal(got.text, text);
  }
});
