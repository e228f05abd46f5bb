import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { EF, encodeAuthenticator, encodeField, scanNtsPacket } from '../../src/protocol/nts-ef.ts';
import {
  KE_ERROR,
  RECORD,
  buildKeError,
  buildKeRequest,
  buildKeResponse,
  encodeRecords,
  exporterContext,
  parseKeRequest,
  parseKeResponse,
  planKeResponse,
  scanRecords,
  u16Body,
  type NtsKeRecord,
} from '../../src/protocol/nts-ke.ts';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

// chrony 4.3's NTS-KE request as it appears on the wire (RFC 8915 §4 layout; NextProto(C) [0],
// AEAD(C) [15], EOM(C)); the same bytes our buildKeRequest produces.
const CHRONY_KE_REQUEST = hex('8001 0002 0000  8004 0002 000f  8000 0000');

test('NTS-KE records: decode and re-encode byte for byte (chrony request layout)', () => {
  const scan = scanRecords(CHRONY_KE_REQUEST);
  assert.ok(scan.ok && scan.value.complete);
  if (!scan.ok || !scan.value.complete) return;
  assert.deepEqual(
    scan.value.records.map((r) => [r.critical, r.type, Buffer.from(r.body).toString('hex')]),
    [
      [true, 1, '0000'],
      [true, 4, '000f'],
      [true, 0, ''],
    ],
  );
  assert.deepEqual(encodeRecords(scan.value.records), CHRONY_KE_REQUEST);
  assert.deepEqual(buildKeRequest(), CHRONY_KE_REQUEST);
  const parsed = parseKeRequest(scan.value.records);
  assert.ok(parsed.ok);
  assert.deepEqual(parsed.value, { nextProtocols: [0], aeads: [15] });
});

test('NTS-KE records: every split point of a request is partial until the last byte', () => {
  for (let i = 0; i < CHRONY_KE_REQUEST.length; i++) {
    assert.deepEqual(
      scanRecords(CHRONY_KE_REQUEST.subarray(0, i)),
      { ok: true, value: { complete: false } },
      `at ${i}`,
    );
  }
  assert.equal(scanRecords(Buffer.concat([CHRONY_KE_REQUEST, Buffer.from([0])])).ok, false);
});

test('NTS-KE response: built, scanned and read back by the client parser', () => {
  const cookies = [Buffer.alloc(100, 1), Buffer.alloc(100, 2)];
  const plan = planKeResponse({ nextProtocols: [0], aeads: [30, 15] }, [15]);
  assert.deepEqual(plan, { nextProtocols: [0], aead: 15 });
  const wire = buildKeResponse(plan, { cookies, port: 31123, server: '127.0.0.1' });
  const scan = scanRecords(wire);
  assert.ok(scan.ok && scan.value.complete);
  if (!scan.ok || !scan.value.complete) return;
  assert.deepEqual(encodeRecords(scan.value.records), wire);
  const client = parseKeResponse(scan.value.records, [15]);
  assert.deepEqual(client, {
    ok: true,
    value: { aead: 15, cookies, server: '127.0.0.1', port: 31123 },
  });
  // Error response.
  const err = scanRecords(buildKeError(KE_ERROR.BAD_REQUEST));
  assert.ok(err.ok && err.value.complete);
  if (err.ok && err.value.complete)
    assert.deepEqual(parseKeResponse(err.value.records, [15]), {
      ok: false,
      error: { code: 'server_error', message: 'server sent Error 1' },
    });
});

test('NTS-KE request rules: critical bit, duplicates, bodies, missing records', () => {
  const r = (type: number, body: number[] = [], critical = true): NtsKeRecord => ({
    critical,
    type,
    body: u16Body(body),
  });
  const eom = r(RECORD.END_OF_MESSAGE);
  const code = (records: NtsKeRecord[]): number | 'ok' => {
    const p = parseKeRequest(records);
    return p.ok ? 'ok' : p.error.keError;
  };
  assert.equal(code([r(1, [0]), r(4, [15]), eom]), 'ok');
  assert.equal(code([r(1, [0]), r(4, [15], false), eom]), 'ok', 'NTPsec sends AEAD without C');
  assert.equal(code([r(1, [0]), r(4, [15]), r(999, [1], false), eom]), 'ok');
  assert.equal(code([r(1, [0]), r(4, [15]), r(999, [1]), eom]), KE_ERROR.UNRECOGNIZED_CRITICAL);
  assert.equal(code([r(4, [15]), eom]), KE_ERROR.BAD_REQUEST);
  assert.equal(code([r(1, [0]), eom]), KE_ERROR.BAD_REQUEST);
  assert.equal(code([r(1, [0]), r(1, [0]), r(4, [15]), eom]), KE_ERROR.BAD_REQUEST);
  assert.equal(code([r(1, [0]), r(4, [15]), r(2, [0]), eom]), KE_ERROR.BAD_REQUEST);
  assert.equal(code([r(1, [0]), r(4, [15])]), KE_ERROR.BAD_REQUEST);
  assert.equal(
    code([r(1, [0]), r(4, [15]), { critical: true, type: 7, body: new Uint8Array(3) }, eom]),
    KE_ERROR.BAD_REQUEST,
  );
  assert.equal(
    code([{ critical: true, type: 1, body: new Uint8Array(3) }, r(4, [15]), eom]),
    KE_ERROR.BAD_REQUEST,
  );
  // No common AEAD: empty AEAD record, no cookies.
  assert.deepEqual(planKeResponse({ nextProtocols: [0], aeads: [30] }, [15]), {
    nextProtocols: [0],
    aead: undefined,
  });
  assert.deepEqual(planKeResponse({ nextProtocols: [7], aeads: [15] }, [15]), {
    nextProtocols: [],
    aead: undefined,
  });
});

test('exporter context: 00 00 | AEAD | 00 (C2S) or 01 (S2C)', () => {
  assert.equal(exporterContext(15, 'c2s').toString('hex'), '0000000f00');
  assert.equal(exporterContext(15, 's2c').toString('hex'), '0000000f01');
});

test('fast-check: the NTS-KE scanner and request parser never throw and re-encode what they accept', () => {
  const record = fc.record({
    critical: fc.boolean(),
    type: fc.oneof(fc.integer({ min: 0, max: 8 }), fc.integer({ min: 0, max: 0x7fff })),
    body: fc.uint8Array({ maxLength: 40 }),
  });
  fc.assert(
    fc.property(fc.array(record, { maxLength: 8 }), fc.uint8Array({ maxLength: 8 }), (records, junk) => {
      const wire = encodeRecords(records);
      const scan = scanRecords(wire);
      if (scan.ok && scan.value.complete) {
        assert.deepEqual(encodeRecords(scan.value.records), wire);
        parseKeRequest(scan.value.records);
        parseKeResponse(scan.value.records, [15]);
      }
      scanRecords(Buffer.concat([wire, junk]));
    }),
    { numRuns: 3000 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      const scan = scanRecords(bytes);
      if (scan.ok && scan.value.complete)
        assert.deepEqual(encodeRecords(scan.value.records), Buffer.from(bytes));
    }),
    { numRuns: 3000 },
  );
});

test('NTS extension fields: scan, AD boundary, fields after the authenticator ignored', () => {
  const header = Buffer.alloc(48, 0x23);
  const uid = encodeField(EF.UNIQUE_IDENTIFIER, Buffer.alloc(32, 7));
  const cookie = encodeField(EF.COOKIE, Buffer.alloc(100, 9));
  const ph = encodeField(EF.COOKIE_PLACEHOLDER, Buffer.alloc(100));
  const auth = encodeAuthenticator(Buffer.alloc(16, 1), Buffer.alloc(16, 2));
  const trailing = encodeField(0x7777, Buffer.alloc(12));
  const pkt = Buffer.concat([header, uid, cookie, ph, auth, trailing]);
  const scan = scanNtsPacket(pkt);
  assert.ok(scan.ok);
  if (!scan.ok) return;
  assert.equal(scan.value.adEnd, 48 + 36 + 104 + 104);
  assert.deepEqual(scan.value.placeholders, [100]);
  assert.equal(scan.value.cookies.length, 1);
  assert.deepEqual(Buffer.from(scan.value.authenticator!.nonce), Buffer.alloc(16, 1));
  assert.equal(scan.value.fields.length, 3);
  // Odd lengths and overruns are refused.
  const bad = Buffer.from(pkt);
  bad.writeUInt16BE(37, 50);
  assert.equal(scanNtsPacket(bad).ok, false);
  assert.equal(scanNtsPacket(pkt.subarray(0, pkt.length - 2)).ok, false);
});

test('fast-check: the extension-field scanner never throws or reads past the packet', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          type: fc.constantFrom(0x104, 0x204, 0x304, 0x404, 0x999),
          value: fc.uint8Array({ maxLength: 64 }),
        }),
        { maxLength: 6 },
      ),
      fc.uint8Array({ maxLength: 6 }),
      (fields, junk) => {
        const pkt = Buffer.concat([
          Buffer.alloc(48),
          ...fields.map((f) => encodeField(f.type, f.value)),
          junk,
        ]);
        const scan = scanNtsPacket(pkt);
        if (scan.ok) {
          assert.ok(scan.value.adEnd <= pkt.length);
          const a = scan.value.authenticator;
          if (a) assert.ok(a.nonce.length + a.ciphertext.length <= pkt.length);
        }
      },
    ),
    { numRuns: 3000 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 48, maxLength: 300 }), (bytes) => {
      scanNtsPacket(bytes);
    }),
    { numRuns: 3000 },
  );
});

test('cookies: seal/open, tamper, daily rotation with two previous keys accepted, then expiry', () => {
  let now = Date.UTC(2026, 0, 10, 12);
  const secret = Buffer.alloc(32, 0x42);
  const jar = new NtsCookieJar({ secret, now: () => now });
  const keys = { aead: 15, c2s: Buffer.alloc(32, 1), s2c: Buffer.alloc(32, 2) };
  const cookie = jar.seal(keys);
  assert.equal(cookie.length, 100);
  const opened = jar.open(cookie);
  assert.ok(opened.ok);
  if (opened.ok) {
    assert.deepEqual(Buffer.from(opened.keys.c2s), keys.c2s);
    assert.deepEqual(Buffer.from(opened.keys.s2c), keys.s2c);
    assert.equal(opened.keys.aead, 15);
  }
  for (const at of [0, 4, 20, 90, 99]) {
    const t = Buffer.from(cookie);
    t[at] = (t[at] ?? 0) ^ 1;
    assert.equal(jar.open(t).ok, false, `tamper at ${at}`);
  }
  assert.deepEqual(jar.open(cookie.subarray(0, 99)), { ok: false, reason: 'length' });
  // Another instance with the same secret opens it (restarts, several servers); another secret does not.
  assert.ok(new NtsCookieJar({ secret, now: () => now }).open(cookie).ok);
  assert.equal(new NtsCookieJar({ secret: Buffer.alloc(32, 1), now: () => now }).open(cookie).ok, false);
  const day = 86_400_000;
  now += day;
  assert.ok(jar.open(cookie).ok, 'previous key, day 1');
  const fresh = jar.seal(keys);
  assert.equal(fresh.readUInt32BE(0), cookie.readUInt32BE(0) + 1, 'new key id after rotation');
  now += day;
  assert.ok(jar.open(cookie).ok, 'day 2');
  now += day;
  assert.deepEqual(jar.open(cookie), { ok: false, reason: 'expired_key' });
  assert.ok(jar.open(fresh).ok);
  // A cookie from the future (key id ahead of the clock) is refused.
  now -= 3 * day;
  assert.deepEqual(jar.open(fresh), { ok: false, reason: 'unknown_key' });
});
