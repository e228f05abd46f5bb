import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { AesSiv } from '../../src/protocol/aes-siv.ts';
import {
  EF,
  authenticatorInputs,
  encodeAuthenticator,
  encodeField,
  scanFields,
  scanNtsPacket,
} from '../../src/protocol/nts-ef.ts';

/**
 * Real NTS packets captured on loopback by test/fixtures/capture-nts.ts (provenance in the JSON): chrony
 * 4.3 as NTS client against timesvc, and chrony 4.3 as NTS server answering timesvc's client.
 */
interface Exchange {
  note: string;
  request: string;
  response: string;
}
const fixture = JSON.parse(
  readFileSync(join(import.meta.dirname, '../fixtures/chrony-nts-packets.json'), 'utf8'),
) as {
  provenance: { tool: string };
  chronyClient: { cookieKey: string; capturedAtMs: number; exchanges: Exchange[] };
  chronyServer: { aead: number; c2s: string; s2c: string; exchanges: Exchange[] };
};

/** Re-encode a packet from its scanned fields (header, then each field with its type and value). */
function reencode(packet: Buffer): Buffer {
  const scan = scanFields(packet);
  assert.ok(scan.ok);
  if (!scan.ok) return Buffer.alloc(0);
  return Buffer.concat([
    packet.subarray(0, 48),
    ...scan.value.map((f) => {
      if (f.type === EF.AUTHENTICATOR) {
        const view = scanNtsPacket(packet);
        assert.ok(view.ok && view.value.authenticator);
        if (view.ok && view.value.authenticator) {
          return encodeAuthenticator(view.value.authenticator.nonce, view.value.authenticator.ciphertext);
        }
      }
      return encodeField(f.type, f.value);
    }),
  ]);
}

function verify(packet: Buffer, key: Uint8Array): Buffer | undefined {
  const scan = scanNtsPacket(packet);
  assert.ok(scan.ok);
  if (!scan.ok || !scan.value.authenticator) return undefined;
  const a = scan.value.authenticator;
  return new AesSiv(key).open(authenticatorInputs(packet, scan.value.adEnd, a.nonce), a.ciphertext);
}

test(`captured chrony NTS client requests (chrony ${/version ([\d.]+)/.exec(fixture.provenance.tool)?.[1] ?? '?'}) authenticate with the keys in their cookie`, () => {
  const c = fixture.chronyClient;
  assert.ok(c.exchanges.length >= 2);
  const jar = new NtsCookieJar({ secret: Buffer.from(c.cookieKey, 'hex'), now: () => c.capturedAtMs });
  for (const e of c.exchanges) {
    const req = Buffer.from(e.request, 'hex');
    const res = Buffer.from(e.response, 'hex');
    assert.deepEqual(reencode(req), req, 'request re-encodes byte for byte');
    assert.deepEqual(reencode(res), res, 'reply re-encodes byte for byte');
    const scan = scanNtsPacket(req);
    assert.ok(scan.ok);
    if (!scan.ok) continue;
    const v = scan.value;
    assert.equal(v.uid?.length, 32, 'chrony sends a 32-byte UID');
    assert.equal(v.cookies.length, 1);
    assert.equal(v.authenticator?.nonce.length, 16);
    const opened = jar.open(v.cookies[0] ?? new Uint8Array(0));
    assert.ok(opened.ok, 'chrony returned our cookie unchanged');
    if (!opened.ok) continue;
    // chrony's authenticator (sealed with C2S from the TLS exporter on chrony's side) verifies.
    assert.deepEqual(verify(req, opened.keys.c2s), Buffer.alloc(0), 'empty encrypted part, tag only');
    const tampered = Buffer.from(req);
    tampered[45] = (tampered[45] ?? 0) ^ 1;
    assert.equal(verify(tampered, opened.keys.c2s), undefined);
    // timesvc's reply: UID echoed, sealed with S2C, 1 + placeholders cookies inside, not larger.
    assert.ok(res.length <= req.length);
    const rs = scanNtsPacket(res);
    assert.ok(rs.ok);
    if (!rs.ok) continue;
    assert.deepEqual(rs.value.uid, v.uid);
    const plain = verify(res, opened.keys.s2c);
    assert.ok(plain);
    const inner = scanFields(plain ?? Buffer.alloc(0), 0);
    assert.ok(inner.ok);
    if (inner.ok)
      assert.equal(inner.value.filter((f) => f.type === EF.COOKIE).length, 1 + v.placeholders.length);
  }
});

test('captured chrony NTS server replies authenticate with S2C and carry encrypted cookies', () => {
  const s = fixture.chronyServer;
  assert.equal(s.aead, 15);
  assert.ok(s.exchanges.length >= 2);
  for (const e of s.exchanges) {
    const req = Buffer.from(e.request, 'hex');
    const res = Buffer.from(e.response, 'hex');
    assert.deepEqual(reencode(res), res);
    assert.deepEqual(reencode(req), req);
    assert.deepEqual(verify(req, Buffer.from(s.c2s, 'hex')), Buffer.alloc(0));
    const rs = scanNtsPacket(res);
    const qs = scanNtsPacket(req);
    assert.ok(rs.ok && qs.ok);
    if (!rs.ok || !qs.ok) continue;
    assert.deepEqual(rs.value.uid, qs.value.uid, 'chrony echoes the UID');
    assert.equal(rs.value.cookies.length, 0, 'no cookie in clear');
    assert.deepEqual(res.subarray(24, 32), req.subarray(40, 48), 'origin = our transmit timestamp');
    const plain = verify(res, Buffer.from(s.s2c, 'hex'));
    assert.ok(plain, 'chrony seals with S2C: same key export, same S2V input order');
    const inner = scanFields(plain ?? Buffer.alloc(0), 0);
    assert.ok(inner.ok);
    if (!inner.ok) continue;
    const cookies = inner.value.filter((f) => f.type === EF.COOKIE);
    assert.equal(cookies.length, 1 + qs.value.placeholders.length);
    assert.ok(cookies.every((c) => c.value.length === 100 || c.value.length === 64));
    assert.equal(verify(res, Buffer.from(s.c2s, 'hex')), undefined, 'not with the other direction');
  }
});

test('ntpd-rs captured NTS packets (AEAD 17, AES-SIV-CMAC-512) authenticate and re-encode', () => {
  const f = JSON.parse(
    readFileSync(join(import.meta.dirname, '../fixtures/ntpd-rs-nts-packets.json'), 'utf8'),
  ) as { server: { packet: string; key: string }; client: { packet: string; key: string } };
  const server = Buffer.from(f.server.packet, 'hex');
  const client = Buffer.from(f.client.packet, 'hex');
  assert.deepEqual(reencode(server), server);
  assert.deepEqual(reencode(client), client);
  // Client: UID 36 + cookie 172 + authenticator 40 (tag only).
  assert.deepEqual(verify(client, Buffer.from(f.client.key, 'hex')), Buffer.alloc(0));
  // Server: UID 36 + authenticator 212 whose plaintext is one cookie field.
  const plain = verify(server, Buffer.from(f.server.key, 'hex'));
  assert.ok(plain);
  const inner = scanFields(plain ?? Buffer.alloc(0), 0);
  assert.ok(inner.ok);
  if (inner.ok)
    assert.deepEqual(
      inner.value.map((x) => [x.type, x.length]),
      [[EF.COOKIE, 172]],
    );
  const cs = scanNtsPacket(client);
  const ss = scanNtsPacket(server);
  assert.ok(cs.ok && ss.ok);
  if (cs.ok && ss.ok) assert.deepEqual(ss.value.uid, cs.value.uid, 'the pair belongs together');
  const tampered = Buffer.from(server);
  tampered[100] = (tampered[100] ?? 0) ^ 1;
  assert.equal(verify(tampered, Buffer.from(f.server.key, 'hex')), undefined);
});
