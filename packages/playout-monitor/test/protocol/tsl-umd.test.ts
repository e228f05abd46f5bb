import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { expectDecoded } from '@broadcast-ops/core/testing';
import {
  controlWord,
  decodeTslPacket,
  encodeTslPacket,
  encodeTslPackets,
  tallyForState,
  TSL_MAX_PACKET,
} from '../../src/protocol/tsl-umd.ts';

// Golden vectors, screen 0, index 1, text "VT1", written out by hand from the byte layout of the TSL UMD
// protocol document, section V5.0 (PBC = bytes after PBC, VER 0, FLAGS 0, SCREEN, INDEX, CONTROL,
// LENGTH, TEXT; little-endian) and the spec's tally mapping. They agree with nocarryr/tslumd's builder
// (PBC = struct size − 2, version 0).
const VECTORS = {
  play: '0d 00 00 00 00 00 01 00 c5 00 03 00 56 54 31',
  rec: '0d 00 00 00 00 00 01 00 cf 00 03 00 56 54 31',
  stop: '0d 00 00 00 00 00 01 00 c0 00 03 00 56 54 31',
  offline: '0d 00 00 00 00 00 01 00 40 00 03 00 56 54 31',
} as const;
const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('encoder matches the published v5.0 vectors for every mapped state', () => {
  for (const [state, vector] of Object.entries(VECTORS)) {
    const packet = encodeTslPacket(0, [
      { index: 1, display: tallyForState(state as keyof typeof VECTORS), text: 'VT1' },
    ]);
    assert.equal(packet.toString('hex'), hex(vector).toString('hex'), state);
  }
});

test('the vectors decode back to the mapping (both ways)', () => {
  const expected = { play: 0xc5, rec: 0xcf, stop: 0xc0, offline: 0x40 };
  for (const [state, vector] of Object.entries(VECTORS)) {
    const d = expectDecoded(decodeTslPacket(hex(vector)));
    assert.equal(d.version, 0);
    assert.equal(d.flags, 0);
    assert.equal(d.screen, 0);
    assert.deepEqual(d.messages, [
      { index: 1, control: expected[state as keyof typeof expected], text: 'VT1' },
    ]);
  }
});

test('control word bit positions: RH bits 0-1, text 2-3, LH 4-5, brightness 6-7', () => {
  assert.equal(controlWord({ rh: 'green', text: 'off', lh: 'off', brightness: 0 }), 0x02);
  assert.equal(controlWord({ rh: 'off', text: 'green', lh: 'off', brightness: 0 }), 0x08);
  assert.equal(controlWord({ rh: 'off', text: 'off', lh: 'amber', brightness: 0 }), 0x30);
  assert.equal(controlWord({ rh: 'off', text: 'off', lh: 'off', brightness: 2 }), 0x80);
});

test('screen and index are little-endian; non-ASCII names switch FLAGS bit 0 to UTF-16LE', () => {
  const p = encodeTslPacket(0x0102, [{ index: 0x0304, display: tallyForState('play'), text: 'Kamera Ä' }]);
  assert.equal(p.readUInt16LE(4), 0x0102);
  assert.equal(p[4], 0x02);
  assert.equal(p.readUInt16LE(6), 0x0304);
  assert.equal(p[3], 0x01);
  assert.equal(p.readUInt16LE(10), 'Kamera Ä'.length * 2);
  const d = expectDecoded(decodeTslPacket(p));
  assert.equal(d.messages[0]?.text, 'Kamera Ä');
});

test('many displays are split into packets of at most 2048 bytes, each with its own PBC', () => {
  const messages = Array.from({ length: 200 }, (_, i) => ({
    index: i,
    display: tallyForState('rec'),
    text: `Device number ${i} with a long name`,
  }));
  const packets = encodeTslPackets(7, messages);
  assert.ok(packets.length > 1);
  const seen: number[] = [];
  for (const p of packets) {
    assert.ok(p.length <= TSL_MAX_PACKET);
    const d = expectDecoded(decodeTslPacket(p));
    seen.push(...d.messages.map((m) => m.index));
  }
  assert.deepEqual(
    seen,
    messages.map((m) => m.index),
  );
});

test('fast-check: encode/decode round trip, and the decoder never throws on arbitrary bytes', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 0xffff }),
      fc.array(
        fc.record({
          index: fc.integer({ min: 0, max: 0xffff }),
          state: fc.constantFrom('play', 'rec', 'stop', 'offline' as const),
          text: fc.string({ maxLength: 40 }),
        }),
        { maxLength: 20 },
      ),
      (screen, list) => {
        const msgs = list.map((m) => ({ index: m.index, display: tallyForState(m.state), text: m.text }));
        for (const p of encodeTslPackets(screen, msgs)) {
          const d = expectDecoded(decodeTslPacket(p));
          assert.equal(d.screen, screen);
        }
      },
    ),
    { numRuns: 300 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 3000 }), (bytes) => {
      decodeTslPacket(bytes);
    }),
    { numRuns: 2000 },
  );
});
