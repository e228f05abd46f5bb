/**
 * Client frames for the fuzz and nesting tests, one definition for the quick tier (the hub without a socket)
 * and the integration tier (the same frames over a real socket): fast-check arbitraries of field values,
 * paths and whole envelopes, and state frames nested to a chosen depth.
 */
import fc from 'fast-check';
import { MESSAGE_TYPES } from '../src/protocol/envelope.ts';

/** Any JSON-ish value a field may carry: what a confused or hostile client puts anywhere. */
export const fieldValue = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
);
export const path = fc.oneof(
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
export const envelope = fc.record(
  {
    id: fc.oneof(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 200 }), fieldValue),
    type: fc.oneof(fc.constantFrom(...MESSAGE_TYPES, 'handshake', 'ping'), fc.string({ maxLength: 10 })),
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

/** `levels` nested objects around a 1: `{"a":{"a":1}}` for 2. */
export function nested(levels: number): string {
  return '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
}

export function deepState(levels: number): string {
  return JSON.stringify({
    id: 'deep-1',
    type: 'state',
    path: 'app.deep.custom.x',
    payload: { value: '@@' },
    timestamp: Date.now(),
  }).replace('"@@"', nested(levels));
}
