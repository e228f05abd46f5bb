import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@broadcast-ops/core/testing';
import { readFileTimes } from '../../file-times.ts';

const fixtures = fileURLToPath(new URL('../fixtures/tap/', import.meta.url));
const reporter = fileURLToPath(new URL('../../file-times-reporter.mjs', import.meta.url));

test(`time per file from this Node's (${process.versions.node}) test runner: summed, longest first, relative`, () => {
  const tmp = tempDir();
  try {
    const out = join(tmp.path, 'times.jsonl');
    // As scripts/run-tests.ts asks for it; without NODE_TEST_CONTEXT, which would report to this runner.
    spawnSync(
      process.execPath,
      [
        '--test',
        `--test-reporter=${reporter}`,
        `--test-reporter-destination=${out}`,
        join(fixtures, 'sample.mjs'),
        join(fixtures, 'slow.mjs'),
      ],
      {
        cwd: fixtures,
        stdio: 'ignore',
        env: { ...process.env, NODE_TEST_CONTEXT: undefined, NODE_OPTIONS: '' },
      },
    );
    const times = readFileTimes(readFileSync(out, 'utf8'), fixtures);
    assert.deepEqual(
      times.map((t) => t.file),
      ['slow.mjs', 'sample.mjs'],
    );
    // Two sleeps of 200 and 100 ms: at least their sum whatever the load; the failing file is counted too.
    assert.ok((times[0]?.seconds ?? 0) >= 0.29, JSON.stringify(times));
    assert.ok((times[1]?.seconds ?? 0) > 0, JSON.stringify(times));
  } finally {
    tmp.remove();
  }
});
