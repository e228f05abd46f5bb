/**
 * The signalling codec's nesting bound (README "WebSocket signalling"): a message nested deeper than 16 is
 * INVALID_MESSAGE, found before anything recurses; brackets inside strings do not count. The upgrade's
 * Punch-Version header over a real socket: test/io/ws-bounds.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseClientMessage } from '../../src/protocol/ws-messages.ts';

test('a message nested 7000 deep is INVALID_MESSAGE, checked before anything recurses', () => {
  const deep = `{"type":"register","port":9000,"meta":{"x":${'['.repeat(7000)}${']'.repeat(7000)}}}`;
  const r = parseClientMessage(deep);
  assert.equal(r.ok, false);
  assert.match(!r.ok ? r.error.message : '', /nested deeper than 16/);
  // Brackets inside strings do not count.
  const r2 = parseClientMessage(`{"type":"register","port":9000,"meta":{"label":"${'['.repeat(40)}"}}`);
  assert.equal(r2.ok, true);
});
