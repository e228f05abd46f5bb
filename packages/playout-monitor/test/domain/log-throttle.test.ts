import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LogThrottle } from '../../src/domain/log-throttle.ts';

test('the first occurrence is logged at once, then one line per interval with the count it stands for', () => {
  const t = new LogThrottle(1000);
  assert.equal(t.note(0), 1);
  for (let ms = 10; ms < 1000; ms += 10) assert.equal(t.note(ms), undefined);
  assert.equal(t.pending, 99);
  assert.equal(t.note(1000), 100, '99 held back plus this one');
  assert.equal(t.note(1500), undefined);
  assert.equal(t.note(5000), 2, 'a quiet spell: the next one is logged at once');
  assert.equal(t.pending, 0);
});
