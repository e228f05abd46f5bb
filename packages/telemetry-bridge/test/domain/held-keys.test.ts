/**
 * No key left held (docs/companion.md "No key left held"): the HeldKeys bookkeeping (hold, confirmed
 * release, release by the bridge, restore, bounds). Against the Companion simulator, in process and across a
 * SIGKILL: test/io/companion-held-keys.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HeldKeys } from '../../src/domain/companion/held-keys.ts';

test('HeldKeys: hold, confirmed release, release by the bridge, restore, bounds', () => {
  const h = new HeldKeys();
  const host = { host: '10.0.0.1', port: 16623 };
  const base = { ...host, deviceId: 'd', since: 1, correlationId: 'c' };
  assert.equal(h.hold({ kind: 'key', keyIndex: 3, ...base }), true);
  assert.equal(h.on(host).length, 1);
  assert.equal(h.on({ host: '10.0.0.2', port: 16623 }).length, 0, 'only on the Companion that got it');
  assert.equal(h.release(host, { kind: 'key', keyIndex: 3 }), true);
  assert.equal(h.size, 0);
  h.hold({ kind: 'sub', page: 1, row: 0, column: 2, ...base });
  const copy = new HeldKeys();
  assert.equal(copy.restore(JSON.parse(JSON.stringify(h.value()))), 1);
  assert.equal(copy.restore([{ kind: 'key' }, 'x', null]), 0, 'invalid entries skipped');
  const [only] = copy.on(host);
  assert.ok(only);
  copy.releasedByBridge(only);
  assert.equal(copy.size, 0);
  assert.equal(copy.takeReleased(host, { kind: 'sub', page: 1, row: 0, column: 2 }), true);
  assert.equal(copy.takeReleased(host, { kind: 'sub', page: 1, row: 0, column: 2 }), false, 'once');
});
