import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, readFileSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import { crc32 } from 'node:zlib';
import { decodeRecords, encodeRecord, encodeRecordBody, recordBodyText } from '../src/protocol/log-record.ts';
import { EventLog, listSegments, readLog } from '../src/io/event-log.ts';
import { formatReplay } from '../src/replay.ts';

function openLog(dir: string, maxFileBytes = 1 << 20, maxFiles = 4, epoch = 'epoch-a'): EventLog {
  const log = new EventLog({
    dir,
    maxFileBytes,
    maxFiles,
    newEpoch: () => epoch,
    now: () => 1_700_000_000_000,
  });
  log.open();
  return log;
}

function stateJson(offset: number, path: string, value: unknown): string {
  return JSON.stringify({
    id: `id-${offset}`,
    type: 'state',
    source: 'fake.device',
    path,
    payload: { value, owner: 'fake.device', version: offset },
    timestamp: 1,
    sequence: offset,
    offset,
  });
}

test('record framing: length + CRC-32 big endian, body spliced without re-serialising', () => {
  const body = recordBodyText(7, 1000, 'state', '{"a":1}');
  assert.equal(body, '{"o":7,"t":1000,"k":"state","m":{"a":1}}');
  const buf = encodeRecordBody(body);
  assert.equal(buf.readUInt32BE(0), Buffer.byteLength(body));
  assert.equal(buf.readUInt32BE(4), crc32(Buffer.from(body)));
  // Known CRC-32 check value (ISO-HDLC): "123456789" → 0xCBF43926.
  assert.equal(crc32('123456789'), 0xcbf43926);
  const two = Buffer.concat([buf, encodeRecord({ o: 8, t: 1001, k: 'event', m: { é: 'ü' } })]);
  const r = decodeRecords(two);
  assert.equal(r.stopReason, undefined);
  assert.deepEqual(
    r.records.map((x) => x.o),
    [7, 8],
  );
  assert.deepEqual(r.records[1]!.m, { é: 'ü' });
});

test('a torn last record is detected at every cut point and skipped; earlier records survive', () => {
  const a = encodeRecord({ o: 1, t: 1, k: 'state', m: { v: 1 } });
  const b = encodeRecord({ o: 2, t: 2, k: 'state', m: { v: 'two' } });
  const whole = Buffer.concat([a, b]);
  for (let cut = a.length + 1; cut < whole.length; cut++) {
    const r = decodeRecords(whole.subarray(0, cut));
    assert.equal(r.records.length, 1, `cut at ${cut}`);
    assert.equal(r.goodBytes, a.length);
    assert.ok(r.stopReason === 'short-header' || r.stopReason === 'short-body');
  }
  const flipped = Buffer.from(whole);
  flipped[whole.length - 2] = flipped[whole.length - 2]! ^ 0x01;
  assert.equal(decodeRecords(flipped).stopReason, 'crc-mismatch');
  const huge = Buffer.alloc(8);
  huge.writeUInt32BE(0xffffffff, 0);
  assert.equal(decodeRecords(huge).stopReason, 'too-large', 'a wild length is not allocated');
});

test('recovery: torn tail truncated, same epoch, appends continue at the next offset', () => {
  const dir = tempDir('tb-log-');
  try {
    const log = openLog(dir.path);
    assert.equal(log.epoch, 'epoch-a');
    for (let o = 1; o <= 20; o++) log.append(o, 1000 + o, 'state', stateJson(o, `fake.k${o % 3}`, o));
    log.close();
    const seg = join(dir.path, listSegments(dir.path)[0]!.name);
    // A torn write: the first 11 bytes of another record.
    appendFileSync(seg, encodeRecord({ o: 21, t: 1, k: 'state', m: { v: 21 } }).subarray(0, 11));
    const again = openLog(dir.path, 1 << 20, 4, 'epoch-NEW');
    assert.equal(again.epoch, 'epoch-a', 'a torn tail is not lost history');
    assert.equal(again.report.truncatedBytes, 11);
    assert.equal(again.report.historyLost, false);
    assert.equal(again.recovered?.lastOffset, 20);
    assert.equal(again.recovered?.floorOffset, 0);
    again.append(21, 2000, 'event', JSON.stringify({ path: 'fake.e', offset: 21 }));
    again.close();
    const { records, torn } = readLog(dir.path);
    assert.deepEqual(torn, []);
    assert.deepEqual(
      records.filter((r) => r.k !== 'meta').map((r) => r.o),
      Array.from({ length: 21 }, (_, i) => i + 1),
    );
  } finally {
    dir.remove();
  }
});

test('rotation by size keeps at most maxFiles segments; each starts with the epoch header', () => {
  const dir = tempDir('tb-log-');
  try {
    const log = openLog(dir.path, 4096, 3);
    for (let o = 1; o <= 400; o++) log.append(o, o, 'state', stateJson(o, 'fake.a', 'x'.repeat(50)));
    log.close();
    const segs = listSegments(dir.path);
    assert.equal(segs.length, 3);
    const { records } = readLog(dir.path);
    const metas = records.filter((r) => r.k === 'meta');
    assert.equal(metas.length, 3);
    for (const m of metas) assert.equal((m.m as { epoch: string }).epoch, 'epoch-a');
    const offsets = records.filter((r) => r.k !== 'meta').map((r) => r.o);
    assert.equal(offsets.at(-1), 400);
    for (let i = 1; i < offsets.length; i++) assert.equal(offsets[i], offsets[i - 1]! + 1, 'contiguous');
    const reopened = openLog(dir.path, 4096, 3, 'other');
    assert.equal(
      reopened.recovered?.floorOffset,
      offsets[0]! - 1,
      'replay floor = before the oldest kept record',
    );
    reopened.close();
  } finally {
    dir.remove();
  }
});

test('damage in the middle of the history starts a new epoch and keeps the damaged files aside', () => {
  const dir = tempDir('tb-log-');
  try {
    const log = openLog(dir.path, 2048, 10);
    for (let o = 1; o <= 100; o++) log.append(o, o, 'state', stateJson(o, 'fake.a', o));
    log.close();
    const first = join(dir.path, listSegments(dir.path)[0]!.name);
    const bytes = readFileSync(first);
    bytes[bytes.length - 3] = bytes[bytes.length - 3]! ^ 0xff;
    writeFileSync(first, bytes);
    const again = openLog(dir.path, 2048, 10, 'epoch-b');
    assert.equal(again.epoch, 'epoch-b');
    assert.equal(again.report.historyLost, true);
    assert.equal(again.recovered, undefined);
    again.close();
    assert.ok(readdirSync(dir.path).some((n) => n.includes('.damaged-')));
    // A crash right after rotation tears the new segment's header: same epoch, nothing lost.
    const dir2 = tempDir('tb-log-');
    try {
      const l2 = openLog(dir2.path, 1024, 10, 'epoch-c');
      for (let o = 1; o <= 12; o++) l2.append(o, o, 'state', stateJson(o, 'fake.a', o));
      l2.close();
      const segs = listSegments(dir2.path);
      assert.ok(segs.length >= 2);
      const newest = join(dir2.path, segs.at(-1)!.name);
      const meta = readFileSync(newest);
      const firstRecordEnd = 8 + meta.readUInt32BE(0);
      truncateSync(newest, firstRecordEnd - 3);
      const dropped = readLog(dir2.path)
        .records.filter((r) => r.k !== 'meta')
        .at(-1)!.o;
      const l3 = openLog(dir2.path, 1024, 10, 'epoch-d');
      assert.equal(l3.epoch, 'epoch-c');
      assert.equal(l3.report.historyLost, false);
      assert.equal(l3.recovered?.lastOffset, dropped);
      assert.equal(listSegments(dir2.path).length, segs.length - 1, 'the torn segment was removed');
      l3.append(dropped + 1, 1, 'state', stateJson(dropped + 1, 'fake.a', 0));
      l3.close();
      const offsets = readLog(dir2.path)
        .records.filter((r) => r.k !== 'meta')
        .map((r) => r.o);
      assert.deepEqual(
        offsets,
        Array.from({ length: dropped + 1 }, (_, k) => k + 1),
      );
    } finally {
      dir2.remove();
    }
  } finally {
    dir.remove();
  }
});

test('replay: filters by offset, kind, path pattern and correlation id; the CLI prints JSON lines', () => {
  const dir = tempDir('tb-log-');
  try {
    const log = openLog(dir.path);
    log.append(1, 1, 'state', stateJson(1, 'fake.a.b', 1));
    log.append(
      2,
      2,
      'command',
      JSON.stringify({ id: 'c1', type: 'command', path: 'fake.x', correlationId: 'corr-9' }),
    );
    log.append(
      3,
      3,
      'ack',
      JSON.stringify({ id: 'a1', type: 'ack', path: 'fake.x', correlationId: 'corr-9' }),
    );
    log.append(4, 4, 'state', stateJson(4, 'fake.c', 2));
    log.close();
    const parse = (lines: string[]): number[] => lines.map((l) => (JSON.parse(l) as { o: number }).o);
    assert.deepEqual(parse(formatReplay(dir.path, { from: 1, kind: 'state' }, false)), [4]);
    assert.deepEqual(parse(formatReplay(dir.path, { path: 'fake.*.b' }, false)), [1]);
    assert.deepEqual(parse(formatReplay(dir.path, { correlationId: 'corr-9' }, false)), [2, 3]);
    const out = execFileSync(
      process.execPath,
      [
        join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs'),
        'replay',
        '--dir',
        dir.path,
        '--type',
        'ack',
      ],
      { encoding: 'utf8' },
    );
    assert.deepEqual(parse(out.trim().split('\n')), [3]);
    const summary = execFileSync(
      process.execPath,
      [
        join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs'),
        'replay',
        '--dir',
        dir.path,
        '--summary',
      ],
      { encoding: 'utf8' },
    );
    const s = JSON.parse(summary) as { records: number; lastOffset: number };
    assert.equal(s.lastOffset, 4);
    assert.equal(s.records, 5);
  } finally {
    dir.remove();
  }
});
