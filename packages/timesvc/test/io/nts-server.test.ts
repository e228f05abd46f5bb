import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, type TLSSocket } from 'node:tls';
import { test } from 'node:test';
import { metricValue } from '@broadcast-ops/core';
import { NtsClientSession } from '../../src/domain/nts-client-session.ts';
import { ntsKeyExchange, type KeClientResult } from '../../src/io/nts-ke-client.ts';
import type { NtsPeerSecurity } from '../../src/io/nts-peer.ts';
import { EF, scanNtsPacket } from '../../src/protocol/nts-ef.ts';
import { MODE, refIdToAscii } from '../../src/protocol/ntp-packet.ts';
import {
  KE_ERROR,
  RECORD,
  encodeRecords,
  scanRecords,
  u16Body,
  type NtsKeRecord,
} from '../../src/protocol/nts-ke.ts';
import { ntsServiceFixture } from '../helpers/nts-fixture.ts';
import { localNtsPeerSecurity, udpExchange as udpExchangeWith } from '../helpers/nts.ts';

const fx = ntsServiceFixture('timesvc-nts-server-');

function flip(buf: Buffer, at: number, mask: number): void {
  buf[at] = (buf[at] ?? 0) ^ mask;
}

function header(): Buffer {
  const h = Buffer.alloc(48);
  h[0] = (4 << 3) | MODE.CLIENT;
  h.writeUInt32BE(0x12345678, 40);
  h.writeUInt32BE(0x9abcdef0, 44);
  return h;
}

const udpExchange = (packet: Buffer, timeoutMs = 1500): Promise<Buffer | undefined> =>
  udpExchangeWith(packet, fx.ntpPort, timeoutMs);

async function keExchange(): Promise<KeClientResult> {
  return ntsKeyExchange({ host: '127.0.0.1', port: fx.kePort, caFile: fx.cert });
}

/** Raw TLS client sending `request` and collecting the response records. */
function rawKe(
  request: Buffer | undefined,
  options: { alpn?: string[]; maxVersion?: 'TLSv1.2' | 'TLSv1.3'; endAfterWrite?: boolean } = {},
): Promise<{ records?: NtsKeRecord[]; error?: string }> {
  return new Promise((resolve) => {
    const s: TLSSocket = connect({
      host: '127.0.0.1',
      port: fx.kePort,
      ca: [readFileSync(fx.cert)],
      ...(options.alpn ? { ALPNProtocols: options.alpn } : {}),
      ...(options.maxVersion ? { maxVersion: options.maxVersion, minVersion: 'TLSv1.2' } : {}),
    });
    const chunks: Buffer[] = [];
    s.on('secureConnect', () => {
      if (request) {
        if (options.endAfterWrite) s.end(request);
        else s.write(request);
      }
    });
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', (e) => resolve({ error: e.message }));
    s.on('close', () => {
      const all = Buffer.concat(chunks);
      const scan = scanRecords(all);
      resolve(
        scan.ok && scan.value.complete
          ? { records: scan.value.records }
          : { error: `closed after ${all.length} bytes` },
      );
    });
    s.setTimeout(8000, () => s.destroy());
  });
}

const rec = (type: number, body: number[] = [], critical = true): NtsKeRecord => ({
  critical,
  type,
  body: u16Body(body),
});
const EOM = rec(RECORD.END_OF_MESSAGE);

function errorCode(records: NtsKeRecord[] | undefined): number | undefined {
  const e = records?.find((r) => r.type === RECORD.ERROR);
  return e ? Buffer.from(e.body).readUInt16BE(0) : undefined;
}

test('NTS-KE: our client gets AEAD 15, eight 100-byte cookies and the NTP port (Port record)', async () => {
  const ke = await keExchange();
  assert.equal(ke.aead, 15);
  assert.equal(ke.cookies.length, 8);
  assert.ok(ke.cookies.every((c) => c.length === 100));
  assert.equal(ke.ntpPort, fx.ntpPort);
  assert.equal(ke.c2s.length, 32);
  assert.notDeepEqual(ke.c2s, ke.s2c);
});

test('NTS-KE negative cases get the RFC 8915 behaviour, are counted, and others keep being served', async () => {
  const c = fx.service.nts()!.ke.counters;
  const before = structuredClone(c.failures);
  // Wrong ALPN: the handshake fails (alert no_application_protocol).
  const wrongAlpn = await rawKe(encodeRecords([rec(1, [0]), rec(4, [15]), EOM]), { alpn: ['http/1.1'] });
  assert.match(wrongAlpn.error ?? '', /no.application.protocol|alert number 120/i);
  // No ALPN at all: Node lets it through the handshake; the server closes without an answer.
  const noAlpn = await rawKe(encodeRecords([rec(1, [0]), rec(4, [15]), EOM]));
  assert.equal(noAlpn.records, undefined, JSON.stringify(noAlpn));
  // TLS 1.2 only: refused (alert protocol_version).
  const tls12 = await rawKe(encodeRecords([rec(1, [0]), rec(4, [15]), EOM]), {
    alpn: ['ntske/1'],
    maxVersion: 'TLSv1.2',
  });
  assert.match(tls12.error ?? '', /protocol.version|alert number 70/i);
  // AEAD record without 15: an empty AEAD record and no cookies.
  const noAead = await rawKe(encodeRecords([rec(1, [0]), rec(4, [30]), EOM]), { alpn: ['ntske/1'] });
  assert.ok(noAead.records, JSON.stringify(noAead));
  const aeadRec = noAead.records.find((r) => r.type === RECORD.AEAD);
  assert.equal(aeadRec?.body.length, 0);
  assert.equal(noAead.records.filter((r) => r.type === RECORD.NEW_COOKIE).length, 0);
  // No AEAD record at all with NTPv4: Bad Request.
  const missingAead = await rawKe(encodeRecords([rec(1, [0]), EOM]), { alpn: ['ntske/1'] });
  assert.equal(errorCode(missingAead.records), KE_ERROR.BAD_REQUEST);
  // Truncated record, then the client half-closes: Bad Request.
  const full = encodeRecords([rec(1, [0]), rec(4, [15]), EOM]);
  const truncated = await rawKe(full.subarray(0, 7), { alpn: ['ntske/1'], endAfterWrite: true });
  assert.equal(errorCode(truncated.records), KE_ERROR.BAD_REQUEST);
  // Unknown critical record: Error 0; unknown non-critical: ignored.
  const critical = await rawKe(encodeRecords([rec(1, [0]), rec(4, [15]), rec(0x4321, [1]), EOM]), {
    alpn: ['ntske/1'],
  });
  assert.equal(errorCode(critical.records), KE_ERROR.UNRECOGNIZED_CRITICAL);
  const lenient = await rawKe(
    encodeRecords([rec(1, [0]), rec(4, [15], false), rec(0x4321, [1], false), EOM]),
    {
      alpn: ['ntske/1'],
    },
  );
  assert.equal(lenient.records?.filter((r) => r.type === RECORD.NEW_COOKIE).length, 8);
  // NTP is bound to 127.0.0.1 on another port than 123: Server and Port records say so.
  const server = lenient.records?.find((r) => r.type === RECORD.SERVER);
  assert.equal(Buffer.from(server?.body ?? []).toString('latin1'), '127.0.0.1');
  const port = lenient.records?.find((r) => r.type === RECORD.PORT);
  assert.equal(Buffer.from(port?.body ?? [0, 0]).readUInt16BE(0), fx.ntpPort);
  // Duplicate Next Protocol: Bad Request.
  const dup = await rawKe(encodeRecords([rec(1, [0]), rec(1, [0]), rec(4, [15]), EOM]), {
    alpn: ['ntske/1'],
  });
  assert.equal(errorCode(dup.records), KE_ERROR.BAD_REQUEST);

  const f = c.failures;
  assert.ok(f.alpn - before.alpn >= 2, `alpn failures ${f.alpn - before.alpn}`);
  assert.ok(f.tls_handshake - before.tls_handshake >= 1);
  assert.equal(f.no_common_aead - before.no_common_aead, 1);
  assert.equal(f.truncated - before.truncated, 1);
  assert.equal(f.unrecognized_critical - before.unrecognized_critical, 1);
  assert.equal(f.bad_request - before.bad_request, 2);
  // The server still serves a good client.
  const ke = await keExchange();
  assert.equal(ke.cookies.length, 8);
  assert.ok(
    ((await metricValue(fx.service.registry, 'timesvc_nts_ke_failures_total', { reason: 'alpn' })) ?? 0) >= 2,
  );
  assert.ok(((await metricValue(fx.service.registry, 'timesvc_nts_ke_requests_total')) ?? 0) >= 10);
});

test('NTS NTP: authentic exchange, cookie refill, and NTSN for a tampered cookie or authenticator', async () => {
  const ke = await keExchange();
  const session = new NtsClientSession(ke, ke.cookies);
  const auth0 = fx.service.nts()!.responder.counters.authenticated;

  const req = session.wrap(header())!;
  const reply = await udpExchange(req);
  assert.ok(reply);
  assert.ok(reply.length <= req.length, 'never larger than the request');
  const ok = session.unwrap(reply);
  assert.equal(ok.kind, 'authentic');
  assert.equal(session.cookieCount, 8, 'one cookie spent, one returned');
  // Origin timestamp echoed.
  assert.equal(reply.readUInt32BE(24), 0x12345678);

  // With placeholders the jar refills: spend two without answers, then one request with 2 placeholders.
  session.wrap(header());
  session.wrap(header());
  const refill = session.wrap(header())!;
  const refillReply = await udpExchange(refill);
  assert.equal(session.unwrap(refillReply!).kind, 'authentic');
  assert.equal(session.cookieCount, 8);
  assert.equal(
    refillReply!.length,
    refill.length,
    'three cookies fill exactly the space of cookie + placeholders',
  );

  // Tampered cookie: NTSN with only the UID.
  const tc = session.wrap(header())!;
  const scan = scanNtsPacket(tc);
  assert.ok(scan.ok);
  const cookieField = scan.value.fields.find((x) => x.type === EF.COOKIE)!;
  flip(tc, cookieField.offset + 4 + 50, 0x01);
  const nak = await udpExchange(tc);
  assert.ok(nak);
  assert.equal(refIdToAscii(nak.readUInt32BE(12)), 'NTSN');
  assert.equal(nak[1], 0);
  assert.equal(nak.length, 48 + 36, 'header + UID only');
  assert.deepEqual(nak.subarray(52, 84), tc.subarray(52, 84), 'UID echoed');
  assert.equal(session.unwrap(nak).kind, 'nak');

  // Tampered authenticator (flip a tag bit): NTSN.
  const ta = session.wrap(header())!;
  flip(ta, ta.length - 20, 0x80);
  const nak2 = await udpExchange(ta);
  assert.equal(refIdToAscii(nak2!.readUInt32BE(12)), 'NTSN');
  // Tampered associated data (header byte inside the AD): NTSN.
  const th = session.wrap(header())!;
  flip(th, 41, 0x01);
  const nak3 = await udpExchange(th);
  assert.equal(refIdToAscii(nak3!.readUInt32BE(12)), 'NTSN');

  // A request without a UID is not answerable: dropped.
  const noUid = Buffer.concat([header(), Buffer.from(tc.subarray(84))]);
  assert.equal(await udpExchange(noUid, 500), undefined);

  // UID but no cookie and no authenticator: a malformed NTS request, dropped.
  const malformed = Buffer.concat([header(), Buffer.from(tc.subarray(48, 84))]);
  assert.equal(await udpExchange(malformed, 500), undefined);

  // Every response type and drop is in the NTP counters (README "Endpoints and metrics").
  const ntp = async (name: string, labels: Record<string, string>): Promise<number> =>
    (await metricValue(fx.service.registry, name, labels)) ?? 0;
  assert.ok((await ntp('timesvc_ntp_responses_total', { type: 'kod_ntsn' })) >= 3, 'NTSN replies counted');
  assert.ok((await ntp('timesvc_ntp_dropped_total', { reason: 'nts_no_uid' })) >= 1, 'no-UID drop counted');
  assert.ok((await ntp('timesvc_ntp_dropped_total', { reason: 'nts_malformed' })) >= 1, 'malformed counted');

  // counters is read at scrape time (authentic requests answered on the native thread included).
  const after = fx.service.nts()!.responder.counters;
  assert.ok(after.failures.bad_cookie >= 1);
  assert.ok(after.failures.bad_auth >= 2);
  assert.equal(after.authenticated - auth0, 2);
  assert.ok(
    ((await metricValue(fx.service.registry, 'timesvc_nts_auth_failures_total', { reason: 'bad_auth' })) ??
      0) >= 2,
  );
  assert.ok(((await metricValue(fx.service.registry, 'timesvc_nts_active_sessions')) ?? 0) >= 1);
  // Still serving.
  const again = session.wrap(header())!;
  assert.equal(session.unwrap((await udpExchange(again))!).kind, 'authentic');
});

test('replay: the stateless server answers a replayed request again; the client rejects the replayed reply', async () => {
  // The client side is the upstream-peer NTS component the service uses, so its `rejected` counter (reported
  // in `PeerClient.ntsStatus`) is what counts the replay: the server keeps no per-client state.
  const security = localNtsPeerSecurity(fx.kePort, fx.cert);
  assert.equal(await security.ready(), true);
  const served0 = fx.service.nts()!.responder.counters.authenticated;
  const req = security.wrap(header())!;
  const first = await udpExchange(req);
  const second = await udpExchange(req);
  assert.ok(first && second);
  assert.equal(
    fx.service.nts()!.responder.counters.authenticated - served0,
    2,
    'the stateless server authenticated and answered the replayed request again',
  );
  assert.ok(security.unwrap(first), 'first reply authentic');
  assert.deepEqual(pickCounters(security), { authenticated: 1, rejected: 0, naks: 0 });
  // The replayed request's answer, or the first reply delivered twice, no longer matches a request in flight.
  assert.equal(security.unwrap(second), undefined);
  assert.equal(security.unwrap(first), undefined);
  assert.deepEqual(pickCounters(security), { authenticated: 1, rejected: 2, naks: 0 });
  const next = security.wrap(header())!;
  assert.equal(security.unwrap(first), undefined, 'an old reply never answers a new request');
  assert.ok(security.unwrap((await udpExchange(next))!), 'the next exchange is authentic');
  assert.deepEqual(pickCounters(security), { authenticated: 2, rejected: 3, naks: 0 });
});

function pickCounters(s: NtsPeerSecurity): { authenticated: number; rejected: number; naks: number } {
  const { authenticated, rejected, naks } = s.status();
  return { authenticated, rejected, naks };
}
