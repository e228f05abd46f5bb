/**
 * The client library reports a subscription the hub dropped after its ack (README "Per-client bounds") with
 * subscriptionLost, over a real socket. The hub's snapshot bounds themselves: test/app/snapshot-bounds.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '@broadcast-ops/core/testing';
import { startTestBridge } from '../helpers.ts';

test('the client library reports a subscription the hub dropped after its ack with subscriptionLost', async () => {
  const t = await startTestBridge();
  try {
    t.adapter.set('fake.lost.a', 1);
    t.adapter.set('fake.kept.a', 2);
    const c = await t.client('lost');
    const lost: { patterns: string[]; code: string }[] = [];
    c.on('subscriptionLost', (i) => lost.push(i));
    const store = t.bridge.hub.store;
    const get = store.get.bind(store);
    store.get = (path: string) => {
      if (path.startsWith('fake.lost.')) throw new Error('injected');
      return get(path);
    };
    const kept = await c.subscribe(['fake.kept.**'], { snapshot: true });
    const dropped = await c.subscribe(['fake.lost.**'], { snapshot: true });
    assert.notEqual(kept, dropped);
    await waitFor(() => lost.length === 1, { what: 'subscriptionLost' });
    assert.deepEqual(lost[0], {
      patterns: ['fake.lost.**'],
      code: 'INTERNAL_ERROR',
      message: `subscription ${dropped} could not be completed and was dropped`,
    });
    assert.equal(t.bridge.hub.stats().subscriptions, 1);
  } finally {
    await t.close();
  }
});
