import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { ntsKeyExchange } from '../../src/io/nts-ke-client.ts';
import { NtsPeerSecurity } from '../../src/io/nts-peer.ts';
import { MODE } from '../../src/protocol/ntp-packet.ts';
import { ntsServiceFixture } from '../helpers/nts-fixture.ts';
import { localNtsPeerSecurity, udpExchange } from '../helpers/nts.ts';

const fx = ntsServiceFixture('timesvc-nts-peer-');

function request(): Buffer {
  const h = Buffer.alloc(48);
  h[0] = (4 << 3) | MODE.CLIENT;
  h.writeUInt32BE(Math.floor(Math.random() * 2 ** 32), 44);
  return h;
}

const exchange = (packet: Buffer): Promise<Buffer | undefined> => udpExchange(packet, fx.ntpPort);

test('NTS peer: an NTSN (cookies the server cannot open) leads to a new NTS-KE and authentic replies', async () => {
  let calls = 0;
  const foreign = new NtsCookieJar({ now: Date.now });
  const security = new NtsPeerSecurity({
    host: '127.0.0.1',
    kePort: fx.kePort,
    caFile: fx.cert,
    logger: silentLogger(),
    now: () => performance.now(),
    minBackoffMs: 0,
    exchange: async (o) => {
      calls++;
      const ke = await ntsKeyExchange(o);
      // First exchange: the right keys but cookies sealed by another server's key, as after a server
      // lost its cookie key.
      return calls === 1
        ? { ...ke, cookies: ke.cookies.map(() => foreign.seal({ aead: 15, c2s: ke.c2s, s2c: ke.s2c })) }
        : ke;
    },
  });
  assert.equal(await security.ready(), true);
  assert.deepEqual(security.target, { host: '127.0.0.1', port: fx.ntpPort });
  const first = security.wrap(request());
  assert.ok(first);
  assert.equal(security.unwrap((await exchange(first))!), undefined, 'NTSN is not a time sample');
  assert.equal(security.status().naks, 1);
  assert.equal(await security.ready(), true);
  assert.equal(calls, 2, 're-keyed after NTSN');
  const second = security.wrap(request())!;
  const header = security.unwrap((await exchange(second))!);
  assert.ok(header);
  assert.equal(header.length, 48);
  assert.equal(security.status().authenticated, 1);
});

test('NTS peer: when the cookies run out (lost replies) the next poll re-keys; KE failures back off', async () => {
  let now = 0;
  let calls = 0;
  let fail = false;
  const security = new NtsPeerSecurity({
    host: '127.0.0.1',
    kePort: fx.kePort,
    caFile: fx.cert,
    logger: silentLogger(),
    now: () => now,
    minBackoffMs: 1000,
    exchange: async (o) => {
      calls++;
      if (fail) throw new Error('connection refused');
      return ntsKeyExchange(o);
    },
  });
  assert.equal(await security.ready(), true);
  for (let i = 0; i < 8; i++) assert.ok(security.wrap(request()), `cookie ${i}`);
  assert.equal(security.wrap(request()), undefined, 'jar empty');
  now += 1000;
  assert.equal(await security.ready(), true);
  assert.equal(calls, 2);
  // A failing NTS-KE is retried only after the back-off, which doubles.
  for (let i = 0; i < 9; i++) security.wrap(request());
  fail = true;
  now += 1000;
  assert.equal(await security.ready(), false);
  assert.equal(await security.ready(), false, 'no immediate retry');
  assert.equal(calls, 3);
  now += 1000;
  assert.equal(await security.ready(), false);
  assert.equal(calls, 4);
  now += 1000;
  assert.equal(await security.ready(), false, 'back-off doubled to 2 s');
  assert.equal(calls, 4);
  fail = false;
  now += 1000;
  assert.equal(await security.ready(), true);
  assert.equal(security.status().keFailures, 2);
});

test('NTS peer: plain or forged replies never reach the clock filter', async () => {
  const security = localNtsPeerSecurity(fx.kePort, fx.cert);
  assert.equal(await security.ready(), true);
  const req = security.wrap(request())!;
  const genuine = (await exchange(req))!;
  // A plain (unauthenticated) server reply with the right origin timestamp.
  const plain = Buffer.from(genuine.subarray(0, 48));
  assert.equal(security.unwrap(plain), undefined);
  // The genuine reply with one ciphertext bit flipped.
  const forged = Buffer.from(genuine);
  forged[forged.length - 1] = (forged[forged.length - 1] ?? 0) ^ 1;
  assert.equal(security.unwrap(forged), undefined);
  // A spoofed NTSN without our UID is ignored too (no re-keying on an attacker's word).
  const ntsn = Buffer.alloc(48);
  ntsn[0] = 0xe4;
  ntsn.write('NTSN', 12, 'latin1');
  assert.equal(security.unwrap(ntsn), undefined);
  assert.equal(security.status().naks, 0);
  assert.equal(security.status().rejected, 3);
  // The genuine reply still authenticates.
  assert.equal(security.unwrap(genuine)?.length, 48);
  assert.equal(security.status().authenticated, 1);
});
