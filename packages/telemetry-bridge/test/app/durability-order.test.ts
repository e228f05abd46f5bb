/**
 * The order of the event log's file-system calls, which is what decides what a power cut can leave behind.
 * A power cut keeps only what was fsynced (a file's contents by fsync of the file, a name created or removed
 * by fsync of its directory), so a file may only be given up once what replaces it is durable:
 * - recovery cuts a damaged segment only after its quarantine copy's contents and name are on disk
 *   (otherwise the cut can survive and the evidence not);
 * - rotation deletes an old segment only after the new segment's checkpoint and name are on disk
 *   (otherwise the deletion can survive and the live keys of the checkpoint not). The checkpoint is synced
 *   by the next group commit; here `flush()` stands in for it (the same sync-then-prune step).
 * The calls are recorded by wrapping node:fs (`syncBuiltinESMExports` carries the wrappers to the named
 * imports of the modules under test).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join, resolve } from 'node:path';
import { tempDir } from '@broadcast-ops/core/testing';
import { EventLog, listSegments } from '../../src/io/event-log.ts';

type Op = { op: 'create' | 'sync' | 'truncate' | 'unlink' | 'copy'; path: string };

/** Run `fn` while recording syncs, truncations, removals and copies by path. */
function recordFs(fn: () => void): Op[] {
  const ops: Op[] = [];
  const paths = new Map<number, string>();
  const orig = {
    openSync: fs.openSync,
    fsyncSync: fs.fsyncSync,
    fdatasyncSync: fs.fdatasyncSync,
    ftruncateSync: fs.ftruncateSync,
    unlinkSync: fs.unlinkSync,
    copyFileSync: fs.copyFileSync,
  };
  const w = fs as unknown as Record<string, unknown>;
  w['openSync'] = (p: fs.PathLike, ...rest: unknown[]): number => {
    const fd = (orig.openSync as (...a: unknown[]) => number)(p, ...rest);
    paths.set(fd, resolve(String(p)));
    if (rest[0] === 'w+') ops.push({ op: 'create', path: resolve(String(p)) });
    return fd;
  };
  const onFd =
    (op: Op['op'], f: (...a: never[]) => unknown) =>
    (fd: number, ...rest: unknown[]): unknown => {
      ops.push({ op, path: paths.get(fd) ?? `fd ${fd}` });
      return (f as (...a: unknown[]) => unknown)(fd, ...rest);
    };
  w['fsyncSync'] = onFd('sync', orig.fsyncSync);
  w['fdatasyncSync'] = onFd('sync', orig.fdatasyncSync);
  w['ftruncateSync'] = onFd('truncate', orig.ftruncateSync);
  w['unlinkSync'] = (p: fs.PathLike): void => {
    ops.push({ op: 'unlink', path: resolve(String(p)) });
    orig.unlinkSync(p);
  };
  w['copyFileSync'] = (src: fs.PathLike, dst: fs.PathLike, mode?: number): void => {
    ops.push({ op: 'copy', path: resolve(String(dst)) });
    orig.copyFileSync(src, dst, mode);
  };
  syncBuiltinESMExports();
  try {
    fn();
  } finally {
    Object.assign(w, orig);
    syncBuiltinESMExports();
  }
  return ops;
}

function at(ops: Op[], op: Op['op'], path: string, from = 0): number {
  return ops.findIndex((o, i) => i >= from && o.op === op && o.path === path);
}

function stateJson(offset: number): string {
  return JSON.stringify({ type: 'state', path: `fake.k${offset % 5}`, payload: { value: offset }, offset });
}

function newLog(dir: string, epoch: string): EventLog {
  return new EventLog({ dir, maxFileBytes: 2048, maxFiles: 3, newEpoch: () => epoch, now: () => 1 });
}

test('recovery cuts a damaged segment only after its quarantine copy and its name are fsynced', () => {
  const dir = tempDir('tb-order-');
  try {
    const a = newLog(dir.path, 'a');
    a.open();
    a.start(() => []);
    for (let o = 1; o <= 60; o++) a.append(o, o, 'state', stateJson(o));
    a.close();
    const oldest = resolve(join(dir.path, listSegments(dir.path)[0]!.name));
    const bytes = fs.readFileSync(oldest);
    bytes[bytes.length >> 1]! ^= 0x01;
    fs.writeFileSync(oldest, bytes);

    const b = newLog(dir.path, 'b');
    const ops = recordFs(() => b.open());
    assert.equal(b.report.quarantined.length, 1);
    const copy = resolve(join(dir.path, b.report.quarantined[0]!));
    const copied = at(ops, 'copy', copy);
    const cut = at(ops, 'truncate', oldest);
    assert.ok(copied >= 0 && cut > copied, 'copied, then cut');
    const copySynced = at(ops, 'sync', copy, copied);
    assert.ok(copySynced >= 0 && copySynced < cut, "the copy's contents are fsynced before the cut");
    const dirSynced = at(ops, 'sync', resolve(dir.path), copySynced);
    assert.ok(dirSynced >= 0 && dirSynced < cut, "the copy's name is fsynced before the cut");
    assert.equal(fs.readFileSync(copy).length, bytes.length, 'the copy is whole');
    b.start(() => []);
    b.close();
  } finally {
    dir.remove();
  }
});

test('rotation deletes an old segment only after the new segment and its name are fsynced', () => {
  const dir = tempDir('tb-order-');
  try {
    const log = newLog(dir.path, 'a');
    log.open();
    log.start(() => ['{"path":"fake.live","value":1,"owner":"fake.device"}']);
    let o = 0;
    // Fill the first segments without recording, then record the rotation that deletes the oldest.
    while (listSegments(dir.path).length < 3) log.append(++o, o, 'state', stateJson(o));
    const oldest = resolve(join(dir.path, listSegments(dir.path)[0]!.name));
    const ops = recordFs(() => {
      for (let n = 0; n < 1000 && fs.existsSync(oldest); n++) {
        log.append(++o, o, 'state', stateJson(o));
        // No segment is removed before the newest checkpoint is synced: right after the append, none is.
        if (!fs.existsSync(oldest)) throw new Error('removed before any sync');
        log.flush();
      }
    });
    const newest = resolve(join(dir.path, listSegments(dir.path).at(-1)!.name));
    const removed = at(ops, 'unlink', oldest);
    assert.ok(removed >= 0, 'the oldest segment was deleted by rotation');
    const created = at(ops, 'create', newest);
    assert.ok(created >= 0 && created < removed, 'the new segment was created first');
    const synced = at(ops, 'sync', newest, created);
    assert.ok(synced >= 0 && synced < removed, "the new segment's checkpoint is fsynced first");
    const dirSynced = at(ops, 'sync', resolve(dir.path), created);
    assert.ok(dirSynced >= 0 && dirSynced < removed, "the new segment's name is fsynced first");
    log.close();
  } finally {
    dir.remove();
  }
});
