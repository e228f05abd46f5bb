// The Ember+ decoders (S101 framing, Glow requests) on any framed input, and valid requests decoded. The
// same input against the running provider: test/io/outputs-emberplus-hostile.test.ts.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import fc from 'fast-check';
import { expectDecoded, refusal } from '@broadcast-ops/core/testing';
import { decodeGlowRequests } from '../../src/protocol/glow.ts';
import { encodeEmberFrames, S101Decoder, S101Error } from '../../src/protocol/s101.ts';
import { glowPayload, hex, rootWith, tlv } from '../ember-glow.ts';

test('fast-check: the decoders return, refuse or throw their own error, within 250 ms, on any framed input', () => {
  fc.assert(
    fc.property(glowPayload, fc.integer({ min: 1, max: 64 }), (payload, split) => {
      const t0 = performance.now();
      const framed = encodeEmberFrames(payload);
      const decoder = new S101Decoder();
      try {
        for (let i = 0; i < framed.length; i += split) {
          for (const m of decoder.push(framed.subarray(i, i + split))) {
            if (m.kind === 'ember') {
              const r = decodeGlowRequests(m.payload);
              assert.ok(r.ok || r.error.message.length > 0);
            }
          }
        }
      } catch (err) {
        if (!(err instanceof S101Error)) throw err;
      }
      const ms = performance.now() - t0;
      assert.ok(ms < 250, `one case took ${ms} ms`);
    }),
    { numRuns: 3000 },
  );
});

test('valid requests are decoded: GetDirectory at the root and inside qualified nodes', () => {
  const getDir = tlv(0x62, tlv(0xa0, tlv(0x02, '20')));
  assert.deepEqual(expectDecoded(decodeGlowRequests(rootWith(getDir))), [{ kind: 'getDirectory', path: [] }]);
  const inNode = tlv(
    0x6a,
    Buffer.concat([tlv(0xa0, tlv(0x0d, '02 05')), tlv(0xa2, tlv(0x64, tlv(0xa0, getDir)))]),
  );
  assert.deepEqual(expectDecoded(decodeGlowRequests(rootWith(inNode))), [
    { kind: 'getDirectory', path: [2, 5] },
  ]);
  // The same with indefinite lengths everywhere (as libember encodes).
  const indefinite = hex(
    '60 80 6b 80 a0 80 6a 80 a0 80 0d 02 02 05 00 00 a2 80 64 80 a0 80 62 80 a0 80 02 01 1e 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00',
  );
  assert.deepEqual(expectDecoded(decodeGlowRequests(indefinite)), [{ kind: 'subscribe', path: [2, 5] }]);
  assert.equal(refusal(decodeGlowRequests(hex('60 10 6b 0e a0 0c 62'))), 'malformed');
});
