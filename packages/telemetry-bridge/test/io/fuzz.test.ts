/**
 * fast-check over a real socket: garbage frames leave other clients working. The same property on the hub
 * and its sessions without a socket: test/app/fuzz.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { waitFor } from '@broadcast-ops/core/testing';
import { record, startTestBridge } from '../helpers.ts';

const fieldValue = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
);
const path = fc.oneof(
  fc.constantFrom(
    'app.fuzz.custom.a',
    'app.fuzz.custom.b.c',
    'app.fuzz.ev',
    'app.other.custom.x',
    'fake.a',
    'hub.x',
  ),
  fc.constantFrom('hub.subscriptions', '**', 'a.**.b', 'A.B', ''),
  fc.string({ maxLength: 30 }),
);
const envelope = fc.record(
  {
    id: fc.oneof(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 200 }), fieldValue),
    type: fc.oneof(
      fc.constantFrom(
        'command',
        'event',
        'state',
        'ack',
        'error',
        'subscribe',
        'unsubscribe',
        'handshake',
        'ping',
      ),
      fc.string({ maxLength: 10 }),
    ),
    source: fc.oneof(fc.constantFrom('app.fuzz', 'fake.device', 'hub.core'), fieldValue),
    target: fc.oneof(fc.constantFrom('fake', 'fake.device', 'nothere'), fieldValue),
    path,
    payload: fc.oneof(
      fc.record({ value: fc.jsonValue({ maxDepth: 3 }) }),
      fc.record(
        { event: fc.string({ maxLength: 70 }), data: fc.jsonValue({ maxDepth: 2 }) },
        { requiredKeys: ['event'] },
      ),
      fc.record(
        {
          action: fc.constantFrom('ok', 'fail', 'reject', 'throw', ''),
          params: fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
        },
        { requiredKeys: ['action'] },
      ),
      fc.record(
        {
          patterns: fc.array(path, { maxLength: 3 }),
          snapshot: fc.boolean(),
          since: fc.record({ offset: fc.integer({ min: -1, max: 50 }), epoch: fc.string({ maxLength: 5 }) }),
        },
        { requiredKeys: ['patterns'] },
      ),
      fieldValue,
    ),
    timestamp: fc.oneof(fc.integer({ min: 1, max: 2 ** 45 }), fieldValue),
    correlationId: fc.oneof(fc.string({ maxLength: 70 }), fieldValue),
    sequence: fc.oneof(fc.nat(), fieldValue),
    ttl: fc.oneof(fc.integer({ min: -5, max: 400_000 }), fieldValue),
    idempotencyKey: fc.oneof(fc.string({ maxLength: 5 }), fieldValue),
    extra: fieldValue,
  },
  { requiredKeys: ['type'] },
);

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
