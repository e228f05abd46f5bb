/**
 * bench/punch-scale: the broker on one SQLite instance, one Redis instance and two Redis instances, side
 * by side in one run (packages/punch/docs/multi-instance.md), beside a bare `ws` server for memory.
 *
 * For each deployment:
 * 1. Match latency as in bench/punch-ws: N sessions (default 1,000), two peer tokens each; per session
 *    peer A connects and registers, then peer B (on the other instance when there are two); t0 = before
 *    B's `register`, t1 = both got `peer`. Every earlier pair stays connected. p50/p99/max.
 * 2. Idle peers held per instance and RSS (after a full GC, per instance) per idle peer:
 *    (RSS with the peers - RSS before the first connection) / peers held by that instance.
 * 3. Creates per second, measured last (its garbage would blur the memory figures): the pipelined
 *    raw-socket load of bench/punch-http (`--connections` 64 x `--pipelining` 4) for `--seconds` (default
 *    3) after a warm-up second; with two instances the connections alternate between them (the relay
 *    forwards its half to the owner).
 * The bare `ws` server (bench/punch-ws/servers.ts) holds 2N idle connections in the same run: the memory
 * anchor. Targets of the single instance (README "Benchmark"): match p99 < 5 ms; <= 2x bare `ws` memory.
 *
 * A real `redis-server` (Debian's package) runs on a free loopback port with the documented persistence
 * (appendonly yes, appendfsync always), in a temporary directory removed at the end; one more row runs a
 * Redis with `appendfsync everysec`, to show the share of the fsync per write.
 * Usage: npm run bench:punch-scale -- [--sessions 1000] [--seconds 3] [--connections 64] [--pipelining 4]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { json, open, percentile, type Peer } from '../punch-ws/client.ts';
import { startRedis } from '@broadcast-ops/punch/testing';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    pipelining: { type: 'string', default: '4' },
  },
});
const N = Number(values.sessions);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const PIPELINING = Number(values.pipelining);
const here = fileURLToPath(new URL('.', import.meta.url));

interface Child {
  port: number;
  ask<T>(cmd: string): Promise<T>;
  rss(): Promise<number>;
  exit(): Promise<void>;
}

async function start(script: string, args: string[]): Promise<Child> {
  const proc: ChildProcess = fork(script, args, {
    execArgv: ['--import', 'tsx', '--conditions=source', '--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    proc.once('message', (m: { port: number }) => resolve(m.port));
    proc.once('exit', (c) => reject(new Error(`${script} exited with ${c}`)));
  });
  const ask = <T>(cmd: string): Promise<T> =>
    new Promise((resolve) => {
      proc.once('message', (m: T) => resolve(m));
      proc.send({ cmd });
    });
  return {
    port,
    ask,
    rss: async () => (await ask<{ rss: number }>('rss')).rss,
    exit: async () => {
      const done = new Promise((r) => proc.once('exit', r));
      proc.send({ cmd: 'exit' });
      await done;
    },
  };
}

const HEADER_END = Buffer.from('\r\n\r\n');

/** Pipelined HTTP/1.1 creates (as bench/punch-http): 201 answers per second after a warm-up second. */
async function createLoad(ports: number[]): Promise<number> {
  let created = 0;
  let measuring = false;
  let stopping = false;
  let k = 0;
  const sockets: Socket[] = [];
  const done: Promise<void>[] = [];
  for (let c = 0; c < CONNECTIONS; c++) {
    const port = ports[c % ports.length] ?? 0;
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    sockets.push(socket);
    let buf: Buffer = Buffer.alloc(0);
    const send = (): void => {
      const body = JSON.stringify({ name: `c-${c}-${k++}`, ttl: 600 });
      socket.write(
        `POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    };
    socket.on('connect', () => {
      for (let i = 0; i < PIPELINING; i++) send();
    });
    socket.on('data', (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf(HEADER_END);
        if (end < 0) break;
        const head = buf.toString('latin1', 0, end);
        const m = /content-length:\s*(\d+)/i.exec(head);
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < total) break;
        if (measuring && head.slice(9, 12) === '201') created++;
        buf = buf.subarray(total);
        if (!stopping) send();
      }
    });
    done.push(
      new Promise((resolve) => {
        socket.on('close', () => resolve());
        socket.on('error', () => resolve());
      }),
    );
  }
  await new Promise((r) => setTimeout(r, 1000));
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  measuring = false;
  const rate = created / ((performance.now() - t0) / 1000);
  stopping = true;
  for (const s of sockets) s.destroy();
  await Promise.all(done);
  return rate;
}

interface Figures {
  label: string;
  createsPerS: number;
  p50: number;
  p99: number;
  max: number;
  held: number[];
  kibPerPeer: number[];
}

async function measure(label: string, nodes: Child[]): Promise<Figures> {
  const bases = nodes.map((n) => `http://127.0.0.1:${n.port}`);
  const base = (i: number): string => bases[i % bases.length] ?? '';
  // 1. N sessions with two peer tokens each (matches and memory first: the create load below would leave
  //    thousands of sessions and garbage in the heap and blur the idle-memory baseline)
  const sessions: { name: string; a: string; b: string }[] = [];
  for (let i = 0; i < N; i += 50) {
    sessions.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(50, N - i) }, async (_v, j) => {
          const name = `m-${i + j}`;
          const admin = (await json(`${base(0)}/api/session`, { name, ttl: 3600 }))['token'] as string;
          const tok = async (l: string) =>
            (await json(`${base(0)}/api/session/${name}/token`, { label: l }, admin))['token'] as string;
          return { name, a: await tok('A'), b: await tok('B') };
        }),
      )),
    );
  }
  const idle = await Promise.all(nodes.map((n) => n.rss()));
  const latencies: number[] = [];
  const peers: Peer[] = [];
  const held = nodes.map(() => 0);
  for (const s of sessions) {
    const a = await open(`ws://127.0.0.1:${nodes[0]?.port}/api/ws/${s.name}`, s.a);
    a.ws.send(JSON.stringify({ type: 'register', port: 9000 }));
    await a.waitFor('session');
    const bi = nodes.length - 1;
    const b = await open(`ws://127.0.0.1:${nodes[bi]?.port}/api/ws/${s.name}`, s.b);
    await b.waitFor('session');
    const t = performance.now();
    b.ws.send(JSON.stringify({ type: 'register', port: 9000 }));
    await Promise.all([a.waitFor('peer'), b.waitFor('peer')]);
    latencies.push(performance.now() - t);
    peers.push(a, b);
    held[0] = (held[0] ?? 0) + 1;
    held[bi] = (held[bi] ?? 0) + 1;
  }
  await new Promise((r) => setTimeout(r, 500));
  const full = await Promise.all(nodes.map((n) => n.rss()));
  for (const p of peers) p.ws.terminate();
  // 2. creates per second: the pipelined raw-socket load of bench/punch-http, connections spread over the
  //    instances (with two, half of the creates go through the relay, which forwards them to the owner)
  const createsPerS = await createLoad(nodes.map((n) => n.port));
  latencies.sort((x, y) => x - y);
  return {
    label,
    createsPerS,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? NaN,
    held,
    kibPerPeer: nodes.map((_n, i) => ((full[i] ?? 0) - (idle[i] ?? 0)) / Math.max(1, held[i] ?? 0) / 1024),
  };
}

async function main(): Promise<void> {
  console.log(
    `bench/punch-scale: ${N} matches per deployment, creates for ${SECONDS} s on ${CONNECTIONS} connections x ${PIPELINING} pipelined, node ` +
      `${process.version}, load average ${loadavg()[0]?.toFixed(1)} on ${cpus().length} cores`,
  );
  const redis = await startRedis();
  const results: Figures[] = [];
  // Each row is printed as soon as it is measured (a later failure keeps the earlier figures).
  const record = (r: Figures): void => {
    results.push(r);
    console.log(
      `${r.label}: ${r.createsPerS.toFixed(0)} creates/s, match p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms ` +
        `max ${r.max.toFixed(2)} ms, idle peers ${r.held.join(' + ')}, KiB per idle peer ${r.kibPerPeer.map((k) => k.toFixed(1)).join(' / ')}`,
    );
  };
  try {
    const sqlite = await start(`${here}servers.ts`, ['sqlite']);
    record(await measure('1 x SQLite', [sqlite]));
    await sqlite.exit();

    const one = await start(`${here}servers.ts`, ['redis', redis.url, 'one:']);
    record(await measure('1 x Redis', [one]));
    await one.exit();

    // The same on a Redis that fsyncs once a second: what the fsync per acknowledged write costs (not
    // the documented setting: a Redis crash can lose the last second of acknowledged writes).
    const lax = await startRedis({ appendfsync: 'everysec' });
    try {
      const oneLax = await start(`${here}servers.ts`, ['redis', lax.url, 'lax:']);
      record(await measure('1 x Redis, appendfsync everysec', [oneLax]));
      await oneLax.exit();
    } finally {
      await lax.remove();
    }

    // Two instances: the first started owns the sessions; peer B and half the creates go through the relay.
    const owner = await start(`${here}servers.ts`, ['redis', redis.url, 'two:']);
    const relay = await start(`${here}servers.ts`, ['redis', redis.url, 'two:']);
    if (!(await owner.ask<{ owner: boolean }>('role')).owner)
      throw new Error('the first instance is not the owner');
    record(await measure('2 x Redis (A on owner, B on relay)', [owner, relay]));
    await relay.exit();
    await owner.exit();
  } finally {
    await redis.remove();
  }

  const bare = await start(`${here}../punch-ws/servers.ts`, ['bare']);
  const bareIdle = await bare.rss();
  const conns: Peer[] = [];
  for (let i = 0; i < 2 * N; i++) conns.push(await open(`ws://127.0.0.1:${bare.port}/`));
  await new Promise((r) => setTimeout(r, 500));
  const bareKib = ((await bare.rss()) - bareIdle) / (2 * N) / 1024;
  for (const c of conns) c.ws.terminate();
  await bare.exit();

  const f = (v: number, d = 2): string => v.toFixed(d);
  console.log(
    '\ndeployment                              creates/s  match p50   p99      max       idle peers held  KiB/idle peer (ratio to bare ws)',
  );
  for (const r of results) {
    console.log(
      `${r.label.padEnd(40)}${f(r.createsPerS, 0).padStart(9)}  ${f(r.p50).padStart(6)} ms ${f(r.p99).padStart(6)} ms ${f(r.max).padStart(7)} ms  ` +
        `${r.held.join(' + ').padEnd(16)} ${r.kibPerPeer.map((k) => `${f(k, 1)} (${f(k / bareKib)})`).join(' / ')}`,
    );
  }
  console.log(`bare ws anchor: ${f(bareKib, 1)} KiB per idle connection (${2 * N} connections)`);
  const single = results[0];
  if (single) {
    console.log(
      `single SQLite instance: match p99 ${f(single.p99)} ms [target < 5 ms: ${single.p99 < 5 ? 'met' : 'NOT met'}], ` +
        `memory ${f((single.kibPerPeer[0] ?? 0) / bareKib)}x bare ws [target <= 2x: ${(single.kibPerPeer[0] ?? 0) <= 2 * bareKib ? 'met' : 'NOT met'}]`,
    );
  }
}

await main();
