/**
 * Bench: tally latency from a vMix change to the far end. A vMix simulator speaking the TCP API cuts between
 * two inputs N times; for each cut we time, from the simulator's change (its `TALLY OK` push) to:
 *   - a punch peer (a WebSocket registered on the mapped stream of a real punch broker) receiving `tally`
 *     with the new state: vMix → monitor → broker → peer;
 *   - beside it, in the same run, the monitor's own TSL UMD v5.0 datagram for the mapped input's index
 *     (the anchor: the same input leg, no broker hop).
 * Target: punch peer p99 < 100 ms with the TCP API (docs/TALLY.md). Everything runs in this process on
 * loopback (one monotonic clock; the broker, the monitor and the peers share the event loop, so the figures
 * include that contention). The load average is printed beside the figures, because the machine may be shared.
 *
 * Run: npx tsx --conditions=source bench/tally-latency/run.ts [--changes 200] [--spacing-ms 150]
 */
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import { silentLogger } from '@broadcast-ops/core';
import { configSchema } from '@broadcast-ops/playout-monitor';
import { VmixSimulator } from '@broadcast-ops/simulators/playout';
import { PlayoutService, startPunchBroker } from '@broadcast-ops/playout-monitor/testing';

const { values } = parseArgs({ options: { changes: { type: 'string' }, 'spacing-ms': { type: 'string' } } });
const CHANGES = Math.max(20, Number(values.changes ?? 200));
const SPACING_MS = Math.max(20, Number(values['spacing-ms'] ?? 150));
const TARGET_PUNCH_P99_MS = 100;
const RED = 0xc5;
const GREEN = 0xca;

const dir = mkdtempSync(join(tmpdir(), 'tally-latency-'));
const { broker, url: brokerUrl } = await startPunchBroker(dir);
async function post(path: string, body: unknown, token?: string): Promise<string> {
  const res = await fetch(brokerUrl + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}
const admin = await post('/api/session', { name: 'bench', streams: ['cam1'] });
const peerToken = await post('/api/session/bench/token', { stream: 'cam1' }, admin);

// The far end: a peer of stream cam1.
let waitingPeer: { state: string; resolve: (t: number) => void } | undefined;
const peer = new WebSocket(`${brokerUrl.replace(/^http/, 'ws')}/api/ws/bench`, {
  headers: { authorization: `Bearer ${peerToken}` },
});
peer.on('message', (raw: Buffer) => {
  const at = performance.now();
  const m = JSON.parse(raw.toString()) as { type: string; state?: string };
  if (m.type === 'tally' && waitingPeer && m.state === waitingPeer.state) {
    waitingPeer.resolve(at);
    waitingPeer = undefined;
  }
});
await new Promise((r) => peer.once('open', r));
peer.send(JSON.stringify({ type: 'register', stream: 'cam1', port: 9000 }));

// The anchor: a TSL UMD receiver.
let waitingTsl: { control: number; resolve: (t: number) => void } | undefined;
const udp = createSocket('udp4');
udp.on('message', (b: Buffer) => {
  const at = performance.now();
  for (let off = 6; off + 6 <= b.length;) {
    const index = b.readUInt16LE(off);
    const control = b.readUInt16LE(off + 2);
    if (index === 101 && waitingTsl && control === waitingTsl.control) {
      waitingTsl.resolve(at);
      waitingTsl = undefined;
    }
    off += 6 + b.readUInt16LE(off + 4);
  }
});
await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));

const sim = new VmixSimulator({ tcpPort: 0 });
const port = await sim.start();
const service = new PlayoutService({
  config: configSchema.parse({
    settings: {
      webSocketPort: 0,
      emberPlusPort: 0,
      bindAddress: '127.0.0.1',
      tslUmdDestinations: [{ host: '127.0.0.1', port: udp.address().port }],
      punchTally: [
        {
          brokerUrl,
          session: 'bench',
          adminToken: admin,
          inputs: [{ device: 1, key: sim.keyOf(1), stream: 'cam1' }],
        },
      ],
    },
    servers: [
      {
        id: 1,
        name: 'vMix',
        type: 'http_mixer',
        ip: '127.0.0.1',
        port,
        tcpPort: sim.tcpPort,
        pollIntervalMs: 250,
        tallyInputs: [{ key: sim.keyOf(1), tslIndex: 101 }],
      },
    ],
  }),
  logger: silentLogger(),
});
await service.start({ http: 0, ember: 0 });
await new Promise((r) => setTimeout(r, 1000)); // the TCP link and the punch link up

const withTimeout = (p: Promise<number>): Promise<number | undefined> =>
  Promise.race([p, new Promise<undefined>((r) => setTimeout(() => r(undefined), 2000))]);
const punchMs: number[] = [];
const tslMs: number[] = [];
let lost = 0;
for (let i = 0; i < CHANGES; i++) {
  // Input 1 alternates program (cut to 1) and preview (cut to 2: vMix's Cut swaps program to preview).
  const toProgram = i % 2 === 1; // input 1 starts on program: the first cut takes it to preview
  const p = new Promise<number>(
    (resolve) => (waitingPeer = { state: toProgram ? 'program' : 'preview', resolve }),
  );
  const t = new Promise<number>((resolve) => (waitingTsl = { control: toProgram ? RED : GREEN, resolve }));
  const t0 = performance.now();
  sim.cut(toProgram ? 1 : 2);
  const [pa, ta] = await Promise.all([withTimeout(p), withTimeout(t)]);
  if (pa === undefined || ta === undefined) lost++;
  if (pa !== undefined) punchMs.push(pa - t0);
  if (ta !== undefined) tslMs.push(ta - t0);
  await new Promise((r) => setTimeout(r, SPACING_MS));
}

const pct = (l: number[], q: number): number => {
  const s = [...l].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((q / 100) * s.length))] ?? NaN;
};
console.log(
  `tally latency, ${CHANGES} cuts ${SPACING_MS} ms apart, loopback, load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
console.log('path                                   samples   p50 ms   p99 ms   max ms   target p99');
for (const [name, l, target] of [
  ['vMix TCP -> monitor -> punch -> peer', punchMs, `< ${TARGET_PUNCH_P99_MS} ms`],
  ['vMix TCP -> monitor -> TSL (anchor)', tslMs, 'reference'],
] as const) {
  console.log(
    `${name.padEnd(38)} ${String(l.length).padStart(7)} ${pct(l, 50).toFixed(2).padStart(8)} ${pct(l, 99).toFixed(2).padStart(8)} ${Math.max(
      ...l,
    )
      .toFixed(2)
      .padStart(8)}   ${target}`,
  );
}
if (lost > 0) console.log(`${lost} cuts not seen within 2 s on one path`);
const met = pct(punchMs, 99) < TARGET_PUNCH_P99_MS && lost === 0;
console.log(met ? 'target met' : 'target MISSED');

peer.close();
await service.close();
await sim.close();
udp.close();
await broker.close();
rmSync(dir, { recursive: true, force: true });
process.exit(met ? 0 : 1);
