/**
 * fast-check over a real socket: garbage frames leave other clients working. The same property on the hub
 * and its sessions without a socket: test/app/fuzz.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { waitFor } from '@broadcast-ops/core/testing';
import { record, startTestBridge } from '../helpers.ts';
import { envelope } from '../frames.ts';

test('fast-check over a real socket: garbage frames leave other clients working', async () => {
  const t = await startTestBridge({ clientTransport: { rateLimit: 100_000, maxMessageSize: 4096 } });
  try {
    const victim = await t.client('victim');
    const rv = record(victim);
    await victim.subscribe(['fake.**']);
    const fuzzer = await t.client('fuzzer');
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 300 }),
          fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('latin1')),
          envelope.map((e) => JSON.stringify(e)),
        ),
        async (text) => {
          fuzzer.sendRaw(text);
          await Promise.resolve();
        },
      ),
      { numRuns: 300 },
    );
    // An oversized frame closes only the sender (1009), not the hub.
    const big = await t.client('big');
    big.sendRaw('x'.repeat(10_000));
    await waitFor(() => !big.connected, { what: 'oversized frame closes the sender' });
    t.adapter.set('fake.after', 1);
    await waitFor(() => rv.all.some((x) => x.type === 'state' && x.m['path'] === 'fake.after'));
    assert.ok(
      rv.all.every((x) => x.type !== 'error'),
      'victim never saw an error',
    );
    assert.ok(rv.all.filter((x) => x.type === 'state').every((x) => String(x.m['path']).startsWith('fake.')));
    assert.equal(
      (await fuzzer.setState('alive', true)).payload.status,
      'completed',
      'the fuzzer itself still works',
    );
  } finally {
    await t.close();
  }
});
