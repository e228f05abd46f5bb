import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:tls';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir, timingBound } from '@broadcast-ops/core/testing';
import { NtsCookieJar } from '../../src/domain/nts-cookies.ts';
import { ntsKeyExchange } from '../../src/io/nts-ke-client.ts';
import { NtsKeServer } from '../../src/io/nts-ke-server.ts';
import { RECORD, encodeRecords, scanRecords } from '../../src/protocol/nts-ke.ts';
import { makeCertificate } from '../helpers/nts.ts';

test('NTS-KE bounds: an idle client is cut at the time bound, an oversized request gets Error 1, others are served', async () => {
  const dir = tempDir('timesvc-nts-bounds-');
  const pair = makeCertificate(dir.path);
  const ke = new NtsKeServer({
    port: 0,
    host: '127.0.0.1',
    certPath: pair.cert,
    keyPath: pair.key,
    cookies: new NtsCookieJar({ now: Date.now }),
    ntpPort: () => 123,
    logger: silentLogger(),
    timeoutMs: 400,
    watchIntervalMs: 0,
  });
  await ke.start();
  const ca = readFileSync(pair.cert);
  try {
    // Idle: completes the handshake, then sends nothing.
    const idleClosed = new Promise<number>((resolve) => {
      const started = Date.now();
      const s = connect({ host: '127.0.0.1', port: ke.port, ca: [ca], ALPNProtocols: ['ntske/1'] });
      s.on('error', () => undefined);
      s.on('close', () => resolve(Date.now() - started));
    });
    // Meanwhile a good client is served.
    const good = await ntsKeyExchange({ host: '127.0.0.1', port: ke.port, caFile: pair.cert });
    assert.equal(good.cookies.length, 8);
    assert.equal(good.ntpPort, 123, 'no Port record when NTP is on 123');
    const idleMs = await idleClosed;
    assert.ok(
      idleMs >= 300 && idleMs < (await timingBound(5000)),
      `idle connection closed after ${idleMs} ms`,
    );
    // Oversized: a 17 KiB record stream without End of Message.
    const big = encodeRecords([{ critical: false, type: 0x4444, body: Buffer.alloc(17_000) }]);
    const reply = await new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = [];
      const s = connect({ host: '127.0.0.1', port: ke.port, ca: [ca], ALPNProtocols: ['ntske/1'] }, () => {
        s.write(big);
      });
      s.on('data', (d: Buffer) => chunks.push(d));
      s.on('error', () => undefined);
      s.on('close', () => resolve(Buffer.concat(chunks)));
    });
    const scan = scanRecords(reply);
    assert.ok(scan.ok && scan.value.complete);
    if (scan.ok && scan.value.complete) {
      const err = scan.value.records.find((r) => r.type === RECORD.ERROR);
      assert.equal(err && Buffer.from(err.body).readUInt16BE(0), 1);
    }
    assert.equal(ke.counters.failures.timeout, 1);
    assert.equal(ke.counters.failures.too_large, 1);
    assert.equal(ke.counters.success, 1);
  } finally {
    await ke.close();
    dir.remove();
  }
});

test('NTS-KE client: a server that closes without answering fails fast, not at the timeout', async () => {
  const dir = tempDir('timesvc-nts-client-close-');
  const pair = makeCertificate(dir.path);
  const server = createServer(
    { cert: readFileSync(pair.cert), key: readFileSync(pair.key), ALPNProtocols: ['ntske/1'] },
    (s) => {
      s.destroy();
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  try {
    const started = Date.now();
    await assert.rejects(
      ntsKeyExchange({ host: '127.0.0.1', port, caFile: pair.cert, timeoutMs: 10_000 }),
      /closed/,
    );
    assert.ok(Date.now() - started < (await timingBound(5000)));
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
    dir.remove();
  }
});
