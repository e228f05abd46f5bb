import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

/**
 * Every `docs/<file>.md` that a source comment or the README points to exists, in this package or in the
 * repository's docs/ (docs/ARCHITECTURE.md, docs/at-rest.md).
 */
const root = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.(ts|js|mjs)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

test('docs/*.md cited in src/ and README.md exist', () => {
  const cited = new Set<string>();
  for (const file of [...sources(join(root, 'src')), join(root, 'README.md')]) {
    for (const m of readFileSync(file, 'utf8').matchAll(/\bdocs\/([\w.-]+\.md)/g)) cited.add(m[1] ?? '');
  }
  assert.ok(cited.has('agent.md'), 'the agent points to docs/agent.md');
  const missing = [...cited].filter(
    (f) => !existsSync(join(root, 'docs', f)) && !existsSync(join(root, '../../docs', f)),
  );
  assert.deepEqual(missing, []);
});
