import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { ephemeralPortRange, freePort } from '../../src/testing/index.ts';

const listen = async (port: number) => {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(port, '127.0.0.1', r));
  return () => new Promise<void>((r) => srv.close(() => r()));
};
const bindUdp = async (port: number) => {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(port, '127.0.0.1', r));
  return () => new Promise<void>((r) => s.close(r));
};

test('freePort picks below the ephemeral range by default', async () => {
  const [lo] = ephemeralPortRange();
  for (const kind of ['tcp', 'udp', 'both'] as const) {
    const p = await freePort(kind);
    assert.ok(p >= 10_000 && p < lo, `${kind} ${p} outside [10000, ${lo})`);
  }
});

test('freePort never returns a port taken for the kind asked; all taken: a clear error', async () => {
  const x = await freePort('both');
  // Two candidates, the first taken over TCP: always the second for tcp and both, either for udp.
  const closeTcp = await listen(x);
  try {
    for (let i = 0; i < 20; i++) {
      assert.equal(await freePort('tcp', [x, x + 2]).catch(() => x + 1), x + 1);
      assert.equal(await freePort('both', [x, x + 2]).catch(() => x + 1), x + 1);
    }
    await assert.rejects(freePort('tcp', [x, x + 1]), /no free tcp port on 127\.0\.0\.1 between/);
  } finally {
    await closeTcp();
  }
  const closeUdp = await bindUdp(x);
  try {
    await assert.rejects(freePort('udp', [x, x + 1]), /no free udp port/);
    await assert.rejects(freePort('both', [x, x + 1]), /no free both port/);
    assert.equal(await freePort('tcp', [x, x + 1]), x);
  } finally {
    await closeUdp();
  }
});

test('ephemeralPortRange reads the kernel setting (Linux) as two ordered ports', () => {
  const [lo, hi] = ephemeralPortRange();
  assert.ok(Number.isInteger(lo) && Number.isInteger(hi) && lo > 1024 && hi > lo && hi <= 65535);
});
