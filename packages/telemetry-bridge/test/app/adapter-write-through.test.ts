/**
 * An adapter's state change is on file when `setState` returns (domain/adapter.ts): the Companion adapter
 * records a key it is about to press (`companion.held`) and then sends the press, and a crash right after
 * the press must still find that record (docs/companion.md "No key left held"). The event log otherwise writes a
 * job's records together when the job ends (io/event-log.ts), which is too late for a line sent to a device
 * in the same job.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock, tempDir } from '@broadcast-ops/core/testing';
import { Hub } from '../../src/domain/hub.ts';
import { CommandTap } from '../../src/io/command-tap.ts';
import { EventLog, listSegments } from '../../src/io/event-log.ts';
import { FakeAdapter } from '../quick-fixtures.ts';

function fileText(dir: string): string {
  return listSegments(dir)
    .map((s) => readFileSync(join(dir, s.name), 'latin1'))
    .join('');
}

test("an adapter's state write is in the event log file before setState returns, without waiting for the job", () => {
  const dir = tempDir('tb-write-through-');
  const log = new EventLog({
    dir: dir.path,
    maxFileBytes: 1 << 20,
    maxFiles: 3,
    newEpoch: () => 'e',
    now: () => 1,
  });
  try {
    log.open();
    const clock = new ManualClock();
    // Wrapped as app.ts wraps it (the console's command tap).
    const hub = new Hub({ clock, logger: silentLogger(), log: new CommandTap(log) });
    log.start(() => hub.store.checkpoint());
    const adapter = new FakeAdapter();
    hub.registerAdapter(adapter);
    void hub.startAdapters();
    log.writePending();
    assert.doesNotMatch(fileText(dir.path), /fake\.held/);

    adapter.set('fake.held', [{ keyIndex: 5, marker: 'about-to-press' }]);
    // Same job: nothing has yielded to the event loop, so only a write-through puts it in the file now.
    assert.match(
      fileText(dir.path),
      /about-to-press/,
      'the record is in the file before the line would go out',
    );

    // Its release, too: a restart must not release a key twice.
    adapter.set('fake.held', []);
    const text = fileText(dir.path);
    assert.ok(
      text.lastIndexOf('"fake.held"') > text.indexOf('about-to-press'),
      'the clearing record follows',
    );
  } finally {
    log.close();
    dir.remove();
  }
});
