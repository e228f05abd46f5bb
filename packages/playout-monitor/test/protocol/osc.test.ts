import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { expectDecoded, refusal } from '@broadcast-ops/core/testing';
import { fromBuffer } from 'osc-min';
import {
  decodeOsc,
  encodeOsc,
  oscMessages,
  OSC_MAX_BUNDLE_DEPTH,
  type OscArg,
  type OscPacket,
} from '../../src/protocol/osc.ts';
import { CASPAR_LAYOUTS, CasparcgSimulator } from '@broadcast-ops/simulators/playout';
import { OSC_FIXTURES as FIXTURES, readHex } from '../pure-helpers.ts';

test('2.0.7 bundle: timetag immediate, int32 values as int64 (h), booleans T/F', () => {
  const { packet, skipped } = expectDecoded(decodeOsc(readHex('casparcg-2.0.7-play-1.hex')));
  assert.deepEqual(skipped, []);
  assert.ok(packet?.kind === 'bundle');
  assert.equal(packet.timetag, 1n);
  const msgs = oscMessages(packet);
  assert.deepEqual(
    msgs.map((m) => m.address),
    [
      '/channel/1/mixer/audio/nb_channels',
      '/channel/1/mixer/audio/1/pFS',
      '/channel/1/mixer/audio/1/dBFS',
      '/channel/1/mixer/audio/2/pFS',
      '/channel/1/mixer/audio/2/dBFS',
      '/channel/1/output/consume_time',
      '/channel/1/stage/layer/10/paused',
      '/channel/1/stage/layer/10/profiler/time',
      '/channel/1/stage/layer/10/file/time',
      '/channel/1/stage/layer/10/file/frame',
    ],
  );
  assert.deepEqual(msgs[0]?.args, [{ type: 'h', value: 2n }]);
  assert.deepEqual(msgs[9]?.args, [
    { type: 'h', value: 125n },
    { type: 'h', value: 1500n },
  ]);
  assert.deepEqual(msgs[6]?.args, [{ type: 'F' }]);
  assert.deepEqual(msgs[8]?.args, [
    { type: 'f', value: 5 },
    { type: 'f', value: 60 },
  ]);
  const second = oscMessages(expectDecoded(decodeOsc(readHex('casparcg-2.0.7-play-2.hex'))).packet);
  assert.deepEqual(second[0]?.args, [{ type: 'f', value: 25 }]);
  assert.deepEqual(second[1]?.args, [{ type: 's', value: 'AMB.mp4' }]);
  assert.deepEqual(second[2]?.args, [{ type: 'F' }]);
});

test('2.3 bundle: counter timetag, int32 pairs, float32 time, strings', () => {
  const { packet, skipped } = expectDecoded(decodeOsc(readHex('casparcg-2.3-paused.hex')));
  assert.deepEqual(skipped, []);
  assert.ok(packet?.kind === 'bundle');
  assert.equal(packet.timetag, 41250n);
  const msgs = oscMessages(packet);
  assert.equal(msgs.length, 12);
  // The server's state map is sorted by address.
  assert.deepEqual(
    msgs.map((m) => m.address),
    [...msgs.map((m) => m.address)].sort(),
  );
  assert.deepEqual(
    msgs.find((m) => m.address.endsWith('/file/streams/1/fps'))?.args,
    [
      { type: 'i', value: 0 },
      { type: 'i', value: 0 },
    ],
    'the audio stream reports 0 0',
  );
  assert.deepEqual(msgs[0], {
    kind: 'message',
    address: '/channel/1/framerate',
    args: [
      { type: 'i', value: 50 },
      { type: 'i', value: 1 },
    ],
  });
  const time = msgs.find((m) => m.address.endsWith('/foreground/file/time'));
  assert.equal(time?.args[0]?.type, 'f');
  assert.equal((time?.args[0] as { value: number }).value, Math.fround(12.48));
  assert.deepEqual(msgs.find((m) => m.address.endsWith('/foreground/paused'))?.args, [{ type: 'T' }]);
});

test('nested bundles and int64 beyond 32 bits', () => {
  const { packet, skipped } = expectDecoded(decodeOsc(readHex('casparcg-2.3-nested.hex')));
  assert.deepEqual(skipped, []);
  assert.ok(packet?.kind === 'bundle');
  assert.equal(packet.elements[0]?.kind, 'bundle');
  const msgs = oscMessages(packet);
  assert.deepEqual(msgs[0]?.args, [{ type: 'h', value: 5_000_000_000n }]);
  assert.equal(msgs[1]?.address, '/channel/1/stage/layer/20/foreground/file/name');
});

test('every fixture re-encodes byte for byte', () => {
  for (const name of FIXTURES) {
    const bytes = readHex(name);
    const decodedFixture = decodeOsc(bytes);
    assert.ok(decodedFixture.ok, name);
    const { packet } = decodedFixture.value;
    assert.deepEqual(Buffer.from(encodeOsc(packet)), Buffer.from(bytes), name);
  }
});

test('osc-min (independent decoder) reads the fixtures as we do', () => {
  // osc-min decodes `h` to BigInt; the reference cites ,hhT -> 125n, 1500n, true.
  const hht = fromBuffer(Buffer.from(readHex('casparcg-2.0.7-frame-hhT.hex'))) as unknown as {
    elements: { args: { value: unknown }[] }[];
  };
  assert.deepEqual(
    hht.elements[0]?.args.map((a) => a.value),
    [125n, 1500n, true],
  );
  for (const name of FIXTURES) {
    const bytes = readHex(name);
    const theirs: { address: string; args: unknown[] }[] = [];
    const walk = (p: {
      oscType: string;
      address?: string;
      args?: { value: unknown }[];
      elements?: unknown[];
    }): void => {
      if (p.oscType === 'message')
        theirs.push({ address: p.address ?? '', args: (p.args ?? []).map((a) => a.value) });
      else for (const e of p.elements ?? []) walk(e as never);
    };
    walk(fromBuffer(Buffer.from(bytes)));
    const ours = oscMessages(expectDecoded(decodeOsc(bytes)).packet).map((m) => ({
      address: m.address,
      args: m.args.map((a) =>
        a.type === 'T' ? true : a.type === 'F' ? false : 'value' in a ? a.value : null,
      ),
    }));
    assert.deepEqual(ours, theirs, name);
  }
});

test('simulator packing as the server: 2.0.7/2.1 bundles below 508 bytes; 2.2+ filled while under 2048', () => {
  for (const layout of CASPAR_LAYOUTS) {
    const sim = new CasparcgSimulator({
      targetHost: '127.0.0.1',
      targetPort: 9,
      layout,
      channel: 1,
      layer: 10,
    });
    sim.play('a-rather-long-clip-name-to-make-the-bundle-bigger.mov'.repeat(20), { durationSec: 10 });
    const datagrams = sim.datagramsForFrame();
    const old = layout === '2.0' || layout === '2.1';
    for (const d of datagrams) {
      const msgs = oscMessages(expectDecoded(decodeOsc(d)).packet);
      // A message too big for 508 bytes goes out alone, as the server does.
      if (old) assert.ok(d.length < 508 || msgs.length === 1, `${layout}: ${d.length}`);
      // A 2.2+ bundle only takes another message while it is under 2048 bytes.
      else {
        const withoutLast = encodeOsc({ kind: 'bundle', timetag: 0n, elements: msgs.slice(0, -1) });
        assert.ok(withoutLast.length < 2048, `${layout}: ${withoutLast.length}`);
      }
    }
    if (!old) assert.ok(datagrams.length >= 2, `${layout}: long names spill into a second bundle`);
  }
});

test('malformed datagrams give typed errors, and bad elements do not lose the good ones', () => {
  assert.equal(refusal(decodeOsc(new Uint8Array(0))), 'empty');
  assert.equal(refusal(decodeOsc(new Uint8Array([0x2f, 0x61, 0, 0, 0x2c]))), 'not-aligned');
  assert.equal(refusal(decodeOsc(new TextEncoder().encode('abc\0'))), 'bad-address');
  const unknownTag = encodeOsc({ kind: 'message', address: '/x', args: [{ type: 'i', value: 1 }] });
  unknownTag[unknownTag.indexOf(0x2c) + 1] = 0x7a;
  assert.equal(refusal(decodeOsc(unknownTag)), 'unknown-type-tag');
  const truncated = encodeOsc({ kind: 'message', address: '/x', args: [{ type: 'h', value: 1n }] }).subarray(
    0,
    12,
  );
  assert.equal(refusal(decodeOsc(truncated)), 'truncated');
  // A bundle whose first element has an unknown tag still yields its second element.
  const bundle = encodeOsc({
    kind: 'bundle',
    timetag: 1n,
    elements: [
      { kind: 'message', address: '/bad', args: [{ type: 'i', value: 1 }] },
      { kind: 'message', address: '/ok', args: [{ type: 'T' }] },
    ],
  });
  bundle[bundle.indexOf(0x2c) + 1] = 0x7a;
  const r = expectDecoded(decodeOsc(bundle));
  assert.equal(r.skipped.length, 1);
  assert.deepEqual(
    oscMessages(r.packet).map((m) => m.address),
    ['/ok'],
  );
  // Nesting deeper than the bound is refused, not recursed into.
  let deep: OscPacket = { kind: 'message', address: '/deep', args: [] };
  for (let i = 0; i < OSC_MAX_BUNDLE_DEPTH + 2; i++) deep = { kind: 'bundle', timetag: 1n, elements: [deep] };
  const d = decodeOsc(encodeOsc(deep));
  assert.ok(d.ok ? d.value.skipped.some((e) => e.code === 'too-deep') : d.error.code === 'too-deep');
  assert.equal(refusal(decodeOsc(new Uint8Array(70_000))), 'too-large');
});

const argArb: fc.Arbitrary<OscArg> = fc.oneof(
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map((value) => ({ type: 'i' as const, value })),
  fc.float({ noNaN: true }).map((value) => ({ type: 'f' as const, value: Math.fround(value) })),
  fc.double({ noNaN: true }).map((value) => ({ type: 'd' as const, value })),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((value) => ({ type: 'h' as const, value })),
  fc
    .string({ unit: 'grapheme', maxLength: 20 })
    .filter((s) => !s.includes('\0'))
    .map((value) => ({ type: 's' as const, value })),
  fc.uint8Array({ maxLength: 9 }).map((value) => ({ type: 'b' as const, value })),
  fc.constantFrom<OscArg>({ type: 'T' }, { type: 'F' }, { type: 'N' }, { type: 'I' }),
);
const messageArb = fc.record({
  kind: fc.constant('message' as const),
  address: fc.stringMatching(/^\/[a-z0-9/_]{0,30}$/),
  args: fc.array(argArb, { maxLength: 6 }),
});
const packetArb: fc.Arbitrary<OscPacket> = fc.letrec<{ packet: OscPacket }>((tie) => ({
  packet: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    messageArb,
    fc.record({
      kind: fc.constant('bundle' as const),
      timetag: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      elements: fc.array(tie('packet'), { maxLength: 4 }),
    }),
  ),
})).packet;

test('fast-check: every valid packet round-trips through encode and decode', () => {
  fc.assert(
    fc.property(packetArb, (p) => {
      const bytes = encodeOsc(p);
      const { packet, skipped } = expectDecoded(decodeOsc(bytes));
      assert.deepEqual(skipped, []);
      assert.deepEqual(Buffer.from(encodeOsc(packet)), Buffer.from(bytes));
    }),
    { numRuns: 300 },
  );
});

test('fast-check: random and mutated datagrams never throw', () => {
  const valid = FIXTURES.map(readHex);
  fc.assert(
    fc.property(
      fc.oneof(
        fc.uint8Array({ maxLength: 600 }),
        fc
          .tuple(
            fc.constantFrom(...valid),
            fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
            fc.nat(),
          )
          .map(([v, flips, cut]) => {
            const b = new Uint8Array(v);
            for (const [at, value] of flips) b[at % b.length] = value;
            return b.subarray(0, cut % (b.length + 1));
          }),
      ),
      (bytes) => {
        const r = decodeOsc(bytes);
        assert.ok(r.ok || r.error.message.length > 0);
        if (r.ok) oscMessages(r.value.packet);
      },
    ),
    { numRuns: 2000 },
  );
});
