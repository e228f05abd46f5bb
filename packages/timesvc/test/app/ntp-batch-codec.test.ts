/**
 * The pure pieces of the batched socket path (native/mmsg.c, src/io/batch-socket.ts; docs/performance.md
 * "Batched socket path"), fuzzed: the trailer scan, the in-place reply and the IPv6 source text. The socket
 * path itself: test/io/ntp-batch-socket.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { UNSYNCHRONISED_STATE, respond, respondInto, OUTCOME } from '../../src/domain/ntp-responder.ts';
import { expandIpv6 } from '../../src/domain/ip-address.ts';
import { ipv6Text } from '../../src/io/batch-socket.ts';
import { TRAILER, decodeNtpPacket, scanTrailer } from '../../src/protocol/ntp-packet.ts';

test('fast-check: scanTrailer agrees with decodeNtpPacket on every input (MAC, malformed, fields)', () => {
  const field = fc
    .tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0, max: 40 }))
    .map(([type, words]) => {
      const f = Buffer.alloc(4 + words * 4);
      f.writeUInt16BE(type, 0);
      f.writeUInt16BE(4 + words * 4, 2);
      return f;
    });
  const trailer = fc.oneof(
    fc.array(field, { maxLength: 4 }).map((fs) => Buffer.concat(fs)),
    fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b)),
    fc.constantFrom(Buffer.alloc(4), Buffer.alloc(20, 7), Buffer.alloc(24, 9)),
  );
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 48, maxLength: 48 }), trailer, fc.nat(16), (head, tail, pad) => {
      const msg = Buffer.concat([Buffer.from(head), tail]);
      const d = decodeNtpPacket(msg);
      const expected = !d.ok ? TRAILER.MALFORMED : d.value.mac !== undefined ? TRAILER.MAC : TRAILER.NONE;
      // At an offset inside a larger buffer, as in a batch slot, with bytes after it that must not be read.
      const big = Buffer.concat([Buffer.alloc(pad, 0xee), msg, Buffer.alloc(32, 0xee)]);
      assert.equal(scanTrailer(big, pad, msg.length), expected);
    }),
    { numRuns: 2000, interruptAfterTimeLimit: 5000 },
  );
});

test('fast-check: respondInto at an offset writes exactly what respond returns', () => {
  const RX = { seconds: 0xe1234567, fraction: 0x89abcdef };
  const locked = { ...UNSYNCHRONISED_STATE, leap: 0, stratum: 3, updatedAtMs: 0 };
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 0, maxLength: 120 }),
      fc.nat(64),
      fc.boolean(),
      (bytes, pad, client) => {
        const msg = Buffer.from(bytes);
        if (client && msg.length > 0) msg[0] = (msg[0]! & 0xf8) | 3;
        const expected = respond(msg, '192.0.2.1', RX, 1000, locked, {});
        const src = Buffer.concat([Buffer.alloc(pad, 0xaa), msg, Buffer.alloc(8, 0xbb)]);
        const out = Buffer.alloc(pad + 48 + 8, 0xcc);
        const code = respondInto(src, pad, msg.length, '192.0.2.1', 1000, locked, {}, out, pad);
        if (expected.kind === 'drop') {
          assert.ok(code >= OUTCOME.DROP_SHORT);
          assert.ok(
            out.every((b) => b === 0xcc),
            'a drop writes nothing',
          );
          return;
        }
        assert.equal(code, OUTCOME.REPLY);
        out.writeUInt32BE(RX.seconds, pad + 32);
        out.writeUInt32BE(RX.fraction, pad + 36);
        assert.deepEqual(out.subarray(pad, pad + 48), expected.packet);
        assert.ok(
          out.subarray(0, pad).every((b) => b === 0xcc) && out.subarray(pad + 48).every((b) => b === 0xcc),
        );
      },
    ),
    { numRuns: 1000, interruptAfterTimeLimit: 5000 },
  );
});

test('fast-check: IPv6 source addresses print as RFC 5952 text that parses back to the same bytes', () => {
  const addr = fc.oneof(
    fc.uint8Array({ minLength: 16, maxLength: 16 }),
    // Zero runs, so that "::" compression is exercised.
    fc.array(fc.constantFrom(0, 0, 0, 1, 0xffff, 0x2001, 0xdb8), { minLength: 8, maxLength: 8 }).map((g) => {
      const b = new Uint8Array(16);
      g.forEach((v, i) => {
        b[2 * i] = v >>> 8;
        b[2 * i + 1] = v & 0xff;
      });
      return b;
    }),
  );
  fc.assert(
    fc.property(addr, (bytes) => {
      const text = ipv6Text(bytes, 0);
      const groups = expandIpv6(text);
      assert.ok(groups, text);
      for (let i = 0; i < 8; i++) assert.equal(groups[i], (bytes[2 * i]! << 8) | bytes[2 * i + 1]!, text);
      const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
      // WHATWG URL's IPv6 serializer is RFC 5952's (except the dotted IPv4-mapped tail Node prints).
      if (!mapped) assert.equal(text, new URL(`http://[${text}]/`).hostname.slice(1, -1));
    }),
    { numRuns: 2000, interruptAfterTimeLimit: 5000 },
  );
});
