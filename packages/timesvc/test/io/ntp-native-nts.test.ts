import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { NtsClientSession } from '../../src/domain/nts-client-session.ts';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { NtsResponder } from '../../src/domain/nts-responder.ts';
import { UNSYNCHRONISED_STATE } from '../../src/domain/ntp-responder.ts';
import { nativeCookieAead, nativeNtsSiv } from '../../src/io/native-cookie.ts';
import { NtpServer } from '../../src/io/ntp-server.ts';
import { ServedClock } from '../../src/io/served-clock.ts';
import { MODE, refIdToAscii } from '../../src/protocol/ntp-packet.ts';
import { AEAD_AES_SIV_CMAC_256 } from '../../src/protocol/nts-ke.ts';

/**
 * NTS on the native responder's thread (native/ntp-nts.c; docs/performance.md "Native responder"): the
 * authentic case is answered there with the cookie master keys it is handed, everything else goes to the
 * JavaScript responder (src/domain/nts-responder.ts) through the bounded ring, which decides as before.
 * The client is the JavaScript NTS client (src/domain/nts-client-session.ts), which checks every reply.
 */

const PERIOD_MS = 60_000;
/** The cookie jar's clock (Unix ms): starts 400 ms before a key rotation, moved by the tests. */
let jarNow = 0;
let jar: NtsCookieJar;
let responder: NtsResponder;
let server: NtpServer;
let port: number;
const state = { ...UNSYNCHRONISED_STATE, leap: 0, stratum: 2, updatedAtMs: performance.now() };

before(async () => {
  const boundary = (Math.floor(Date.now() / PERIOD_MS) + 1) * PERIOD_MS;
  jarNow = boundary - 400;
  jar = new NtsCookieJar({ now: () => jarNow, periodMs: PERIOD_MS, aead: nativeCookieAead() });
  responder = new NtsResponder({ cookies: jar, now: () => performance.now(), siv: nativeNtsSiv() });
  server = new NtpServer({
    port: 0,
    bind: { udp4: '127.0.0.1' },
    clock: new ServedClock(),
    state: () => state,
    policy: {},
    nts: responder,
    logger: silentLogger(),
  });
  await server.start();
  port = server.addresses[0]!.port;
  assert.equal(server.responder, 'native');
});

after(async () => {
  await server.close();
});

function session(): NtsClientSession {
  const keys = { aead: AEAD_AES_SIV_CMAC_256, c2s: randomBytes(32), s2c: randomBytes(32) };
  const cookies = Array.from({ length: 8 }, () => jar.seal(keys));
  return new NtsClientSession(keys, cookies);
}

function header(seq: number): Buffer {
  const h = Buffer.alloc(48);
  h[0] = (4 << 3) | MODE.CLIENT;
  h.writeUInt32BE(0x7e57beef, 40);
  h.writeUInt32BE(seq, 44);
  return h;
}

async function client(): Promise<{
  sock: Socket;
  next: (timeoutMs?: number) => Promise<Buffer | undefined>;
}> {
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  const queue: Buffer[] = [];
  sock.on('message', (m) => queue.push(m));
  const next = async (timeoutMs = 2000): Promise<Buffer | undefined> => {
    const until = performance.now() + timeoutMs;
    while (queue.length === 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 5));
    return queue.shift();
  };
  return { sock, next };
}

const forwarded = (): number => server.batchStats.forwarded;

test('an authentic NTS request is answered on the native thread, the reply authentic with a cookie back', async () => {
  const s = session();
  const { sock, next } = await client();
  try {
    const f0 = forwarded();
    const a0 = responder.counters.authenticated;
    for (let i = 0; i < 3; i++) {
      const req = s.wrap(header(i))!;
      sock.send(req, port, '127.0.0.1');
      const reply = await next();
      assert.ok(reply, `reply ${i}`);
      assert.ok(reply.length <= req.length, 'never longer than the request (RFC 8915 §5.7)');
      const check = s.unwrap(reply);
      assert.equal(check.kind, 'authentic', JSON.stringify(check));
      assert.equal(s.cookieCount, 8, 'the spent cookie was replaced');
      assert.equal(reply.readUInt32BE(28), i, 'origin timestamp echoed');
    }
    assert.equal(forwarded() - f0, 0, 'none went to JavaScript');
    assert.equal(responder.counters.authenticated - a0, 3, 'counted as the responder’s own');
    assert.ok(responder.activeSessions() >= 1);
  } finally {
    sock.close();
  }
});

test('bursts of NTS and plain requests: every reply arrives, each authentic one for its own request', async () => {
  // The thread sends sealed replies NTS_TX_CHUNK at a time and at the end of a batch (native/mmsg.c,
  // docs/performance.md "The batched socket path"); bursts make batches of several datagrams, so replies
  // leave in chunks, at the batch's end and after plain ones.
  const { sock, next } = await client();
  try {
    const f0 = forwarded();
    for (let burst = 0; burst < 20; burst++) {
      const sessions = Array.from({ length: 12 }, () => session());
      const sent = new Map<number, NtsClientSession | undefined>();
      for (let i = 0; i < 18; i++) {
        const seq = burst * 100 + i;
        // Every third a plain request between the NTS ones.
        const s = i % 3 === 2 ? undefined : sessions[i - Math.floor(i / 3)];
        sent.set(seq, s);
        sock.send(s ? s.wrap(header(seq))! : header(seq), port, '127.0.0.1');
      }
      for (let k = 0; k < 18; k++) {
        const reply = await next();
        assert.ok(reply, `burst ${burst}: reply ${k} of 18`);
        const seq = reply.readUInt32BE(28);
        assert.ok(sent.has(seq), `burst ${burst}: a reply to a request sent (${seq})`);
        const s = sent.get(seq);
        sent.delete(seq);
        if (s === undefined) assert.equal(reply.length, 48, 'a plain reply to a plain request');
        else assert.equal(s.unwrap(reply).kind, 'authentic', `burst ${burst}: ${seq}`);
      }
      assert.equal(sent.size, 0);
    }
    assert.equal(forwarded() - f0, 0, 'none went to JavaScript');
    const largest = server.batchStats.largest;
    assert.ok(largest >= 5, `the bursts made batches of several datagrams (largest ${largest})`);
  } finally {
    sock.close();
  }
});

test('a tampered authenticator goes to JavaScript, which answers NTSN; a cookie under an unknown key too', async () => {
  const s = session();
  const { sock, next } = await client();
  try {
    const f0 = forwarded();
    const bad0 = responder.counters.failures.bad_auth;
    const req = s.wrap(header(7))!;
    const last = req.length - 1;
    req[last] = (req[last] ?? 0) ^ 0x01; // inside the authenticator's tag
    sock.send(req, port, '127.0.0.1');
    const nak = await next();
    assert.ok(nak);
    assert.equal(refIdToAscii(nak.readUInt32BE(12)), 'NTSN');
    assert.equal(forwarded() - f0, 1);
    assert.equal(responder.counters.failures.bad_auth - bad0, 1, 'decided and counted once, in JavaScript');

    // A cookie under a key id from the future (unknown to both sides): NTSN, decided in JavaScript.
    const cookie0 = responder.counters.failures.bad_cookie;
    const keys = { aead: AEAD_AES_SIV_CMAC_256, c2s: randomBytes(32), s2c: randomBytes(32) };
    const future = jar.seal(keys);
    future.writeUInt32BE(jar.currentKeyId() + 5, 0);
    const t = new NtsClientSession(keys, [future]);
    sock.send(t.wrap(header(8))!, port, '127.0.0.1');
    const nak2 = await next();
    assert.ok(nak2);
    assert.equal(refIdToAscii(nak2.readUInt32BE(12)), 'NTSN');
    assert.equal(t.unwrap(nak2).kind, 'nak');
    assert.equal(responder.counters.failures.bad_cookie - cookie0, 1);
    assert.equal(forwarded() - f0, 2);
  } finally {
    sock.close();
  }
});

test('an authenticator whose length lies goes to JavaScript and is dropped like other malformed NTS requests', async () => {
  const s = session();
  const { sock, next } = await client();
  try {
    const f0 = forwarded();
    const d0 = responder.counters.droppedBy.malformed;
    const req = s.wrap(header(9))!;
    let at = 48;
    while (req.readUInt16BE(at) !== 0x0404) at += req.readUInt16BE(at + 2);
    req.writeUInt16BE(0xfff0, at + 6); // the ciphertext length runs past the field
    sock.send(req, port, '127.0.0.1');
    assert.equal(await next(1500), undefined, 'no reply: neither a plain one nor a kiss');
    assert.equal(forwarded() - f0, 1, 'not answered as plain NTP on the native thread');
    assert.equal(responder.counters.droppedBy.malformed - d0, 1, 'dropped as malformed, in JavaScript');
  } finally {
    sock.close();
  }
});

test('a key rotation: cookies under the new key are answered, and the native thread takes the new key over', async () => {
  // The jar's day turns over; the native thread still holds yesterday's keys until the server hands it
  // the new set (its timer, armed for the rotation when the keys were handed over).
  jarNow += 500;
  const s = session(); // cookies sealed under the new key
  const { sock, next } = await client();
  try {
    const f0 = forwarded();
    let req = s.wrap(header(20))!;
    sock.send(req, port, '127.0.0.1');
    let reply = await next();
    assert.ok(reply);
    const first = s.unwrap(reply);
    assert.equal(first.kind, 'authentic');
    // Answered either way; which side answered depends on whether the timer has run yet. Wait until the
    // native thread answers one (the timer fires within about a second of the rotation).
    let native = false;
    for (let i = 0; i < 40 && !native; i++) {
      const before = forwarded();
      req = s.wrap(header(21 + i))!;
      sock.send(req, port, '127.0.0.1');
      reply = await next();
      assert.ok(reply);
      assert.equal(s.unwrap(reply).kind, 'authentic');
      native = forwarded() === before;
      if (!native) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(native, 'the native thread took over the new key');
    assert.equal(jar.currentKeyId(), Math.floor(jarNow / PERIOD_MS));
    assert.ok(forwarded() - f0 <= 40, 'only until then did JavaScript answer');
  } finally {
    sock.close();
  }
});

test('a stuck JavaScript thread: the ring to it is bounded (overload counted), plain requests still answered', async () => {
  const { sock, next } = await client();
  const plain = await client();
  try {
    const o0 = server.counters.dropped.overload;
    // NTS requests with a bad authenticator all go to JavaScript; 700 exceed the ring (512).
    const bad: Buffer[] = [];
    const sessions = Array.from({ length: 100 }, () => session());
    for (const ss of sessions) {
      for (let k = 0; k < 7; k++) {
        const r = ss.wrap(header(1000 + k))!;
        r[r.length - 1] = (r[r.length - 1] ?? 0) ^ 0x01;
        bad.push(r);
      }
    }
    assert.ok(bad.length > 600);
    // Sent by a child process while this thread is stuck in spawnSync (its event loop cannot run, so it
    // cannot take anything from the ring); the native thread keeps reading the socket meanwhile.
    const bad0 = responder.counters.failures.bad_auth;
    const payload = Buffer.concat(
      bad.flatMap((b) => {
        const n = Buffer.alloc(2);
        n.writeUInt16BE(b.length);
        return [n, b];
      }),
    );
    const sender = `
      const s = require('node:dgram').createSocket('udp4');
      const buf = require('node:fs').readFileSync(0);
      const list = [];
      for (let at = 0; at < buf.length; at += 2 + buf.readUInt16BE(at)) list.push(buf.subarray(at + 2, at + 2 + buf.readUInt16BE(at)));
      s.bind(0, '127.0.0.1', () => {
        let sent = 0;
        for (const m of list) s.send(m, ${port}, '127.0.0.1', () => { if (++sent === list.length) setTimeout(() => process.exit(0), 300); });
      });`;
    const child = spawnSync(process.execPath, ['-e', sender], {
      input: payload,
      env: { ...process.env, NODE_OPTIONS: '' },
      timeout: 30_000,
    });
    assert.equal(child.status, 0, child.stderr.toString());
    const overflow = server.counters.dropped.overload - o0;
    assert.ok(overflow >= bad.length - 512, `${overflow} dropped at the full ring (512 queued at most)`);
    // Plain requests are answered throughout.
    plain.sock.send(header(5), port, '127.0.0.1');
    const r = await plain.next();
    assert.ok(r, 'plain reply');
    assert.equal(r[1], 2, 'stratum');
    // JavaScript then answers what the ring held (an NTSN each, to the child's gone socket): at most 512.
    await waitFor(() => responder.counters.failures.bad_auth - bad0 >= bad.length - overflow, {
      timeoutMs: 10_000,
      what: 'the queued requests decided in JavaScript',
    });
    assert.equal(responder.counters.failures.bad_auth - bad0 + overflow, bad.length, 'each counted once');
    // The server still answers NTS afterwards.
    const good = session();
    sock.send(good.wrap(header(9000))!, port, '127.0.0.1');
    const reply = await next();
    assert.ok(reply, 'an authentic reply after the flood');
    assert.equal(good.unwrap(reply).kind, 'authentic');
  } finally {
    sock.close();
    plain.sock.close();
  }
});
