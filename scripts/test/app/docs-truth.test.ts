/**
 * Docs that match the code:
 * - no document, config comment or CLI help calls something future work by pointing at an issue ("next issue",
 *   "later issues", "NTS later", "and later NTS/PTP"): what is built is described, what is not is named as a
 *   known limit in the service's README;
 * - no source file cites a document outside the repository (a numbered spec, its parts, the shared spec and
 *   reference folders, paths of the machine the code was written on): comments point to the repository's own
 *   docs, which carry the facts.
 */
import assert from 'node:assert/strict';
import { relative } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';

import { FUTURE, OUTSIDE, offenders, walk } from '../docs-patterns.ts';

test('no doc or config comment calls a feature future work by pointing at an issue', () => {
  const docs = walk(repoRoot, (f) => /\.(md|ya?ml)$/.test(f) || /\.demo\.json$/.test(f));
  assert.ok(docs.some((f) => f.endsWith('README.md')));
  assert.deepEqual(offenders(docs, FUTURE), []);
});

test('no source file cites a document outside the repository', () => {
  const sources = walk(repoRoot, (f) => /\.(ts|mjs|js|c|h|sh|css|html)$/.test(f)).filter(
    (f) =>
      !['scripts/test/app/docs-truth.test.ts', 'scripts/test/docs-patterns.ts'].includes(
        relative(repoRoot, f),
      ),
  );
  assert.ok(sources.length > 100);
  assert.deepEqual(offenders(sources, OUTSIDE), []);
});

test('the patterns catch what they are meant to catch (and leave ordinary prose alone)', () => {
  for (const line of [
    'WebSocket signalling (next issue)',
    'NTS, PTP, GPSDO in later issues',
    'with a clock manager (GPSDO, NTS, PTP later)',
    'an NTPv4 (and later NTS/PTP) time server',
    'HTTP health now; WebSocket and the pages in the outputs issue',
  ])
    assert.ok(
      FUTURE.some((p) => p.test(line)),
      line,
    );
  for (const line of ['a later restart reads the file', 'the next packet', 'retry later'])
    assert.ok(!FUTURE.some((p) => p.test(line)), line);
  // Built from word pieces, so that no line of this file reads as the citation the check forbids.
  const notes = ['..', 'sha' + 'red', 'refer' + 'ence'].join('/');
  const file = ['time', 'service'].join('-') + '.md';
  for (const line of [
    [' * Configuration (sp', 'ec 2 Pa', 'rt B "Configuration file")'].join(''),
    `// see ${notes}/${file}`,
    `// facts from 3-${file}`,
  ])
    assert.ok(
      OUTSIDE.some((p) => p.test(line)),
      line,
    );
  assert.ok(!OUTSIDE.some((p) => p.test('// RFC 5905 §7.3; README "NTP server"')));
});
