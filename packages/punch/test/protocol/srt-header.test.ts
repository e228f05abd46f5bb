import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  SEQ_MODULUS,
  SrtKind,
  decodeSrtHeader,
  seqForward,
  srtAckRttMicros,
  srtKind,
  srtRetransmitted,
  srtSequence,
  srtTypeSpecific,
} from '../../src/protocol/srt-header.ts';
import { SRT_PACKETS } from '../fixtures/srt-packets.ts';

const V = SRT_PACKETS;

describe('SRT header codec', () => {
  test('classifies the captured packets', () => {
    assert.equal(srtKind(V.handshake), SrtKind.handshake);
    assert.equal(srtKind(V.data1), SrtKind.data);
    assert.equal(srtKind(V.ack1), SrtKind.ack);
    assert.equal(srtKind(V.ackack1), SrtKind.ackack);
    assert.equal(srtKind(V.keepalive), SrtKind.keepalive);
    assert.equal(srtKind(V.shutdown), SrtKind.shutdown);
    assert.equal(srtKind(V.ack1.subarray(0, 15)), SrtKind.tooShort);
  });

  test('reads sequence numbers, ACK numbers and the RTT an ACK carries', () => {
    assert.equal(srtSequence(V.data1), 0x6c356dd6);
    assert.equal(srtSequence(V.data2), 0x6c356dd7);
    assert.equal(srtRetransmitted(V.data1), false);
    assert.equal(srtTypeSpecific(V.ack1), 1);
    assert.equal(srtTypeSpecific(V.ack2), 2);
    assert.equal(srtTypeSpecific(V.ackack2), 2);
    assert.equal(srtAckRttMicros(V.ack1), 100_000);
    assert.equal(srtAckRttMicros(V.ack2), 899);
    // A light ACK (draft section 3.2.4: only the last acknowledged sequence number) carries no RTT.
    assert.equal(srtAckRttMicros(V.ack2.subarray(0, 20)), -1);
  });

  test('decodes to a Decoded value', () => {
    const d = decodeSrtHeader(V.data1);
    assert.ok(d.ok);
    assert.deepEqual(d.value, {
      kind: 'data',
      sequence: 0x6c356dd6,
      retransmitted: false,
      encrypted: true,
      destination: 0x1659a7ba,
    });
    const a = decodeSrtHeader(V.ack2);
    assert.ok(a.ok);
    assert.deepEqual(a.value, {
      kind: 'control',
      type: 2,
      subtype: 0,
      typeSpecific: 2,
      destination: 0x397f8f4e,
      rttMicros: 899,
      rttVarMicros: 449,
    });
    const short = decodeSrtHeader(new Uint8Array(3));
    assert.ok(!short.ok);
    assert.equal(short.error.code, 'too-short');
  });

  test('the R flag of a retransmission (bit 26 of the second word, libsrt MSGNO_REXMIT)', () => {
    const r = Buffer.from(V.data1);
    r[4] = r[4]! | 0x04;
    assert.equal(srtRetransmitted(r), true);
    const d = decodeSrtHeader(r);
    assert.ok(d.ok && d.value.kind === 'data' && d.value.retransmitted);
  });

  test('sequence distance wraps at 2^31', () => {
    assert.equal(seqForward(SEQ_MODULUS - 1, 0), 1);
    assert.equal(seqForward(0, SEQ_MODULUS - 1), SEQ_MODULUS - 1);
    assert.equal(seqForward(5, 5), 0);
  });

  test('any bytes: never throws, the readers agree with the decoder, nothing past 28 bytes matters', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ maxLength: 16 }), (bytes, tail) => {
        const d = decodeSrtHeader(bytes);
        const kind = srtKind(bytes);
        assert.equal(d.ok, bytes.length >= 16);
        assert.equal(kind === SrtKind.tooShort, bytes.length < 16);
        if (!d.ok) return;
        if (d.value.kind === 'data') {
          assert.equal(kind, SrtKind.data);
          assert.ok(d.value.sequence >= 0 && d.value.sequence < SEQ_MODULUS);
        } else {
          assert.notEqual(kind, SrtKind.data);
          assert.ok(d.value.type >= 0 && d.value.type <= 0x7fff);
        }
        // The payload beyond an ACK's RTT fields never changes what is decoded.
        if (bytes.length >= 28) {
          const longer = Buffer.concat([bytes.subarray(0, 28), tail]);
          assert.deepEqual(decodeSrtHeader(longer), decodeSrtHeader(bytes.subarray(0, 28)));
        }
      }),
      { numRuns: 2000, interruptAfterTimeLimit: 5_000 },
    );
  });
});
