// Ember+ Glow test material (not a test file): BER TLV builders and fast-check generators of well-formed-ish
// and mutated Glow, shared by the decoder fuzz (test/protocol) and the hostile-consumer tests (test/io).
import fc from 'fast-check';
import { GLOW_TAGS } from '../src/protocol/glow.ts';

export const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/** Definite-length TLV (short or long form). */
export function tlv(tag: number, body: Buffer | string): Buffer {
  const b = typeof body === 'string' ? hex(body) : body;
  const len =
    b.length < 0x80
      ? Buffer.from([b.length])
      : b.length < 0x100
        ? Buffer.from([0x81, b.length])
        : Buffer.from([0x82, b.length >> 8, b.length & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, b]);
}

/** A Glow Root holding one root element (already encoded). */
export const rootWith = (element: Buffer): Buffer => tlv(0x60, tlv(0x6b, tlv(0xa0, element)));

/** Random well-formed-ish Glow: a tree of TLVs with Glow tags, optionally indefinite, then mutated. */
const tlvTree: fc.Arbitrary<Buffer> = fc.letrec<{ node: Buffer }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc
      .tuple(fc.constantFrom(0x02, 0x0c, 0x0d, 0x09, 0x01, 0x04), fc.uint8Array({ maxLength: 12 }))
      .map(([t, v]) => tlv(t, Buffer.from(v))),
    fc
      .tuple(
        fc.constantFrom(
          ...Object.values(GLOW_TAGS).map((t) => 0x60 | (t & 0x1f)),
          0xa0,
          0xa1,
          0xa2,
          0x31,
          0x30,
        ),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.boolean(),
      )
      .map(([t, kids, indefinite]) => {
        const body = Buffer.concat(kids);
        return indefinite ? Buffer.concat([Buffer.from([t, 0x80]), body, Buffer.from([0, 0])]) : tlv(t, body);
      }),
  ),
})).node;

const mutated = fc
  .tuple(tlvTree, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), fc.nat())
  .map(([b, edits, cut]) => {
    const out = Buffer.from(b);
    for (const [at, v] of edits) if (out.length > 0) out[at % out.length] = v;
    return out.subarray(
      0,
      out.length === 0 ? 0 : out.length - (cut % Math.max(1, Math.floor(out.length / 4))),
    );
  });

export const glowPayload = fc.oneof(
  mutated.map((inner) => tlv(0x60, tlv(0x6b, tlv(0xa0, inner)))),
  mutated,
  fc.uint8Array({ maxLength: 300 }).map((u) => Buffer.from(u)),
);
