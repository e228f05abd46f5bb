import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@broadcast-ops/core/testing';
import { parseClientFrame, sanitiseClientName } from '../../src/protocol/envelope.ts';
import { UUID_V7_RE, UuidV7Generator, uuidV7Time } from '../../src/domain/ids.ts';

test('UUID v7: RFC 9562 layout, embedded time, strictly increasing within one millisecond', () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 23, 1, 2, 3, 456));
  const gen = new UuidV7Generator(() => clock.now());
  const ids = Array.from({ length: 5000 }, () => gen.next());
  for (const id of ids) assert.match(id, UUID_V7_RE);
  assert.equal(uuidV7Time(ids[0]!), clock.now());
  const sorted = [...ids].sort();
  assert.deepEqual(sorted, ids, 'lexical order = creation order (counter in rand_a, RFC 9562 §6.2)');
  assert.equal(new Set(ids).size, ids.length);
  // A wall clock stepped backwards does not break the order.
  clock.stepWall(-10_000);
  const after = gen.next();
  assert.ok(after > ids.at(-1)!);
  // RFC 9562 appendix A.6 example time: 2022-02-22 19:22:22 UTC = 0x017F22E279B0.
  const g2 = new UuidV7Generator(() => 0x017f22e279b0);
  assert.ok(g2.next().startsWith('017f22e2-79b0-7'));
});

test('client frames: handshake, heartbeat, envelopes, and typed errors', () => {
  const hs = parseClientFrame(JSON.stringify({ type: 'handshake', name: 'Graphics 1', version: '1.0' }));
  assert.ok(hs.ok && hs.value.kind === 'handshake');
  const env = parseClientFrame(
    JSON.stringify({
      id: 'cmd-1',
      type: 'command',
      source: 'app.x',
      target: 'companion',
      path: 'companion.page.1.bank.1',
      payload: { action: 'press', params: { keyIndex: 0 } },
      timestamp: 1,
      sequence: 1,
      ttl: 5000,
      idempotencyKey: 'k',
    }),
  );
  assert.ok(env.ok && env.value.kind === 'envelope' && env.value.frame.type === 'command');
  const notJson = parseClientFrame('{');
  assert.deepEqual(notJson.ok ? null : notJson.error.code, 'PARSE_ERROR');
  const unknownKey = parseClientFrame(
    JSON.stringify({
      id: 'a',
      type: 'event',
      path: 'app.x.y',
      payload: { event: 'e' },
      timestamp: 1,
      extra: 1,
    }),
  );
  assert.ok(
    !unknownKey.ok &&
      unknownKey.error.code === 'INVALID_MESSAGE' &&
      unknownKey.error.relatedMessageId === 'a',
  );
  const ttlTooLong = parseClientFrame(
    JSON.stringify({
      id: 'b',
      type: 'command',
      target: 'x',
      path: 'x.y',
      payload: { action: 'a' },
      timestamp: 1,
      ttl: 300_001,
    }),
  );
  assert.ok(!ttlTooLong.ok);
  const noTarget = parseClientFrame(
    JSON.stringify({ id: 'c', type: 'command', path: 'x.y', payload: { action: 'a' }, timestamp: 1 }),
  );
  assert.ok(!noTarget.ok);
  const ack = parseClientFrame(
    JSON.stringify({
      id: 'd',
      type: 'ack',
      path: 'x.y',
      payload: { status: 'completed', commandId: 'z' },
      timestamp: 1,
    }),
  );
  assert.ok(!ack.ok, 'clients do not send acks in protocol 0.1');
  const noValue = parseClientFrame(
    JSON.stringify({ id: 'e', type: 'state', path: 'app.x.custom.k', payload: {}, timestamp: 1 }),
  );
  assert.ok(
    !noValue.ok && /payload\.value/.test(noValue.error.message),
    'a missing value is not a silent delete',
  );
  const nullValue = parseClientFrame(
    JSON.stringify({
      id: 'f',
      type: 'state',
      path: 'app.x.custom.k',
      payload: { value: null },
      timestamp: 1,
    }),
  );
  assert.ok(nullValue.ok);
  const longId = parseClientFrame(
    JSON.stringify({
      id: 'x'.repeat(129),
      type: 'event',
      path: 'app.x.y',
      payload: { event: 'e' },
      timestamp: 1,
    }),
  );
  assert.ok(!longId.ok);
});

test('client names are sanitised into one namespace segment', () => {
  assert.equal(sanitiseClientName('Graphics Engine #1'), 'graphics_engine__1');
  assert.equal(sanitiseClientName('___'), 'client');
  assert.equal(sanitiseClientName(''), 'client');
  assert.equal(sanitiseClientName('9lives'), 'c_9lives');
  assert.equal(sanitiseClientName('x'.repeat(80)).length, 32);
});
