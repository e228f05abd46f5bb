import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@broadcast-ops/core/testing';
import { readTapSummary } from '../../tap-summary.ts';

const fixtures = fileURLToPath(new URL('../fixtures/tap/', import.meta.url));

/** TAP written by this very Node's test runner, as scripts/run-tests.ts asks for it. */
function tapOf(files: string[]): string {
  const tmp = tempDir();
  try {
    const out = join(tmp.path, 'out.tap');
    spawnSync(
      process.execPath,
      [
        '--test',
        '--test-reporter=tap',
        `--test-reporter-destination=${out}`,
        ...files.map((f) => join(fixtures, f)),
      ],
      // Without NODE_TEST_CONTEXT, which would make it report to this runner instead of to its reporters.
      {
        cwd: fixtures,
        stdio: 'ignore',
        env: { ...process.env, NODE_TEST_CONTEXT: undefined, NODE_OPTIONS: '' },
      },
    );
    return readFileSync(out, 'utf8');
  } finally {
    tmp.remove();
  }
}

test(`totals and failed tests read back from the TAP of Node ${process.versions.node}`, () => {
  const s = readTapSummary(tapOf(['sample.mjs', 'crash.mjs']), fixtures);
  assert.ok(s);
  // node:test counts: pass = child passes, top passes; fail = parent, child fails, aborts; skip and todo apart.
  assert.equal(s.passed, 2);
  assert.equal(s.failed, 3);
  assert.equal(s.skipped, 1);
  assert.equal(s.todo, 1);
  // The parent failed only through its child and the todo does not count: two failures are named.
  assert.equal(s.failures.length, 2, s.failures.join('\n'));
  assert.ok(
    // With the first lines of its error, so that the summary alone says why.
    s.failures.some((f) =>
      /^child fails \(sample\.mjs:\d+:\d+\)\n {6}Expected values to be strictly equal: \/ 1 !== 2$/.test(f),
    ),
    s.failures.join('\n'),
  );
  assert.ok(
    s.failures.some((f) => /crash\.mjs:1:1\) killed by SIGABRT(\n|$)/.test(f)),
    s.failures.join('\n'),
  );
});

test('a TAP stream cut before its totals gives no summary, so the matrix reports the run as failed', () => {
  const full = tapOf(['sample.mjs']);
  assert.ok(readTapSummary(full));
  assert.equal(readTapSummary(full.slice(0, full.indexOf('# tests'))), null);
  assert.equal(readTapSummary(''), null);
});
