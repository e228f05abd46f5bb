/**
 * bench/punch-relay: the opaque SRT relay (packages/punch/src/io/relay/udp-relay.ts, run by
 * packages/punch/test/fixtures/relay-run.ts in a process of its own) against its anchor, a plain UDP forward
 * with no checks (plain-forward.mjs, also a Node process), in the same run on loopback:
 * - throughput: 1316-byte datagrams (7 TS packets, as SRT carries them) offered at rising rates for a few
 *   seconds each; the figure is the highest rate delivered with less than 0.1 % loss (packets/s and Mbit/s);
 * - added latency: one-way time through the forwarder at a live-video rate (2,000 datagrams/s, about
 *   21 Mbit/s), minus the same path without a forwarder, p50 and p99.
 * The load generator and the receiver share this process, so both forwarders are measured with the same
 * handicap; the machine's load average is printed with the figures.
 *
 * Usage: npx tsx --conditions=source bench/punch-relay/run.ts [--seconds 2] [--rates 5000,7500,10000,...]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '2' },
    rates: { type: 'string', default: '5000,7500,10000,15000,20000,30000,40000,60000,80000' },
  },
});
const SECONDS = Number(values.seconds);
const RATES = values.rates.split(',').map(Number);
const SIZE = 1316;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function bound(address = '127.0.0.1'): Promise<Socket> {
  const s = createSocket({ type: 'udp4', recvBufferSize: 8 * 1024 * 1024, sendBufferSize: 4 * 1024 * 1024 });
  await new Promise<void>((r) => s.bind(0, address, r));
  return s;
}

function child(args: string[]): { proc: ChildProcess; line: Promise<string>; last: () => string } {
  const proc = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  let buf = '';
  const line = new Promise<string>((resolve) => {
    proc.stdout?.on('data', (d: Buffer) => {
      buf = (buf + d.toString()).slice(-4096);
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(buf.slice(0, nl));
    });
  });
  const last = () => buf.trimEnd().split('\n').pop() ?? '';
  return { proc, line, last };
}

interface Path {
  name: string;
  /** Where the sender sends. */
  port: number;
  /** The forwarder's own report, if it has one. */
  report: () => string;
  stop: () => void;
}

async function relayPath(rx: Socket): Promise<Path> {
  const { proc, line, last } = child([
    ...['--conditions=source', '--import', 'tsx', 'packages/punch/test/fixtures/relay-run.ts'],
    ...['127.0.0.1', '127.0.0.1', '127.0.0.1', '1000000000', '127.0.0.0/8'],
  ]);
  const { ports } = JSON.parse(await line) as { ports: [number, number] };
  // The receiver latches side 1 first.
  rx.send(Buffer.from('latch'), ports[1], '127.0.0.1');
  await sleep(200);
  return { name: 'relay', port: ports[0], report: last, stop: () => proc.kill('SIGTERM') };
}

async function plainPath(rx: Socket): Promise<Path> {
  const { proc, line } = child([
    'bench/punch-relay/plain-forward.mjs',
    '127.0.0.1',
    String(rx.address().port),
  ]);
  const { port } = JSON.parse(await line) as { port: number };
  return { name: 'plain forward (anchor)', port, report: () => '', stop: () => proc.kill('SIGTERM') };
}

/** Offers `rate` datagrams/s for `seconds` through `port`; returns delivered count and one-way delays (µs). */
async function offer(tx: Socket, rx: Socket, port: number, rate: number, seconds: number) {
  let received = 0;
  const run = Math.floor(Math.random() * 1e9);
  const delays: number[] = [];
  const onMessage = (m: Buffer) => {
    if (m.length !== SIZE || m.readUInt32BE(0) !== run) return;
    received++;
    if (delays.length < 200_000) delays.push(Number(process.hrtime.bigint() - m.readBigUInt64BE(4)) / 1000);
  };
  rx.on('message', onMessage);
  const payload = Buffer.alloc(SIZE, 0x5a);
  payload.writeUInt32BE(run, 0);
  const total = Math.round(rate * seconds);
  const start = performance.now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
    while (sent < due) {
      payload.writeBigUInt64BE(process.hrtime.bigint(), 4);
      tx.send(payload, port, '127.0.0.1');
      sent++;
    }
    await new Promise((r) => setImmediate(r));
  }
  await sleep(300);
  rx.off('message', onMessage);
  delays.sort((a, b) => a - b);
  const pct = (p: number) => delays[Math.min(delays.length - 1, Math.floor(p * delays.length))] ?? NaN;
  return { loss: 1 - received / total, p50: pct(0.5), p99: pct(0.99), delays };
}

const load = loadavg();
console.log(
  `punch-relay bench: ${cpus().length} CPUs, load average ${load.map((l) => l.toFixed(2)).join(' ')} at start, ` +
    `${SECONDS} s per rate, ${SIZE}-byte datagrams`,
);
const tx = await bound();
const rx = await bound();

const paths = [await plainPath(rx), await relayPath(rx)];
const directPath: Path = { name: 'direct', port: rx.address().port, report: () => '', stop: () => {} };
try {
  // Added latency: rounds of direct, anchor and relay interleaved at 2,000 datagrams/s; the first round
  // warms up (JIT, socket buffers) and is not counted.
  const pooled = new Map<string, number[]>();
  for (let round = 0; round < 6; round++) {
    for (const path of [directPath, ...paths]) {
      const r = await offer(tx, rx, path.port, 2000, 1);
      if (round > 0) pooled.set(path.name, [...(pooled.get(path.name) ?? []), ...r.delays]);
    }
  }
  const pct = (name: string, p: number) => {
    const d = (pooled.get(name) ?? []).sort((a, b) => a - b);
    return d[Math.min(d.length - 1, Math.floor(p * d.length))] ?? NaN;
  };
  // Throughput: each rate offered to the anchor and the relay in turn; a path stops at its first rate with
  // 0.1 % loss or more (best of three tries, so one burst of a neighbour's load does not end it).
  const best = new Map<string, number>();
  const steps = new Map<string, string[]>();
  const done = new Set<string>();
  for (const rate of RATES) {
    for (const path of paths) {
      if (done.has(path.name)) continue;
      let r = await offer(tx, rx, path.port, rate, SECONDS);
      for (let retry = 0; retry < 2 && r.loss >= 0.001; retry++)
        r = await offer(tx, rx, path.port, rate, SECONDS);
      steps.set(path.name, [...(steps.get(path.name) ?? []), `${rate}:${(r.loss * 100).toFixed(2)}%`]);
      if (r.loss < 0.001) best.set(path.name, rate);
      else done.add(path.name);
    }
  }
  console.log(
    `direct (no forwarder)   one-way p50 ${pct('direct', 0.5).toFixed(0)} µs, p99 ${pct('direct', 0.99).toFixed(0)} µs`,
  );
  for (const path of paths) {
    const b = best.get(path.name) ?? 0;
    console.log(
      `${path.name.padEnd(22)}  ${String(b).padStart(6)} packets/s ${((b * SIZE * 8) / 1e6).toFixed(0).padStart(4)} Mbit/s at < 0.1 % loss` +
        `   added one-way latency p50 ${(pct(path.name, 0.5) - pct('direct', 0.5)).toFixed(0)} µs,` +
        ` p99 ${(pct(path.name, 0.99) - pct('direct', 0.99)).toFixed(0)} µs   [${(steps.get(path.name) ?? []).join(' ')}]`,
    );
  }
  const [anchor, relay] = paths.map((p) => best.get(p.name) ?? 0);
  if (anchor && relay !== undefined) console.log(`relay / anchor throughput: ${(relay / anchor).toFixed(2)}`);
  console.log(`relay counters: ${paths[1]?.report()}`);
} finally {
  for (const p of paths) p.stop();
  tx.close();
  rx.close();
}
// The per-datagram CPU cost of the relay's SRT path meter beside its anchor, the admission check every
// datagram already goes through (packages/punch/test/fixtures/meter-cost.ts, a process of its own).
{
  const { proc, line } = child([
    ...['--conditions=source', '--import', 'tsx', 'packages/punch/test/fixtures/meter-cost.ts'],
  ]);
  console.log(await line);
  await new Promise((r) => proc.once('exit', r));
}
console.log(
  `load average at end: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
