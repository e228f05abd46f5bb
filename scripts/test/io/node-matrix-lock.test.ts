/** The matrix's tree lock (scripts/node-matrix.ts) against a real process that has ended. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '@broadcast-ops/core/testing';
import { lock } from '../../node-matrix.ts';

test('a tree lock left by a process that has ended is taken over; release frees it', () => {
  const dir = tempDir();
  try {
    const path = join(dir.path, 'v24.lock');
    const ended = spawnSync('true');
    assert.ok(ended.pid);
    mkdirSync(path);
    writeFileSync(join(path, 'pid'), String(ended.pid));
    const release = lock(path);
    assert.equal(readFileSync(join(path, 'pid'), 'utf8'), String(process.pid));
    release();
    assert.ok(!existsSync(path));
  } finally {
    dir.remove();
  }
});
