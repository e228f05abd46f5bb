/**
 * An idempotent retry of a command whose record never became durable (the event log failed its sync) must
 * not be told `received`: the original was refused with INTERNAL_ERROR and never ran, so the retry is
 * refused the same way, never answered with a cached promise that a restart would undo.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { Hub } from '../../src/domain/hub.ts';
import type { EventLogSink } from '../../src/domain/journal.ts';
import type { SessionTransport } from '../../src/io/client-session.ts';
import { FakeAdapter, openSession } from '../quick-fixtures.ts';

class Transport implements SessionTransport {
  sent: Record<string, unknown>[] = [];
  remote = 'test';
  bufferedAmount(): number {
    return 0;
  }
  send(d: string): void {
    this.sent.push(JSON.parse(d) as Record<string, unknown>);
  }
  close(): void {}
}

/** A log whose syncs fail, answered later (as fdatasync answers from the thread pool), in order. */
class FailingLog implements EventLogSink {
  #waiting: ((err?: Error) => void)[] = [];
  append(): void {}
  writePending(): void {}
  whenDurable(done: (err?: Error) => void): void {
    this.#waiting.push(done);
  }
  failAll(): void {
    const w = this.#waiting;
    this.#waiting = [];
    for (const done of w) done(new Error('EIO: fdatasync failed'));
  }
}

test('an idempotent retry behind a refused command is refused too, never told received', () => {
  const clock = new ManualClock();
  const log = new FailingLog();
  const hub = new Hub({ clock, logger: silentLogger(), log, limits: { rateLimit: 1000 } });
  const adapter = new FakeAdapter();
  hub.registerAdapter(adapter);
  void hub.startAdapters();
  const t = new Transport();
  const s = openSession(hub, clock, t, 'cam');
  const command = JSON.stringify({
    id: 'c1',
    type: 'command',
    target: 'fake',
    path: 'fake.x',
    payload: { action: 'ok' },
    idempotencyKey: 'take-1',
    timestamp: clock.now(),
  });
  s.receive(command);
  // The retry arrives while the first command's sync is still in flight.
  s.receive(command);
  log.failAll();
  const answers = t.sent
    .filter((m) => m['type'] === 'ack' || m['type'] === 'error')
    .map((m) => {
      const p = m['payload'] as Record<string, unknown>;
      return m['type'] === 'ack' ? `ack ${String(p['status'])}` : `error ${String(p['code'])}`;
    });
  assert.deepEqual(answers, ['error INTERNAL_ERROR', 'error INTERNAL_ERROR']);
  assert.equal(adapter.executed.length, 0, 'nothing ran');
  hub.abortAll();
});
