/**
 * Tests are chosen by folder (scripts/test-tiers.ts, docs/ARCHITECTURE.md "Tests mirror the layers"): this
 * fails when a *.test.ts sits outside a tier folder, and when a quick-tier file (protocol/, domain/, app/) or
 * a test helper it imports uses a socket, a process, a browser or a system tool (NOT_QUICK): such a test
 * belongs in io/ or interop/, or its socket-free part in a quick file of its own; and when a quick-tier file
 * calls a hook at its top level (TOP_LEVEL_HOOK: the quick tier shares a process between files).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import {
  NOT_QUICK,
  TOP_LEVEL_HOOK,
  codeOf,
  collectTests,
  isQuick,
  sourcesOf,
  tierOf,
} from '../../test-tiers.ts';

const files = collectTests(repoRoot);

test('every test file sits in a tier folder', () => {
  assert.ok(files.length > 100, `only ${files.length} test files found`);
  const outside = files.filter((f) => tierOf(f) === undefined);
  assert.deepEqual(outside, [], 'move them to test/<protocol|domain|app|io|interop>/');
});

test('quick-tier files and their test helpers open no socket, start no process, browser or tool', () => {
  const offenders = files
    .filter(isQuick)
    .map((f) => ({ f, m: NOT_QUICK.exec(codeOf(sourcesOf(repoRoot, f)))?.[0] }))
    .filter((o) => o.m !== undefined)
    .map((o) => `${o.f}: ${o.m}`);
  assert.deepEqual(offenders, []);
});

test('quick-tier files keep their hooks in a describe: none at the top level of a shared process', () => {
  const offenders = files
    .filter(isQuick)
    .filter((f) => TOP_LEVEL_HOOK.test(codeOf(readFileSync(join(repoRoot, f), 'utf8'))));
  assert.deepEqual(offenders, []);
  assert.match(codeOf("import { after } from 'node:test';\nafter(() => close());\n"), TOP_LEVEL_HOOK);
  assert.doesNotMatch(codeOf("describe('x', () => {\n  after(() => close());\n});\n"), TOP_LEVEL_HOOK);
  assert.doesNotMatch(codeOf("test('x', (t) => {\n  t.after(() => close());\n});\n"), TOP_LEVEL_HOOK);
  assert.doesNotMatch(codeOf('// after(() => close()) in a comment\n'), TOP_LEVEL_HOOK);
});

test('the tier is read from the folder', () => {
  assert.equal(tierOf('packages/punch/test/domain/x.test.ts'), 'domain');
  assert.equal(tierOf('scripts/test/interop/x.test.ts'), 'interop');
  assert.equal(tierOf('packages/punch/test/x.test.ts'), undefined);
  assert.equal(tierOf('packages/punch/test/outputs/x.test.ts'), undefined);
  assert.equal(isQuick('packages/timesvc/test/app/x.test.ts'), true);
  assert.equal(isQuick('packages/timesvc/test/io/x.test.ts'), false);
});

test('a socket call quoted as data or named in a comment is not code', () => {
  assert.equal(codeOf(`const s = "import { createServer } from 'node:net'"; // x.listen(`), 'const s = ""; ');
  assert.equal(codeOf("a('b\\'c').listen(0) /* spawn( */"), "a('').listen(0) ");
  assert.match(codeOf('await requireTool(`tshark`);'), NOT_QUICK);
});
