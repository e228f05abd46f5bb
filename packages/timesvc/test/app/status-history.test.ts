// The dashboard chart's history (src/io/web/status-history.ts): bounded in time and in points.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { historyPoint, StatusHistory } from '../../src/io/web/status-history.ts';

test('the chart history is bounded: five minutes and at most the configured points', () => {
  const h = new StatusHistory(5 * 60_000, 100);
  for (let i = 0; i < 1000; i++) {
    h.add(historyPoint(i * 1000, { offset_ns: i, jitter_ns: 1, estimated_error_ns: null, state: 'locked' }));
  }
  assert.equal(h.points(999_000).length, 100, 'count bound');
  const w = new StatusHistory(5 * 60_000, 1000);
  for (let i = 0; i < 1000; i++) {
    w.add(historyPoint(i * 1000, { offset_ns: i, jitter_ns: 1, estimated_error_ns: 5, state: 'locked' }));
  }
  const pts = w.points(999_000);
  assert.equal(pts.length, 301, 'the last five minutes only');
  assert.equal(pts[0]?.t, 699_000);
  assert.equal(w.points(2_000_000).length, 0, 'nothing older than the window is shown');
});
