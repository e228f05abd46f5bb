/**
 * The event log's record framing (README "Durability"): length and CRC-32 big endian, the body spliced without
 * re-serialising, records scanned back in order. The log on disk (torn tails, rotation, damage, group
 * commit): test/io/event-log.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import {
  scanRecords,
  encodeRecord,
  encodeRecordBody,
  recordBodyText,
} from '../../src/protocol/log-record.ts';

test('record framing: length + CRC-32 big endian, body spliced without re-serialising', () => {
  const body = recordBodyText(7, 1000, 'state', '{"a":1}');
  assert.equal(body, '{"o":7,"t":1000,"k":"state","m":{"a":1}}');
  const buf = encodeRecordBody(body);
  assert.equal(buf.readUInt32BE(0), Buffer.byteLength(body));
  assert.equal(buf.readUInt32BE(4), crc32(Buffer.from(body)));
  // Known CRC-32 check value (ISO-HDLC): "123456789" → 0xCBF43926.
  assert.equal(crc32('123456789'), 0xcbf43926);
  const two = Buffer.concat([buf, encodeRecord({ o: 8, t: 1001, k: 'event', m: { é: 'ü' } })]);
  const r = scanRecords(two);
  assert.equal(r.stopReason, undefined);
  assert.deepEqual(
    r.records.map((x) => x.o),
    [7, 8],
  );
  assert.deepEqual(r.records[1]!.m, { é: 'ü' });
});

test('a zero tail after the records is unused space; any other byte in it is damage, wherever it is', () => {
  const records = Buffer.concat([
    encodeRecord({ o: 1, t: 1000, k: 'state', m: { a: 1 } }),
    encodeRecord({ o: 2, t: 1001, k: 'state', m: { b: 2 } }),
  ]);
  // Tails up to past two of the scan's 64 KiB chunks; a non-zero byte anywhere in one, its edges included.
  const tail = fc.integer({ min: 1, max: 140 * 1024 });
  fc.assert(
    fc.property(
      tail,
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.integer({ min: 1, max: 255 }),
      (n, where, byte) => {
        const zeros = Buffer.concat([records, Buffer.alloc(n)]);
        const clean = scanRecords(zeros);
        assert.equal(clean.stopReason, 'zero-fill');
        assert.equal(clean.goodBytes, records.length);
        assert.equal(clean.records.length, 2);
        const at = records.length + Math.min(n - 1, Math.floor(where * n));
        zeros[at] = byte;
        const damaged = scanRecords(zeros);
        assert.notEqual(damaged.stopReason, 'zero-fill', `byte ${byte} at ${at - records.length} of ${n}`);
        assert.notEqual(damaged.stopReason, undefined);
        assert.equal(damaged.goodBytes, records.length);
      },
    ),
    {
      numRuns: 200,
      examples: [
        [64 * 1024, 1, 1],
        [64 * 1024 + 1, 1, 7],
        [1, 0, 255],
        [128 * 1024, 0.5, 3],
      ],
    },
  );
});
