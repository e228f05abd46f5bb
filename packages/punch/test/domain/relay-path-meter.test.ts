import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '@broadcast-ops/core';
import fc from 'fast-check';
import { MAX_GAP, RelayPathMeter, emptyTotals } from '../../src/domain/relay-path-meter.ts';
import { SEQ_MODULUS } from '../../src/protocol/srt-header.ts';
import { SRT_PACKETS, srtAck as ack, srtAckAck as ackack, srtData as data } from '../fixtures/srt-packets.ts';

// Side 0 is the sender (data arrives on side 0), side 1 the receiver (its ACKs arrive on side 1).
describe('relay path meter', () => {
  test('the relay ↔ sender leg from ACK n to ACKACK n, exact on the clock, and the end-to-end RTT', () => {
    const clock = new ManualClock();
    const m = new RelayPathMeter(clock);
    m.observe(1, ack(1, 30_000, 5_000));
    clock.advance(12);
    m.observe(0, ackack(1));
    let [d] = m.figures();
    assert.equal(d.senderLegMs, 12);
    assert.equal(d.rttMs, 30);
    assert.equal(d.rttVarMs, 5);
    assert.equal(d.receiverLegMs, 18);
    assert.equal(d.rttAgeMs, 0);
    // The second pair smooths as SRT does: 7/8 of the old plus 1/8 of the sample.
    m.observe(1, ack(2, 28_000));
    clock.advance(20);
    m.observe(0, ackack(2));
    [d] = m.figures();
    assert.equal(d.senderLegMs, 12 + (20 - 12) / 8);
    assert.equal(d.rttMs, 28);
    clock.advance(1500);
    assert.equal(m.figures()[0].rttAgeMs, 1500);
    // The other direction has nothing.
    assert.deepEqual(
      { rtt: m.figures()[1].rttMs, leg: m.figures()[1].senderLegMs },
      { rtt: null, leg: null },
    );
  });

  test('an ACKACK for an ACK the relay never saw, a light ACK, or one from the wrong side is not paired', () => {
    const clock = new ManualClock();
    const m = new RelayPathMeter(clock);
    m.observe(0, ackack(7));
    m.observe(1, SRT_PACKETS.ack2.subarray(0, 20)); // light ACK: no RTT, no pairing
    m.observe(1, ack(3, 10_000));
    clock.advance(5);
    m.observe(1, ackack(3)); // from the receiver's side: not the sender's answer
    assert.equal(m.figures()[0].senderLegMs, null);
    m.observe(0, ackack(3));
    assert.equal(m.figures()[0].senderLegMs, 5);
    // A second ACKACK for the same number is not a second sample.
    clock.advance(100);
    m.observe(0, ackack(3));
    assert.equal(m.figures()[0].senderLegMs, 5);
  });

  test('the captured sequence: ACK 1, ACKACK 1, ACK 2, ACKACK 2', () => {
    const clock = new ManualClock();
    const m = new RelayPathMeter(clock);
    m.observe(0, SRT_PACKETS.data1);
    m.observe(0, SRT_PACKETS.data2);
    m.observe(1, SRT_PACKETS.ack1);
    clock.advance(0.4);
    m.observe(0, SRT_PACKETS.ackack1);
    m.observe(1, SRT_PACKETS.ack2);
    clock.advance(0.6);
    m.observe(0, SRT_PACKETS.ackack2);
    const [d] = m.figures();
    assert.equal(d.packets, 2);
    assert.equal(d.lost, 0);
    assert.equal(d.rttMs, 0.899);
    assert.equal(d.senderLegMs, 0.4 + (0.6 - 0.4) / 8);
  });

  test('loss from gaps; retransmissions are not loss; a late original takes one back', () => {
    const clock = new ManualClock();
    const totals = emptyTotals();
    const m = new RelayPathMeter(clock, totals);
    for (const s of [100, 101, 104, 105]) m.observe(0, data(s));
    let [d] = m.figures();
    assert.equal(d.lost, 2);
    // The sender resends 102 and 103 flagged R: still 2 lost upstream of the relay.
    m.observe(0, data(102, true));
    m.observe(0, data(103, true));
    [d] = m.figures();
    assert.deepEqual([d.packets, d.lost, d.retransmitted], [6, 2, 2]);
    // An original that was only late (reordered on the way) fills its gap.
    m.observe(0, data(106));
    m.observe(0, data(108));
    m.observe(0, data(107));
    [d] = m.figures();
    assert.deepEqual([d.lost, d.reordered], [2, 1]);
    assert.deepEqual(totals, { packets: [9, 0], lost: [2, 0], retransmitted: [2, 0] });
  });

  test('the 31-bit sequence wraps without a false loss', () => {
    const m = new RelayPathMeter(new ManualClock());
    for (const s of [SEQ_MODULUS - 2, SEQ_MODULUS - 1, 0, 1, 3]) m.observe(0, data(s));
    assert.equal(m.figures()[0].lost, 1);
  });

  test('a handshake or a jump past MAX_GAP starts a new sequence, not loss', () => {
    const m = new RelayPathMeter(new ManualClock());
    m.observe(0, data(10));
    m.observe(0, data(10 + MAX_GAP + 5));
    m.observe(0, data(10 + MAX_GAP + 6));
    assert.equal(m.figures()[0].lost, 0);
    m.observe(1, SRT_PACKETS.handshake);
    m.observe(0, data(5_000_000));
    m.observe(0, data(5_000_001));
    assert.equal(m.figures()[0].lost, 0);
  });

  test('any order of originals: loss never below 0 and never above the gaps', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: SEQ_MODULUS - 1 }),
        fc.array(fc.record({ step: fc.integer({ min: -5, max: 20 }), r: fc.boolean() }), { maxLength: 300 }),
        (start, steps) => {
          const m = new RelayPathMeter(new ManualClock());
          let seq = start;
          let maxAhead = 0;
          for (const s of steps) {
            seq = (seq + s.step + SEQ_MODULUS) % SEQ_MODULUS;
            maxAhead += Math.max(0, s.step);
            m.observe(0, data(seq, s.r));
          }
          const [d] = m.figures();
          assert.ok(d.lost >= 0 && d.lost <= maxAhead);
          assert.equal(d.packets, steps.length);
        },
      ),
      { numRuns: 300, interruptAfterTimeLimit: 5_000 },
    );
  });
});
