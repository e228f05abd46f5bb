/**
 * No import cycles (docs/ARCHITECTURE.md "No import cycles"): the import graph of every TypeScript file the
 * type check covers (packages' src/ and test/, scripts/, bench/, examples/), type-only imports included, has
 * no cycle. A failure lists each cycle as a chain `a.ts → b.ts → a.ts`. The graph is built by
 * scripts/import-graph.ts with TypeScript's own scanner and module resolution; the first tests prove that it
 * sees each kind of import and finds a cycle where there is one. Pure: reads files, no process, no socket.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import {
  describeCycles,
  importGraph,
  specifiersOf,
  stronglyConnected,
  tsFilesUnder,
  type ImportGraph,
} from '../../import-graph.ts';

const FIXTURE = join(repoRoot, 'scripts/test/fixtures/import-cycle');

test('every kind of import is an edge: type-only, re-exports, dynamic import() and typeof import()', () => {
  const text = [
    "import { a } from './a.ts';",
    "import type { B } from './b.ts';",
    "import { type C } from './c.ts';",
    "export { d } from './d.ts';",
    "export type { E } from './e.ts';",
    "export * from './f.ts';",
    "const g = await import('./g.ts');",
    "type H = typeof import('./h.ts');",
    "import './i.ts';",
  ].join('\n');
  assert.deepEqual(
    specifiersOf(text),
    ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'].map((x) => `./${x}.ts`),
  );
});

test('strongly connected components: one per cycle, a chain alone is none', () => {
  const graph: ImportGraph = new Map([
    ['/r/a.ts', ['/r/b.ts']],
    ['/r/b.ts', ['/r/c.ts', '/r/d.ts']],
    ['/r/c.ts', ['/r/a.ts']],
    ['/r/d.ts', ['/r/e.ts']],
    ['/r/e.ts', ['/r/d.ts']],
    ['/r/f.ts', ['/r/a.ts']],
  ]);
  assert.deepEqual(stronglyConnected(graph), [
    ['/r/a.ts', '/r/b.ts', '/r/c.ts'],
    ['/r/d.ts', '/r/e.ts'],
  ]);
  assert.deepEqual(describeCycles(graph, '/r'), ['a.ts → b.ts → c.ts → a.ts', 'd.ts → e.ts → d.ts']);
  assert.deepEqual(
    stronglyConnected(
      new Map([
        ['/r/a.ts', ['/r/b.ts']],
        ['/r/b.ts', []],
      ]),
    ),
    [],
  );
});

test('the fixture pair that imports each other, type-only, is reported; the file importing it is not', () => {
  const graph = importGraph(tsFilesUnder(FIXTURE));
  assert.deepEqual(describeCycles(graph, repoRoot), [
    'scripts/test/fixtures/import-cycle/cue.ts → scripts/test/fixtures/import-cycle/rundown.ts → scripts/test/fixtures/import-cycle/cue.ts',
  ]);
});

test('workspace packages resolve to their src/ through exports (the source condition)', () => {
  const graph = importGraph([
    join(repoRoot, 'scripts/test/app/port-plan.test.ts'),
    join(repoRoot, 'packages/core/src/index.ts'),
  ]);
  assert.deepEqual(graph.get(join(repoRoot, 'scripts/test/app/port-plan.test.ts')), [
    join(repoRoot, 'packages/core/src/index.ts'),
  ]);
});

test('the repository has no import cycle, type-only imports included', () => {
  // Vendored third-party code (telemetry-bridge's Companion copies) and the deliberate cycle above are left out.
  const skip = /^(companion-satellite.*|import-cycle)$/;
  const files = [
    ...tsFilesUnder(join(repoRoot, 'packages'), skip),
    ...tsFilesUnder(join(repoRoot, 'scripts'), skip),
    ...tsFilesUnder(join(repoRoot, 'bench'), skip),
    ...tsFilesUnder(join(repoRoot, 'examples'), skip),
  ];
  assert.ok(files.length > 500, `only ${files.length} files found`);
  const cycles = describeCycles(importGraph(files), repoRoot);
  if (cycles.length > 0) {
    assert.fail(
      `${cycles.length} import cycles (docs/ARCHITECTURE.md "No import cycles"):\n${cycles.join('\n')}`,
    );
  }
});
