/**
 * The idempotency registry read back from event-log records (src/domain/idempotency-log.ts): what a retry
 * after a restart gets for a finished command, a command the crash interrupted, and one whose batch was torn.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { idempotencyFromLog } from '../../src/domain/idempotency-log.ts';
import type { LogRecord } from '../../src/protocol/log-record.ts';

const cmd = (o: number, t: number, id: string, key: string, idemScope?: string): LogRecord => ({
  o,
  t,
  k: 'command',
  m: {
    id,
    type: 'command',
    source: 'app.ops',
    target: 'companion',
    path: 'companion.x',
    idempotencyKey: key,
    ...(idemScope === undefined ? {} : { idemScope }),
  },
});
const SCOPE = 'id:ops-client-0001';
const ack = (o: number, t: number, id: string, status: string): LogRecord => ({
  o,
  t,
  k: 'ack',
  m: {
    id: `a${o}`,
    type: 'ack',
    source: 'hub.core',
    target: 'app.ops',
    payload: { status, commandId: id },
    offset: o,
  },
});

test('finished, interrupted and torn commands; keys outside the window are dropped', () => {
  const now = 1_000_000;
  const records: LogRecord[] = [
    cmd(1, now - 90_000, 'old', 'k-old', SCOPE),
    ack(2, now - 90_000, 'old', 'received'),
    cmd(3, now - 5000, 'done', 'k-done', SCOPE),
    ack(4, now - 5000, 'done', 'received'),
    ack(5, now - 4990, 'done', 'completed'),
    cmd(6, now - 3000, 'cut', 'k-cut', SCOPE),
    ack(7, now - 3000, 'cut', 'received'),
    cmd(8, now - 1000, 'torn', 'k-torn', SCOPE),
    // Written without a scope (an older version): not restored.
    cmd(9, now - 900, 'unscoped', 'k-unscoped'),
    ack(10, now - 900, 'unscoped', 'received'),
  ];
  const out = idempotencyFromLog(records, now, 60_000);
  const byKey = new Map(out.map((e) => [e.key.split('\u0000')[1], e]));
  assert.deepEqual([...byKey.keys()].sort(), ['k-cut', 'k-done']);
  assert.ok(
    out.every((e) => e.key.startsWith(`${SCOPE}\u0000`)),
    'keyed by the idempotency scope, not the namespace',
  );
  const done = byKey.get('k-done');
  assert.equal((JSON.parse(done?.receivedJson ?? '{}') as { offset: number }).offset, 4);
  assert.equal((JSON.parse(done?.finalJson ?? '{}') as { offset: number }).offset, 5);
  const cut = byKey.get('k-cut');
  assert.ok(cut && cut.receivedJson !== '');
  assert.equal(cut.finalJson, undefined, 'interrupted: the router writes a failed/unknown final ack');
  assert.equal(cut.namespace, 'app.ops');
});
