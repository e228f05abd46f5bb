import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import fc from 'fast-check';
import { NtsClientSession } from '../../src/domain/nts-client-session.ts';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { NtsResponder, jsNtsSiv } from '../../src/domain/nts-responder.ts';
import { RateLimiter } from '../../src/domain/rate-limiter.ts';
import { nativeCookieAead, nativeNtsSiv } from '../../src/io/native-cookie.ts';
import { AesSiv } from '../../src/protocol/aes-siv.ts';
import { EF, newNtsRequestFields, scanNtsPacket, scanNtsRequest } from '../../src/protocol/nts-ef.ts';

/**
 * The per-request NTS and rate-limit paths of docs/performance.md: kept-key AES-GCM cookies (native/
 * nts-cookie.c) interchangeable with node:crypto's, the offsets-only request scanner agreeing with the
 * full one, replies built in place, and the rate limiter keyed from raw address bytes as from text.
 */

const SECRET = Buffer.alloc(32, 0x5a);

test('the cookie addon is built (Linux)', () => {
  assert.ok(nativeCookieAead(), 'packages/timesvc/build/Release/nts_cookie.node is missing: npm rebuild');
});

test('fast-check: kept-key AES-GCM cookies and node:crypto cookies open each other; tampering fails both', () => {
  const aead = nativeCookieAead();
  assert.ok(aead);
  const native = new NtsCookieJar({ secret: SECRET, now: () => 1_700_000_000_000, aead });
  const node = new NtsCookieJar({ secret: SECRET, now: () => 1_700_000_000_000 });
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.nat(99),
      fc.integer({ min: 1, max: 255 }),
      (c2s, s2c, at, flip) => {
        const keys = { aead: 15, c2s: Buffer.from(c2s), s2c: Buffer.from(s2c) };
        for (const [sealer, opener] of [
          [native, node],
          [node, native],
          [native, native],
        ] as const) {
          const cookie = sealer.seal(keys);
          const opened = opener.open(cookie);
          assert.ok(opened.ok);
          assert.ok(opened.keys.c2s.equals(keys.c2s) && opened.keys.s2c.equals(keys.s2c));
          assert.equal(opened.keys.aead, 15);
          const bad = Buffer.from(cookie);
          bad[at] = (bad[at] ?? 0) ^ flip;
          assert.equal(opener.open(bad).ok, false, `byte ${at} changed`);
        }
      },
    ),
    { numRuns: 300, interruptAfterTimeLimit: 5000 },
  );
});

test("fast-check: OpenSSL AES-SIV (addon) gives the hand-written AES-SIV's bytes, empty plaintext included", () => {
  const native = nativeNtsSiv();
  assert.ok(native, 'the addon provides AES-SIV');
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.uint8Array({ maxLength: 400 }),
      fc.uint8Array({ minLength: 16, maxLength: 32 }),
      fc.oneof(fc.constant(new Uint8Array(0)), fc.uint8Array({ maxLength: 1100 })),
      fc.nat(),
      (key, ad, nonce, plain, flip) => {
        const a = native(key);
        const js = jsNtsSiv(key);
        const sealed = Buffer.from(a.seal(ad, nonce, plain));
        assert.deepEqual(sealed, new AesSiv(key).seal([ad, nonce], plain), 'same V ‖ C');
        assert.deepEqual(Buffer.from(js.open(ad, nonce, sealed) ?? []), Buffer.from(plain));
        assert.deepEqual(Buffer.from(a.open(ad, nonce, sealed) ?? [0]), Buffer.from(plain));
        const bad = Buffer.from(sealed);
        bad[flip % bad.length] = (bad[flip % bad.length] ?? 0) ^ 1;
        assert.equal(a.open(ad, nonce, bad), undefined, 'tampered: refused');
        const other = Buffer.from(nonce);
        other[0] = (other[0] ?? 0) ^ 1;
        assert.equal(a.open(ad, other, sealed), undefined, 'another nonce: refused');
      },
    ),
    { numRuns: 400, interruptAfterTimeLimit: 8000 },
  );
});

test("fresh cookies differ (a new nonce each); with the addon's AES-GCM and AES-SIV a request is answered end to end", () => {
  const aead = nativeCookieAead();
  const jar = new NtsCookieJar({ now: Date.now, aead });
  const keys = { aead: 15, c2s: randomBytes(32), s2c: randomBytes(32) };
  const a = jar.seal(keys);
  const b = jar.seal(keys);
  assert.notDeepEqual(a.subarray(4, 16), b.subarray(4, 16));
  const responder = new NtsResponder({ cookies: jar, now: () => 0, siv: nativeNtsSiv() });
  const session = new NtsClientSession(keys, [a, b]);
  const h = Buffer.alloc(48);
  h[0] = 0x23;
  const req = session.wrap(h)!;
  const check = responder.check(req);
  assert.equal(check.kind, 'authentic');
  if (check.kind !== 'authentic') return;
  // Built in place after a header in a larger buffer (the batched path's send slot) = the sealed copy.
  const slot = Buffer.alloc(2048, 0xee);
  const replyHeader = Buffer.from(h);
  replyHeader[0] = 0x24; // mode 4 (the plain responder's header; authenticated as it stands)
  replyHeader.copy(slot, 100);
  const n = check.sealInto(slot, 100);
  assert.equal(n, check.length);
  assert.ok(n <= req.length, 'never longer than the request (RFC 8915 §5.7)');
  assert.ok(
    slot.subarray(0, 100).every((x) => x === 0xee) && slot.subarray(100 + n).every((x) => x === 0xee),
  );
  const reply = Buffer.from(slot.subarray(100, 100 + n));
  const un = session.unwrap(reply);
  assert.equal(un.kind, 'authentic', 'the client verifies the S2C authenticator and takes the new cookie');
});

test('fast-check: scanNtsRequest agrees with scanNtsPacket on every input', () => {
  const fields = fc.array(
    fc.oneof(
      fc.constantFrom(EF.UNIQUE_IDENTIFIER, EF.COOKIE, EF.COOKIE_PLACEHOLDER, EF.AUTHENTICATOR, 0x0100),
      fc.integer({ min: 0, max: 0xffff }),
    ),
    { maxLength: 6 },
  );
  const packet = fc
    .tuple(
      fields,
      fc.array(fc.nat(40), { minLength: 6, maxLength: 6 }),
      fc.array(fc.nat(40), { minLength: 6, maxLength: 6 }),
      fc.uint8Array({ maxLength: 8 }),
    )
    .map(([types, words, nonces, junk]) => {
      const parts: Buffer[] = [Buffer.alloc(48)];
      types.forEach((type, i) => {
        const body = Buffer.alloc((words[i] ?? 0) * 4);
        if (type === EF.AUTHENTICATOR && body.length >= 4) {
          body.writeUInt16BE(nonces[i] ?? 0, 0);
          body.writeUInt16BE((words[i] ?? 0) * 2, 2);
        }
        const f = Buffer.alloc(4);
        f.writeUInt16BE(type, 0);
        f.writeUInt16BE(4 + body.length, 2);
        parts.push(f, body);
      });
      parts.push(Buffer.from(junk));
      return Buffer.concat(parts);
    });
  const f = newNtsRequestFields();
  fc.assert(
    fc.property(
      fc.oneof(
        packet,
        fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
      ),
      (buf) => {
        const full = scanNtsPacket(buf);
        const ok = scanNtsRequest(buf, f);
        assert.equal(ok, full.ok);
        assert.equal(f.ntsMalformed, !full.ok && full.error.ntsMalformed === true);
        if (!full.ok) return;
        const v = full.value;
        assert.equal(f.nts, v.uid !== undefined || v.cookies.length > 0 || v.authenticator !== undefined);
        assert.equal(f.uidOffset >= 0, v.uid !== undefined);
        if (v.uid) assert.deepEqual(buf.subarray(f.uidOffset, f.uidOffset + f.uidLength), Buffer.from(v.uid));
        assert.equal(f.cookies, v.cookies.length);
        if (v.cookies[0]) {
          assert.deepEqual(
            buf.subarray(f.cookieOffset, f.cookieOffset + f.cookieLength),
            Buffer.from(v.cookies[0]),
          );
        }
        assert.deepEqual([...f.placeholderLengths.subarray(0, f.placeholders)], v.placeholders);
        assert.equal(f.authenticator, v.authenticator !== undefined);
        assert.equal(f.adEnd, v.adEnd);
        if (v.authenticator) {
          assert.deepEqual(
            buf.subarray(f.nonceOffset, f.nonceOffset + f.nonceLength),
            Buffer.from(v.authenticator.nonce),
          );
          assert.deepEqual(
            buf.subarray(f.ciphertextOffset, f.ciphertextOffset + f.ciphertextLength),
            Buffer.from(v.authenticator.ciphertext),
          );
        }
      },
    ),
    { numRuns: 3000, interruptAfterTimeLimit: 5000 },
  );
});

/** The batched socket's address record for a textual address (native/mmsg.c recv()). */
function record(address: string): Uint8Array {
  const r = new Uint8Array(24);
  if (!address.includes(':')) {
    r[0] = 4;
    address.split('.').forEach((o, i) => (r[4 + i] = Number(o)));
    return r;
  }
  r[0] = 6;
  const url = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = '', tail = ''] = url.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = url.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    r[4 + 2 * i] = v >>> 8;
    r[5 + 2 * i] = v & 0xff;
  });
  return r;
}

test('fast-check: the rate limiter groups clients from raw address bytes exactly as from their text', () => {
  const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'));
  const v6 = fc
    .array(fc.oneof(fc.constant(0), fc.nat(0xffff)), { minLength: 8, maxLength: 8 })
    .map((g) => g.map((x) => x.toString(16)).join(':'));
  const mapped = v4.map((a) => `::ffff:${a}`);
  const addr = fc.oneof(v4, v6, mapped);
  fc.assert(
    fc.property(addr, addr, fc.integer({ min: 0, max: 128 }), (a, b, prefix) => {
      const rl = new RateLimiter({
        averageIntervalS: 1,
        burst: 1,
        kodIntervalS: 8,
        maxClients: 16,
        ipv6PrefixBits: prefix,
      });
      const text = rl.keyOf(a) === rl.keyOf(b);
      const bytes = rl.keyOfBytes(record(a), 0) === rl.keyOfBytes(record(b), 0);
      assert.equal(bytes, text, `${a} ${b} /${prefix}`);
    }),
    {
      numRuns: 2000,
      interruptAfterTimeLimit: 5000,
      // Found by this property on one run: a mapped address written in hex groups was IPv6 as text.
      examples: [
        ['0:0:0:0:0:ffff:0:0', '0:0:0:0:0:0:0:0', 0],
        ['::ffff:c000:207', '192.0.2.7', 128],
      ],
    },
  );
  // Same bucket: a burst of 1 from 192.0.2.7 leaves nothing for ::ffff:192.0.2.7.
  const rl = new RateLimiter({
    averageIntervalS: 1,
    burst: 1,
    kodIntervalS: 8,
    maxClients: 16,
    ipv6PrefixBits: 64,
  });
  assert.equal(rl.checkBytes(record('192.0.2.7'), 0, 0), 'allow');
  assert.equal(rl.checkBytes(record('::ffff:192.0.2.7'), 0, 1), 'kod');
  assert.equal(rl.checkBytes(record('2001:db8::1'), 0, 2), 'allow');
  assert.equal(rl.checkBytes(record('2001:db8::2'), 0, 3), 'kod', 'same /64');
  assert.equal(rl.checkBytes(record('2001:db8:0:1::1'), 0, 4), 'allow', 'another /64');
});
