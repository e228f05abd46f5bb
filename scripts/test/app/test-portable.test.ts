import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { longestFirst } from '../../test-order.ts';
import { PORTABLE } from '../../test-portable.ts';
import { collectTests, tierOf } from '../../test-tiers.ts';

const root = fileURLToPath(new URL('../../..', import.meta.url));

test('every portability-set entry names an integration-tier test file, with what it proves', () => {
  const files = new Set(collectTests(root));
  for (const [file, why] of Object.entries(PORTABLE)) {
    assert.ok(files.has(file), `${file}: no such test file (renamed? update scripts/test-portable.ts)`);
    assert.equal(tierOf(file), 'io', `${file}: the portability set is integration-tier files`);
    assert.ok(why.length > 10, `${file}: say what it proves on another runtime`);
  }
});

test('files start longest first by the table; unknown files after, in name order; leading patterns first', () => {
  const durations = { 'b.test.ts': 5, 'c.test.ts': 90, 'a.test.ts': 5, 'd.test.ts': 0.5 };
  assert.deepEqual(
    longestFirst(['x.test.ts', 'a.test.ts', 'b.test.ts', 'c.test.ts', 'd.test.ts', 'e.test.ts'], durations),
    ['c.test.ts', 'a.test.ts', 'b.test.ts', 'd.test.ts', 'e.test.ts', 'x.test.ts'],
  );
  assert.deepEqual(longestFirst(['c.test.ts', 'slow-accuracy.test.ts'], durations, [/accuracy/]), [
    'slow-accuracy.test.ts',
    'c.test.ts',
  ]);
});
