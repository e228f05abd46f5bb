/**
 * One outage of the Companion link is one event (src/domain/companion/link-history.ts): every failed
 * attempt inside it only counts, the registration closes it as `failover` (another host) or `reconnected`
 * (the same host) with the first reason and the time without Companion; the list is bounded and survives a
 * restart through the value the event log restored.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LINK_EVENTS_KEPT, LinkHistory, type LinkHost } from '../../src/domain/companion/link-history.ts';

const P: LinkHost = { host: '10.0.0.1', port: 16623, role: 'primary' };
const B: LinkHost = { host: '10.0.0.2', port: 16623, role: 'backup' };

test('a failover with several failed attempts is one event with the first reason', () => {
  const h = new LinkHistory();
  assert.equal(h.registered(P, 1000), undefined, 'a first start is not an outage');
  h.lost(P, 'socket closed', 5000);
  h.lost(B, 'connect refused', 5100);
  h.lost(P, 'connect refused', 5300);
  assert.deepEqual(h.open, { from: P, reason: 'socket closed', lostAt: 5000, failedAttempts: 2 });
  const e = h.registered(B, 6200);
  assert.deepEqual(e, {
    kind: 'failover',
    from: P,
    to: B,
    reason: 'socket closed',
    lostAt: 5000,
    at: 6200,
    durationMs: 1200,
    failedAttempts: 2,
  });
  assert.equal(h.open, undefined);
  assert.deepEqual(h.list(), [e]);
  assert.equal(h.registered(B, 7000), undefined, 'no second event for the same outage');
});

test('back on the same host is `reconnected`; the list is bounded and restored', () => {
  const h = new LinkHistory();
  for (let i = 0; i < LINK_EVENTS_KEPT + 5; i++) {
    h.lost(P, `drop ${i}`, i * 10);
    h.registered(P, i * 10 + 3);
  }
  const list = h.list();
  assert.equal(list.length, LINK_EVENTS_KEPT);
  assert.equal(list[0]?.reason, 'drop 5');
  assert.ok(list.every((e) => e.kind === 'reconnected' && e.durationMs === 3));
  const again = new LinkHistory(JSON.parse(JSON.stringify(list)));
  assert.deepEqual(again.list(), list);
  assert.deepEqual(new LinkHistory('garbage').list(), []);
});
