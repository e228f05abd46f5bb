/**
 * fast-check: random frames and random envelopes never crash the hub and never reach other clients, except
 * a valid write the sender was told succeeded (acked with an offset). The hub and its sessions on a
 * `ManualClock` (quick tier); garbage over a real socket: test/io/fuzz.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { silentLogger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { Hub } from '../../src/domain/hub.ts';
import type { SessionTransport } from '../../src/io/client-session.ts';
import { FakeAdapter, openSession } from '../quick-fixtures.ts';
import { envelope } from '../frames.ts';

class Sink implements SessionTransport {
  sent: string[] = [];
  closed: number | undefined;
  remote = 'test';
  bufferedAmount(): number {
    return 0;
  }
  send(d: string): void {
    this.sent.push(d);
  }
  close(code: number): void {
    this.closed = code;
  }
}

test('fast-check: random frames and envelopes never throw and never reach another client', async () => {
  const clock = new ManualClock();
  const hub = new Hub({ clock, logger: silentLogger(), limits: { rateLimit: 1_000_000 } });
  const adapter = new FakeAdapter();
  hub.registerAdapter(adapter);
  await hub.startAdapters();
  const observerSink = new Sink();
  const observer = openSession(hub, clock, observerSink, 'observer');
  const fuzzSink = new Sink();
  const fuzz = openSession(hub, clock, fuzzSink, 'fuzz');
  assert.equal(fuzz.namespace, 'app.fuzz');
  observer.receive(
    JSON.stringify({
      id: 's',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns: ['**'] },
      timestamp: 1,
    }),
  );
  const baseline = observerSink.sent.length;

  const frames = fc.oneof(
    { weight: 3, arbitrary: envelope.map((e) => JSON.stringify(e)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
  );
  fc.assert(
    fc.property(frames, (text) => {
      const before = observerSink.sent.length;
      const fuzzBefore = fuzzSink.sent.length;
      fuzz.receive(text);
      clock.advance(1);
      const answers = fuzzSink.sent.slice(fuzzBefore).map((s) => JSON.parse(s) as Record<string, unknown>);
      let isPong = false;
      try {
        const raw = JSON.parse(text) as { type?: unknown } | null;
        isPong = raw !== null && typeof raw === 'object' && raw.type === 'pong';
      } catch {
        isPong = false;
      }
      // Every frame is answered (ack, error or pong), except a heartbeat pong; nothing is dropped silently.
      if (!isPong) assert.ok(answers.length >= 1, `no answer to ${text.slice(0, 80)}`);
      const broadcasts = observerSink.sent.slice(before).map((s) => JSON.parse(s) as Record<string, unknown>);
      // The observer may only see what the fuzzer was told it published (an ack carrying an offset).
      const publishedOffsets = new Set(
        answers
          .filter((a) => a['type'] === 'ack')
          .map((a) => (a['payload'] as { result?: { offset?: number } }).result?.offset)
          .filter((o) => o !== undefined),
      );
      for (const b of broadcasts) {
        assert.ok(b['type'] === 'state' || b['type'] === 'event', `observer got ${String(b['type'])}`);
        const p = String(b['path']);
        const ownCommandEffect = p.startsWith('fake.');
        assert.ok(p.startsWith('app.fuzz.') || ownCommandEffect, `observer got ${p}`);
        if (!ownCommandEffect)
          assert.ok(publishedOffsets.has(b['offset'] as number), `unacked broadcast ${p}`);
      }
      assert.equal(observerSink.closed, undefined);
      assert.equal(fuzzSink.closed, undefined);
    }),
    { numRuns: 1500 },
  );
  assert.ok(observerSink.sent.length >= baseline);
  // Fake commands the fuzzer sent were ones the fake knows how to run.
  assert.deepEqual(adapter.unexpected, []);
  hub.abortAll();
});
