// Hostile Ember+ consumers against the whole service through real sockets: every input goes on its own
// connection; afterwards /health answers within 1 s, a fresh consumer (emberplus-connection's client, an
// independent implementation) reads Info/Version, and TSL packets keep arriving. Then fast-check over
// framed random input against the running provider (the decoders alone: test/protocol/ember-glow.test.ts).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { EmberClient, Model } from 'emberplus-connection';
import { encodeEmberFrames } from '../../src/protocol/s101.ts';
import { VERSION } from '../../src/version.ts';
import { glowPayload, hex } from '../ember-glow.ts';
import { startRig, udpReceiver, until, type Rig } from '../outputs/helpers.ts';

let rig: Rig;
let tsl: Awaited<ReturnType<typeof udpReceiver>>;

before(async () => {
  tsl = await udpReceiver();
  rig = await startRig(
    2,
    { tslUmdDestinations: [{ host: '127.0.0.1', port: tsl.port }] },
    { tslRefreshMs: 50 },
  );
});

after(async () => {
  await rig?.close();
  await tsl?.close();
});

/** Send raw bytes on a new connection; resolves when the provider closed it or after `waitMs`. */
async function sendRaw(bytes: Buffer, waitMs = 300): Promise<'closed' | 'open'> {
  const socket = connect({ host: '127.0.0.1', port: rig.emberPort });
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const closed = new Promise<'closed'>((resolve) => socket.once('close', () => resolve('closed')));
  socket.write(bytes);
  const result = await Promise.race([
    closed,
    new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), waitMs)),
  ]);
  socket.destroy();
  return result;
}

async function healthWithin1s(): Promise<void> {
  const t0 = performance.now();
  const res = await fetch(`${rig.url}/health`, { signal: AbortSignal.timeout(1000) });
  assert.equal(res.status, 200);
  await res.json();
  assert.ok(performance.now() - t0 < 1000, '/health within 1 s');
}

async function freshConsumerReadsVersion(): Promise<void> {
  const client = new EmberClient('127.0.0.1', rig.emberPort);
  client.on('error', () => undefined);
  try {
    const err = await client.connect();
    assert.equal(err, undefined, `connect: ${String(err)}`);
    await (
      await client.getDirectory(client.tree)
    ).response;
    const version = await client.getElementByPath('Info.Version');
    assert.ok(version, 'Info.Version found');
    assert.equal((version.contents as Model.Parameter).value, VERSION);
  } finally {
    await client.disconnect();
    client.discard();
  }
}

async function tslKeepsArriving(): Promise<void> {
  const n = tsl.packets.length;
  await until(() => tsl.packets.length > n + 2 || undefined, 2000, 'more TSL packets');
}

// The 20-byte frame of the report: valid S101 header and CRC, a Glow Root declaring 16 bytes where 5
// follow (emberplus-connection 0.3.1's decoder loops on it forever, allocating).
const REPORTED_FRAME = hex('fe 00 0e 00 01 c0 01 02 1f 02 60 10 6b 0e a0 0c 62 7c 9d ff');

// Every length in it is nested properly, but the REAL value has a zero significand: emberplus-connection
// 0.3.1's readReal shifts zero left forever (measured: berDecode never returns). A valid set request for
// Info/Version, so the provider must answer it, not hang and not drop.
const ZERO_REAL_SET = encodeEmberFrames(hex('60176b15a0136911a0040d020101a1093107a2050903800000'));

const HOSTILE: [string, Buffer, 'closed' | 'answered'][] = [
  ['the reported 20-byte frame', REPORTED_FRAME, 'closed'],
  ['REAL with a zero significand in a set request', ZERO_REAL_SET, 'answered'],
  [
    'indefinite length never terminated',
    encodeEmberFrames(hex('60 80 6b 80 a0 80 62 80 a0 03 02 01 20')),
    'closed',
  ],
  [
    'indefinite length on a primitive',
    encodeEmberFrames(hex('60 80 6b 80 a0 80 62 80 a0 80 02 80 20 00 00')),
    'closed',
  ],
  ['four-byte length of 4 GiB - 1', encodeEmberFrames(hex('60 84 ff ff ff ff 6b 00')), 'closed'],
  ['nine length bytes', encodeEmberFrames(hex('60 89 00 00 00 00 00 00 00 00 05 6b 00')), 'closed'],
  ['length byte 0xff (reserved)', encodeEmberFrames(hex('60 ff 6b 00')), 'closed'],
  ['child longer than its parent', encodeEmberFrames(hex('60 04 6b 7f a0 00')), 'closed'],
  ['nesting 2000 deep (indefinite)', encodeEmberFrames(Buffer.from('6080'.repeat(2000), 'hex')), 'closed'],
  ['tag number of 6 bytes', encodeEmberFrames(hex('7f ff ff ff ff ff 7f 00')), 'closed'],
  ['bad CRC', hex('fe 00 0e 00 01 c0 01 02 1f 02 60 00 00 00 ff'), 'closed'],
  ['bytes outside any frame', hex('00 01 02 03'), 'closed'],
  ['a frame over 64 KiB without EOF', Buffer.concat([hex('fe'), Buffer.alloc(70 * 1024, 0x11)]), 'closed'],
  ['unknown S101 command', hex('fe 00 0e 07 01 00 00 ff'), 'closed'],
];
// Truncated Glow for every application tag: the element declares 16 bytes, 5 follow.
for (let tag = 0; tag <= 31; tag++) {
  const first = tag < 31 ? Buffer.from([0x60 | tag]) : Buffer.from([0x7f, 31]);
  const truncated = Buffer.concat([first, hex('10 a0 03 02 01 20')]);
  HOSTILE.push([
    `truncated Glow APPLICATION ${tag}`,
    encodeEmberFrames(Buffer.concat([hex('60 0c 6b 0a a0 08'), truncated])),
    'closed',
  ]);
}

test('hostile frames: each closes only its own connection; /health, a fresh consumer and TSL carry on', async () => {
  const droppedBefore = rig.service.health().protocols.emberPlus.droppedConsumers?.['malformed'] ?? 0;
  let closedCount = 0;
  for (const [what, bytes, expected] of HOSTILE) {
    const rssBefore = process.memoryUsage().rss;
    const outcome = await sendRaw(bytes, expected === 'closed' ? 2000 : 300);
    if (expected === 'closed') {
      assert.equal(outcome, 'closed', `${what}: the provider disconnects the consumer`);
      closedCount++;
    } else assert.equal(outcome, 'open', `${what}: a valid request keeps the connection`);
    await healthWithin1s();
    await freshConsumerReadsVersion();
    await tslKeepsArriving();
    const grown = process.memoryUsage().rss - rssBefore;
    assert.ok(grown < 64 * 1024 * 1024, `${what}: RSS grew by ${grown} bytes`);
  }
  const dropped = rig.service.health().protocols.emberPlus.droppedConsumers?.['malformed'] ?? 0;
  assert.equal(dropped - droppedBefore, closedCount, 'each malformed consumer is counted');
});

test('the zero-significand set is answered with the unchanged Version value', async () => {
  const socket = connect({ host: '127.0.0.1', port: rig.emberPort });
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (d: Buffer) => chunks.push(d));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(ZERO_REAL_SET);
  await until(() => Buffer.concat(chunks).includes(Buffer.from(VERSION)) || undefined, 2000, 'the answer');
  socket.destroy();
});

// ---- fast-check ----

test('fast-check through the socket: random framed input never stalls the service', async () => {
  await fc.assert(
    fc.asyncProperty(glowPayload, async (payload) => {
      await sendRaw(encodeEmberFrames(payload), 30);
      await healthWithin1s();
    }),
    { numRuns: 150, timeout: 5000 },
  );
  await freshConsumerReadsVersion();
  await tslKeepsArriving();
});
