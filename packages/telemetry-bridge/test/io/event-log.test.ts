/**
 * The event log on disk (README "Durability"): torn tails, rotation with checkpoints, damage, replay filters and
 * group commit. The record framing: test/protocol/log-record.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, ftruncateSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { ManualClock, repoRoot, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { silentLogger } from '@broadcast-ops/core';
import { Hub } from '../../src/domain/hub.ts';
import { scanRecords, encodeRecord } from '../../src/protocol/log-record.ts';
import { EventLog, listSegments, readLog } from '../../src/io/event-log.ts';
import { formatReplay } from '../../src/replay.ts';

function openLog(
  dir: string,
  maxFileBytes = 1 << 20,
  maxFiles = 4,
  epoch = 'epoch-a',
  start = true,
): EventLog {
  const log = new EventLog({
    dir,
    maxFileBytes,
    maxFiles,
    newEpoch: () => epoch,
    now: () => 1_700_000_000_000,
  });
  log.open();
  if (start) log.start(() => []);
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

/** Records of the last segment as recovery would read them, without opening the log again. */
function recordsOnDisk(dir: string): number[] {
  const seg = join(dir, listSegments(dir).at(-1)!.name);
  const offsets: number[] = [];
  for (const r of scanRecords(readFileSync(seg)).records) if (r.k === 'state') offsets.push(r.o);
  return offsets;
}

test('records of one job are written together: before a socket write (writePending) or when the job ends', async () => {
  const dir = tempDir('tb-log-');
  try {
    const log = openLog(dir.path);
    for (let o = 1; o <= 3; o++) log.append(o, 1, 'state', stateJson(o, 'fake.k', o));
    // What the client transport does before it writes any frame (io/ws-transport.ts beforeWrite).
    log.writePending();
    assert.deepEqual(recordsOnDisk(dir.path), [1, 2, 3]);
    for (let o = 4; o <= 5; o++) log.append(o, 1, 'state', stateJson(o, 'fake.k', o));
    assert.equal(log.segmentBytes > 0, true);
    // Nothing asks: they are written when the job returns to the event loop (process.nextTick).
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(recordsOnDisk(dir.path), [1, 2, 3, 4, 5]);
    log.append(6, 1, 'state', stateJson(6, 'fake.k', 6));
    // A sync (group commit) writes first what it is to make durable.
    let synced = false;
    log.whenDurable(() => (synced = true));
    log.flush();
    assert.equal(synced, true);
    assert.deepEqual(recordsOnDisk(dir.path), [1, 2, 3, 4, 5, 6]);
    log.close();
  } finally {
    dir.remove();
  }
});

test('one job appending a lot holds at most about 256 KiB of records before it writes them', () => {
  const dir = tempDir('tb-log-');
  try {
    const log = openLog(dir.path, 64 << 20);
    const big = 'x'.repeat(10_000);
    for (let o = 1; o <= 40; o++) log.append(o, 1, 'state', stateJson(o, 'fake.k', big));
    // Still inside the job (no writePending, no tick): 400 KB appended, at least 144 KB already written.
    const written = recordsOnDisk(dir.path).length;
    assert.equal(written >= 25 && written < 40, true, `${written} of 40 records written within the job`);
    log.close();
    assert.equal(recordsOnDisk(dir.path).length, 40);
  } finally {
    dir.remove();
  }
});

test('a torn last record is detected at every cut point and skipped; earlier records survive', () => {
  const a = encodeRecord({ o: 1, t: 1, k: 'state', m: { v: 1 } });
  const b = encodeRecord({ o: 2, t: 2, k: 'state', m: { v: 'two' } });
  const whole = Buffer.concat([a, b]);
  for (let cut = a.length + 1; cut < whole.length; cut++) {
    const r = scanRecords(whole.subarray(0, cut));
    assert.equal(r.records.length, 1, `cut at ${cut}`);
    assert.equal(r.goodBytes, a.length);
    // A cut inside the length field can leave only zero bytes: indistinguishable from unused space.
    assert.ok(
      r.stopReason === 'short-header' || r.stopReason === 'short-body' || r.stopReason === 'zero-fill',
      `cut at ${cut}: ${r.stopReason}`,
    );
  }
  const flipped = Buffer.from(whole);
  flipped[whole.length - 2] = flipped[whole.length - 2]! ^ 0x01;
  assert.equal(scanRecords(flipped).stopReason, 'crc-mismatch');
  const huge = Buffer.alloc(8);
  huge.writeUInt32BE(0xffffffff, 0);
  assert.equal(scanRecords(huge).stopReason, 'too-large', 'a wild length is not allocated');
});

/** A hub on a log directory, as the service wires it: open, restore, start with checkpoints, mark stale. */
function openHub(
  dir: string,
  maxFileBytes = 1 << 20,
  maxFiles = 4,
  epoch = 'epoch-a',
): { log: EventLog; hub: Hub } {
  const log = openLog(dir, maxFileBytes, maxFiles, epoch, false);
  const hub = new Hub({
    clock: new ManualClock(1_700_000_000_000),
    logger: silentLogger(),
    log,
    epoch: log.epoch,
    ...(log.recovered ? { recovered: log.recovered } : {}),
  });
  hub.store.claim('fake', 'fake.device');
  log.start(() => hub.store.checkpoint());
  hub.markRecovered();
  return { log, hub };
}

const valueOf = (hub: Hub, path: string): unknown => hub.store.get(path)?.value;

test('unclean stop with a torn tail: readable records kept, tail quarantined whole, new epoch, offsets go on', () => {
  const dir = tempDir('tb-log-');
  try {
    const a = openHub(dir.path, 1 << 20, 4, 'epoch-a');
    for (let i = 1; i <= 20; i++) a.hub.writeState('fake.device', `fake.k${i % 3}`, i);
    const last = a.hub.offset;
    // The job that appended them ends: its records are written (what happens at the latest when the job
    // returns to the event loop, or before any of them is delivered).
    a.log.writePending();
    // No close(): the process died. Then a power cut tore the next record.
    const seg = join(dir.path, listSegments(dir.path).at(-1)!.name);
    // The torn write lands where the data ends (the file is preallocated with zeros beyond it).
    const end = scanRecords(readFileSync(seg)).goodBytes;
    const fd = openSync(seg, 'r+');
    writeSync(fd, encodeRecord({ o: last + 1, t: 1, k: 'state', m: { v: 21 } }).subarray(0, 11), 0, 11, end);
    ftruncateSync(fd, end + 11);
    closeSync(fd);
    const damaged = readFileSync(seg);
    const b = openHub(dir.path, 1 << 20, 4, 'epoch-b');
    assert.equal(b.log.epoch, 'epoch-b', 'anything short of a clean shutdown opens a new epoch');
    assert.equal(b.log.report.newEpoch, true);
    assert.equal(b.log.report.damage?.reason, 'short-body');
    assert.equal(b.log.report.lostBytes, 11);
    assert.equal(b.log.report.quarantined.length, 1);
    assert.deepEqual(
      readFileSync(join(dir.path, b.log.report.quarantined[0]!)),
      damaged,
      'quarantined untruncated',
    );
    assert.equal(
      b.hub.offset > last,
      true,
      'offsets are never reused: the new epoch continues after the old',
    );
    assert.equal(valueOf(b.hub, 'fake.k2'), 20);
    assert.equal(
      b.hub.store.get('fake.k2')?.stale,
      true,
      'restored keys are stale until their owner is back',
    );
    b.log.close();
    // A clean shutdown keeps the epoch and appends go on in the same file.
    const c = openHub(dir.path, 1 << 20, 4, 'epoch-c');
    assert.equal(c.log.epoch, 'epoch-b');
    assert.equal(c.log.report.clean, true);
    c.hub.writeState('fake.device', 'fake.after', 1);
    c.log.close();
    const { records, torn } = readLog(dir.path);
    assert.deepEqual(torn, []);
    const offsets = records.filter((r) => r.k !== 'meta' && r.k !== 'checkpoint').map((r) => r.o);
    for (let i = 1; i < offsets.length; i++) assert.ok(offsets[i]! > offsets[i - 1]!, 'offsets increase');
  } finally {
    dir.remove();
  }
});

test('rotation: at most maxFiles segments, and keys last written in a deleted segment survive (checkpoints)', () => {
  const dir = tempDir('tb-log-');
  try {
    const a = openHub(dir.path, 4096, 3);
    // Live keys written once, in what becomes the oldest (later deleted) segment.
    for (let i = 0; i < 5; i++) a.hub.writeState('fake.device', `fake.early.k${i}`, { i });
    for (let i = 1; i <= 400; i++) a.hub.writeState('fake.device', 'fake.busy', 'x'.repeat(40) + String(i));
    a.log.close();
    const segs = listSegments(dir.path);
    assert.equal(segs.length, 3);
    assert.ok(segs[0]!.index > 1, 'the first segments were deleted');
    const { records } = readLog(dir.path);
    assert.equal(
      records.filter((r) => r.k === 'state' && (r.m as { path: string }).path.startsWith('fake.early'))
        .length,
      0,
      'no record of the early keys is left in the kept segments',
    );
    const b = openHub(dir.path, 4096, 3, 'other');
    assert.equal(b.log.epoch, 'epoch-a', 'clean restart');
    for (let i = 0; i < 5; i++) assert.deepEqual(valueOf(b.hub, `fake.early.k${i}`), { i });
    assert.equal(valueOf(b.hub, 'fake.busy'), 'x'.repeat(40) + '400');
    b.log.close();
  } finally {
    dir.remove();
  }
});

test('one flipped byte in the oldest of several segments: keys from intact segments survive, damage reported', () => {
  const dir = tempDir('tb-log-');
  try {
    const a = openHub(dir.path, 2048, 20);
    for (let i = 1; i <= 150; i++) a.hub.writeState('fake.device', `fake.k${i % 7}`, i);
    a.hub.writeState('fake.device', 'fake.last', 'kept');
    a.log.close();
    const segs = listSegments(dir.path);
    assert.ok(segs.length >= 5, `several segments (${segs.length})`);
    const oldest = join(dir.path, segs[0]!.name);
    const bytes = readFileSync(oldest);
    const original = Buffer.from(bytes);
    bytes[Math.floor(bytes.length / 2)] = bytes[Math.floor(bytes.length / 2)]! ^ 0x01;
    writeFileSync(oldest, bytes);
    const b = openHub(dir.path, 2048, 20, 'epoch-b');
    assert.equal(b.log.epoch, 'epoch-b');
    assert.equal(b.log.report.damage?.file, segs[0]!.name);
    assert.equal(b.log.report.damage?.reason, 'crc-mismatch');
    assert.ok(b.log.report.lostBytes > 0);
    const lost = b.log.report.lost[0]!;
    assert.ok(
      lost.nextOffset! > lost.afterOffset + 1,
      `offsets ${lost.afterOffset + 1}..${lost.nextOffset! - 1} reported lost`,
    );
    const q = readFileSync(join(dir.path, b.log.report.quarantined[0]!));
    assert.equal(q.length, original.length, 'quarantine copy is not truncated');
    for (let k = 0; k < 7; k++) {
      const expected = 150 - ((150 - k) % 7 === 0 ? 0 : (150 - k) % 7);
      assert.equal(valueOf(b.hub, `fake.k${k}`), expected, `fake.k${k}`);
    }
    assert.equal(valueOf(b.hub, 'fake.last'), 'kept');
    b.log.close();
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

test('group commit: acks wait for one shared fdatasync; an idle writer is synced by the interval timer', async () => {
  const dir = tempDir('tb-log-');
  try {
    const log = new EventLog({
      dir: dir.path,
      maxFileBytes: 1 << 20,
      maxFiles: 4,
      newEpoch: () => 'e',
      now: () => Date.now(),
      syncIntervalMs: 30,
    });
    log.open();
    log.start(() => []);
    const base = log.syncs;
    const done: number[] = [];
    for (let i = 1; i <= 100; i++) {
      log.append(i, i, 'state', stateJson(i, 'fake.a', i));
      log.whenDurable((err) => {
        assert.equal(err, undefined);
        done.push(log.syncs);
      });
    }
    assert.equal(done.length, 0, 'no ack before the sync');
    await waitFor(() => done.length === 100, { what: 'the group commit' });
    assert.ok(
      done.every((n) => n === base + 1),
      'one fdatasync for the hundred',
    );
    // Without anyone waiting, the interval timer syncs anyway.
    log.append(101, 101, 'state', stateJson(101, 'fake.a', 101));
    const before = log.syncs;
    await waitFor(() => log.syncs === before + 1, { what: 'the interval sync of an idle writer' });
    // Nothing written since: durable at once.
    let immediate = false;
    log.whenDurable(() => {
      immediate = true;
    });
    assert.equal(immediate, true);
    log.close();
  } finally {
    dir.remove();
  }
});

test('the sync interval counts from the oldest unsynced record: a deadline passed during a sync syncs at once', async () => {
  const dir = tempDir('tb-log-');
  let mono = 0;
  try {
    const log = new EventLog({
      dir: dir.path,
      maxFileBytes: 1 << 20,
      maxFiles: 4,
      newEpoch: () => 'e',
      now: () => Date.now(),
      // Far longer than the test may take: only the deadline rule can make the second sync happen.
      syncIntervalMs: 600_000,
      monotonicMs: () => mono,
    });
    log.open();
    log.start(() => []);
    const base = log.syncs;
    log.append(1, 1, 'state', stateJson(1, 'fake.a', 1));
    let acked = false;
    log.whenDurable(() => {
      acked = true;
    });
    // A record written while that sync is in flight, and its deadline passes before the sync ends.
    await new Promise((r) => setImmediate(r));
    log.append(2, 2, 'state', stateJson(2, 'fake.a', 2));
    mono = 600_001;
    await waitFor(() => acked, { what: 'the first sync' });
    await waitFor(() => log.syncs >= base + 2, {
      what: 'the overdue record synced without another interval',
    });
    log.close();
  } finally {
    dir.remove();
  }
});
