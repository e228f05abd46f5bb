import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_REPORTED_ALLOCATIONS, parseRelayAnswer } from '../../src/protocol/relay-bus.ts';
import { relayPathView, type RelayPathReport } from '../../src/protocol/relay-path-view.ts';

/** A relay's report on the bus (docs/relay.md "What the relay measures"), strict, and how it is shown. */
const direction = {
  packets: 2266,
  lost: 0,
  retransmitted: 0,
  reordered: 0,
  rttMs: 1.852,
  rttVarMs: 2.317,
  senderLegMs: 0.61,
  receiverLegMs: 1.242,
  rttAgeMs: 12.5,
};
const idle = {
  ...direction,
  packets: 0,
  rttMs: null,
  rttVarMs: null,
  senderLegMs: null,
  receiverLegMs: null,
  rttAgeMs: null,
};
const report = (allocations: unknown[]) => ({
  t: 'relay_report',
  relay: 'r1',
  at: 1_700_000_000_000,
  allocations,
});

test('a relay report parses; extra fields, negative counts and too many allocations do not', () => {
  const ok = parseRelayAnswer(report([{ id: 'r1.r3', directions: [direction, idle] }]));
  assert.ok(ok.ok);
  const bad = [
    report([{ id: 'r1.r3', directions: [{ ...direction, payload: 'x' }, idle] }]),
    report([{ id: 'r1.r3', directions: [{ ...direction, lost: -1 }, idle] }]),
    report([{ id: 'r1.r3', directions: [direction] }]),
    { ...report([]), passphrase: 'x' },
    report(
      Array.from({ length: MAX_REPORTED_ALLOCATIONS + 1 }, (_, i) => ({
        id: `r1.r${i}`,
        directions: [idle, idle],
      })),
    ),
  ];
  for (const b of bad) assert.equal(parseRelayAnswer(b).ok, false, JSON.stringify(b).slice(0, 200));
});

test('the view: figures per direction, age from the reading, stale past 10 s or with an old RTT', () => {
  const r: RelayPathReport = { at: 1_000_000, directions: [direction, idle] };
  const fresh = relayPathView(r, 1_002_000);
  assert.deepEqual(fresh.a_to_b, {
    packets: 2266,
    lost_upstream: 0,
    retransmitted: 0,
    rtt_ms: 1.85,
    rtt_var_ms: 2.32,
    sender_leg_ms: 0.61,
    receiver_leg_ms: 1.24,
    rtt_age: 2,
  });
  assert.equal(fresh.age, 2);
  assert.equal(fresh.stale, false);
  assert.equal(fresh.at, new Date(1_000_000).toISOString());
  // An old reading, or a fresh reading whose newest RTT is old (no ACK for 10 s), is stale.
  assert.equal(relayPathView(r, 1_010_001).stale, true);
  assert.equal(
    relayPathView({ at: 1_000_000, directions: [{ ...direction, rttAgeMs: 10_001 }, idle] }, 1_000_000).stale,
    true,
  );
  // No RTT figure yet is not stale: the counters are current.
  assert.equal(relayPathView({ at: 1_000_000, directions: [idle, idle] }, 1_000_500).stale, false);
});
