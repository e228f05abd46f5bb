/**
 * The event log's record framing (README "Durability"): length and CRC-32 big endian, the body spliced without
 * re-serialising, records scanned back in order. The log on disk (torn tails, rotation, damage, group
 * commit): test/io/event-log.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32 } from 'node:zlib';
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
