/**
 * A disk that fills and is freed again (README "Durability"): on a small tmpfs mounted for this test, the
 * event log refuses acks once a write fails, never acknowledges the record it could not write, and once
 * space is back it reopens in a new segment with a full checkpoint and acknowledges again. The run that
 * failed leaves no clean-shutdown marker, so the next start opens a new epoch, and the state written after
 * the recovery survives the restart. Needs root (mount); the mount is removed in every case.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock, tempDir } from '@broadcast-ops/core/testing';
import { Hub } from '../../src/domain/hub.ts';
import { CLEAN_MARKER, EventLog } from '../../src/io/event-log.ts';

function openHub(dir: string, mono: () => number): { log: EventLog; hub: Hub } {
  const log = new EventLog({
    dir,
    maxFileBytes: 64 * 1024,
    maxFiles: 4,
    newEpoch: () => `epoch-${Math.random()}`,
    now: () => 1_700_000_000_000,
    syncIntervalMs: 20,
    monotonicMs: mono,
  });
  log.open();
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

const durable = (log: EventLog): Promise<Error | undefined> =>
  new Promise((resolve) => log.whenDurable((err) => resolve(err)));

/** Fill the file system with one file until it refuses more (bounded by the mount size). */
function fill(path: string): void {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(4096, 1);
  try {
    for (let i = 0; i < 1024; i++) writeSync(fd, chunk);
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
  } finally {
    closeSync(fd);
  }
}

test('disk full, then freed: acks refused while writes fail, then the log reopens and acks again', async () => {
  const dir = tempDir('tb-full-');
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir.path]);
  let mono = 0;
  try {
    const a = openHub(dir.path, () => mono);
    a.hub.writeState('fake.device', 'fake.before', 1);
    assert.equal(await durable(a.log), undefined);

    fill(join(dir.path, 'filler'));
    const pad = 'x'.repeat(2000);
    let i = 0;
    for (; i < 1000 && a.log.lastError === undefined; i++)
      a.hub.writeState('fake.device', 'fake.k', `${i}${pad}`);
    assert.ok(a.log.lastError, 'a write failed on the full disk');
    assert.ok(await durable(a.log), 'no ack for what could not be written');
    // Still full: later writes are refused too, never acknowledged.
    mono += 5000;
    a.hub.writeState('fake.device', 'fake.k', `still full${pad}`);
    assert.ok(await durable(a.log));
    assert.equal(a.log.healthy, false);

    // Space comes back: the next write reopens the log in a new segment (after the retry delay).
    unlinkSync(join(dir.path, 'filler'));
    mono += 5000;
    a.hub.writeState('fake.device', 'fake.after', 'recovered');
    assert.equal(a.log.lastError, undefined);
    assert.equal(await durable(a.log), undefined, 'acks again once writes succeed');
    assert.equal(a.log.healthy, true);
    a.hub.writeState('fake.device', 'fake.after2', 'also');
    assert.equal(await durable(a.log), undefined);
    a.log.close();
    assert.equal(existsSync(join(dir.path, CLEAN_MARKER)), false, 'a run with a hole is never a clean stop');

    const b = openHub(dir.path, () => mono);
    assert.equal(b.log.report.newEpoch, true, 'offsets before the hole are never replayed across it');
    assert.equal(b.hub.store.get('fake.before')?.value, 1);
    assert.equal(b.hub.store.get('fake.after')?.value, 'recovered');
    assert.equal(b.hub.store.get('fake.after2')?.value, 'also');
    assert.equal(
      b.hub.store.get('fake.k')?.value,
      `still full${pad}`,
      'the checkpoint carried the last value',
    );
    b.log.close();
  } finally {
    execFileSync('umount', [dir.path]);
    dir.remove();
  }
});
