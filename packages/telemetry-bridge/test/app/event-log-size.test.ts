/**
 * Segment size (README "Durability", eventLog.maxFileSize): a segment's size counts its header and
 * checkpoint, and the log rotates before a record that would take it past the limit, so no closed segment
 * is larger than maxFileSize by more than one record. Measured with a checkpoint of about a fifth of the
 * limit (it was left out of the count, which let segments run about that much over).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@broadcast-ops/core/testing';
import { EventLog, listSegments } from '../../src/io/event-log.ts';

test('no segment above maxFileSize by more than one record, checkpoint included', () => {
  const dir = tempDir('tb-seg-');
  try {
    const max = 64 * 1024;
    const checkpoint = Array.from({ length: 60 }, (_, i) =>
      JSON.stringify({ path: `app.x.custom.k${i}`, value: 'v'.repeat(200), owner: 'app.x', version: 1 }),
    );
    const log = new EventLog({
      dir: dir.path,
      maxFileBytes: max,
      maxFiles: 100,
      newEpoch: () => 'e',
      now: () => 1,
    });
    log.open();
    log.start(() => checkpoint);
    let largest = 0;
    for (let o = 1; o <= 3000; o++) {
      const json = JSON.stringify({
        id: `m${o}`,
        type: 'event',
        path: 'a.b',
        payload: { pad: 'x'.repeat(o % 300) },
      });
      largest = Math.max(largest, Buffer.byteLength(json) + 64);
      log.append(o, 1, 'event', json);
    }
    log.flush();
    log.close();
    const segs = listSegments(dir.path);
    assert.ok(segs.length >= 4, `${segs.length} segments`);
    for (const s of segs.slice(0, -1)) {
      const size = statSync(join(dir.path, s.name)).size;
      assert.ok(size <= max + largest, `${s.name}: ${size} bytes > ${max} + one record (${largest})`);
      assert.ok(size >= max - largest, `${s.name}: ${size} bytes, rotated too early`);
    }
  } finally {
    dir.remove();
  }
});
