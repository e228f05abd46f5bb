import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { TopicTrie, patternMatches } from '../../src/domain/topic-trie.ts';
import { PathIndex } from '../../src/domain/path-index.ts';
import { StateStore } from '../../src/domain/state-store.ts';
import { patternError } from '../../src/protocol/envelope.ts';

// Wildcard semantics (docs/protocol.md "Patterns"): `*` = exactly one segment; `**` = one or more trailing segments.
const TABLE: [pattern: string, path: string, matches: boolean][] = [
  ['a.b', 'a.b', true],
  ['a.b', 'a.b.c', false],
  ['a.b', 'a', false],
  ['a.*', 'a.b', true],
  ['a.*', 'a', false],
  ['a.*', 'a.b.c', false],
  ['a.**', 'a', false],
  ['a.**', 'a.b', true],
  ['a.**', 'a.b.c.d', true],
  ['a.**', 'b.a', false],
  ['*.b', 'a.b', true],
  ['*.b', 'x.b', true],
  ['*.b', 'a.c', false],
  ['*.b', 'b', false],
  ['*.b', 'a.b.c', false],
  ['*', 'a', true],
  ['*', 'a.b', false],
  ['**', 'a', true],
  ['**', 'a.b.c', true],
  ['a.*.c', 'a.b.c', true],
  ['a.*.c', 'a.b.d', false],
  ['a.*.**', 'a.b', false],
  ['a.*.**', 'a.b.c', true],
  ['companion.variables.**', 'companion.variables.internal.time_hms', true],
  ['app.*.custom.*', 'app.cam.custom.tally', true],
];

test('wildcard table: trie and reference matcher agree with the table', () => {
  for (const [pattern, path, expected] of TABLE) {
    assert.equal(patternMatches(pattern, path), expected, `${pattern} vs ${path}`);
    const trie = new TopicTrie<string>();
    trie.add(pattern, 'x');
    assert.equal(trie.match(path).has('x'), expected, `trie ${pattern} vs ${path}`);
  }
});

test('invalid patterns are rejected: ** only last, lower-case segments', () => {
  assert.equal(patternError('a.**'), undefined);
  assert.equal(patternError('*.b'), undefined);
  assert.match(patternError('a.**.b') ?? '', /last segment/);
  assert.match(patternError('A.b') ?? '', /segment/);
  assert.match(patternError('a..b') ?? '', /segment/);
  assert.match(patternError('a.b*') ?? '', /segment/);
});

const segment = fc.constantFrom('a', 'b', 'c', 'd');
const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => s.join('.'));
const pattern = fc
  .tuple(fc.array(fc.constantFrom('a', 'b', 'c', '*'), { minLength: 0, maxLength: 4 }), fc.boolean())
  .filter(([segs, tail]) => segs.length > 0 || tail)
  .map(([segs, tail]) => [...segs, ...(tail ? ['**'] : [])].join('.'));

test('fast-check: the trie returns exactly the subscriptions whose pattern matches, add/remove churn included', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(pattern, fc.integer({ min: 0, max: 5 })), { maxLength: 30 }),
      fc.array(fc.integer({ min: 0, max: 29 }), { maxLength: 10 }),
      fc.array(path, { minLength: 1, maxLength: 10 }),
      (subs, removals, paths) => {
        const trie = new TopicTrie<number>();
        const live = new Map<string, [string, number]>();
        for (const [p, v] of subs) {
          trie.add(p, v);
          live.set(`${p}|${v}`, [p, v]);
        }
        for (const r of removals) {
          const s = subs[r];
          if (!s) continue;
          trie.remove(s[0], s[1]);
          live.delete(`${s[0]}|${s[1]}`);
        }
        assert.equal(trie.size, live.size);
        for (const p of paths) {
          const expected = new Set(
            [...live.values()].filter(([pat]) => patternMatches(pat, p)).map(([, v]) => v),
          );
          assert.deepEqual(trie.match(p), expected);
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('fast-check: the key index finds exactly the stored keys a pattern matches (snapshots), with deletions', () => {
  fc.assert(
    fc.property(
      fc.array(path, { maxLength: 40 }),
      fc.array(fc.integer({ min: 0, max: 39 }), { maxLength: 15 }),
      fc.array(pattern, { minLength: 1, maxLength: 4 }),
      (keys, deletions, patterns) => {
        const index = new PathIndex();
        const live = new Set<string>();
        for (const k of keys) {
          index.add(k);
          live.add(k);
        }
        for (const d of deletions) {
          const k = keys[d];
          if (k === undefined) continue;
          index.remove(k);
          live.delete(k);
        }
        const found = new Set<string>();
        for (const p of patterns) index.match(p, found);
        const expected = new Set([...live].filter((k) => patterns.some((p) => patternMatches(p, k))));
        assert.deepEqual(found, expected);
      },
    ),
    { numRuns: 500 },
  );
});

test('snapshot matching does not scan: 100 patterns over 50,000 keys', () => {
  const store = new StateStore();
  store.claim('dev', 'dev');
  for (let k = 0; k < 50_000; k++) {
    store.apply(`dev.g${k % 500}.k${k}`, 'dev', k, String(k), k + 1, 0);
  }
  const patterns = Array.from({ length: 100 }, (_, i) => `dev.g${i}.*`);
  const found = store.matching(patterns);
  // Structural, not timed: exactly the 100 groups' keys, 100 each.
  assert.equal(found.length, 100 * 100);
  assert.ok(found.every((p) => Number(p.split('.')[1]!.slice(1)) < 100));
});
