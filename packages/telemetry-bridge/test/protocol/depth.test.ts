/**
 * Nesting limit on client frames (docs/protocol.md "Errors"): a frame nested deeper than MAX_JSON_DEPTH is
 * INVALID_MESSAGE, refused before JSON.parse and the schema (5,000 levels used to exhaust the stack in
 * validation and came back as INTERNAL_ERROR). The depth scan agrees with the real nesting on random JSON.
 * The same frame over a real socket: test/io/depth.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { MAX_JSON_DEPTH, jsonDepth, parseClientFrame } from '../../src/protocol/envelope.ts';
import { deepState } from '../frames.ts';

test('a state frame nested 5,000 deep is INVALID_MESSAGE with the limit; at the limit it parses', () => {
  const r = parseClientFrame(deepState(5000));
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.error.code, 'INVALID_MESSAGE');
  assert.match(!r.ok ? r.error.message : '', new RegExp(`deeper than ${MAX_JSON_DEPTH}`));
  // Envelope (1) + payload (2) + value levels.
  assert.equal(parseClientFrame(deepState(MAX_JSON_DEPTH - 2)).ok, true);
  assert.equal(parseClientFrame(deepState(MAX_JSON_DEPTH - 1)).ok, false);
});

test('jsonDepth equals the nesting of any JSON value (strings with brackets and escapes included)', () => {
  const depthOf = (v: unknown): number =>
    v !== null && typeof v === 'object'
      ? 1 + Math.max(0, ...Object.values(v as Record<string, unknown>).map(depthOf))
      : 0;
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 8 }), (v) => {
      assert.equal(jsonDepth(JSON.stringify(v)), depthOf(v));
    }),
    { numRuns: 300, interruptAfterTimeLimit: 10_000 },
  );
});
