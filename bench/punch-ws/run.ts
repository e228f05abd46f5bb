/**
 * bench/punch-ws: WebSocket signalling at scale on loopback.
 *
 * 1. Match latency: N sessions (default 1,000) are created over HTTP with two peer tokens each; for each
 *    session in turn, peer A connects and registers, then peer B connects; t0 = just before B's `register`
 *    is sent, t1 = when both A and B have received `peer`. Every earlier session's two connections stay
 *    open, so the last matches happen beside ~2,000 live peer connections. Reported: p50/p95/p99/max over
 *    the N matches. Target: p99 < 5 ms.
 * 2. Memory: resident set size (after a full GC, server side) per idle peer connection: (RSS with the 2N
 *    registered, idle peers) - (RSS with the N sessions and no connections), divided by 2N; beside a bare
 *    `ws` server (same socket options) holding 2N idle connections from the same client, measured in the
 *    same run. Target: at most 2x the bare `ws` figure.
 *
 * Servers and client run in separate processes (servers.ts).
 * Usage: npx tsx bench/punch-ws/run.ts [--sessions 1000] [--store sqlite|memory]
 * (`--store memory` runs the broker on its in-memory store, to show SQLite's share of the latency.)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { json, open, percentile, type Peer } from './client.ts';

const { values } = parseArgs({
  options: { sessions: { type: 'string', default: '1000' }, store: { type: 'string', default: 'sqlite' } },
});
const N = Number(values.sessions);
const here = fileURLToPath(new URL('.', import.meta.url));

interface Child {
  proc: ChildProcess;
  port: number;
  rss(): Promise<number>;
  ask<T>(cmd: string): Promise<T>;
  exit(): Promise<void>;
}

async function start(kind: 'broker' | 'bare'): Promise<Child> {
  const proc = fork(`${here}servers.ts`, [kind, values.store], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    proc.once('message', (m: { port: number }) => resolve(m.port));
    proc.once('exit', (c) => reject(new Error(`${kind} server exited with ${c}`)));
  });
  const ask = <T>(cmd: string): Promise<T> =>
    new Promise((resolve) => {
      proc.once('message', (m: T) => resolve(m));
      proc.send({ cmd });
    });
  return {
    proc,
    port,
    rss: async () => (await ask<{ rss: number }>('rss')).rss,
    ask,
    exit: async () => {
      const done = new Promise((r) => proc.once('exit', r));
      proc.send({ cmd: 'exit' });
      await done;
    },
  };
}

async function main(): Promise<void> {
  console.log(
    `bench/punch-ws: ${N} sessions, ${2 * N} peer connections, loopback, node ${process.version}, ` +
      `store ${values.store}, load average ${loadavg()[0]?.toFixed(1)} on ${cpus().length} cores`,
  );
  const broker = await start('broker');
  const base = `http://127.0.0.1:${broker.port}`;
  const sessions: { name: string; a: string; b: string }[] = [];
  for (let i = 0; i < N; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, N - i) }, async (_v, k) => {
        const name = `bench-${i + k}`;
        const admin = (await json(`${base}/api/session`, { name, ttl: 3600 }))['token'] as string;
        const tok = async (label: string) =>
          (await json(`${base}/api/session/${name}/token`, { label }, admin))['token'] as string;
        return { name, a: await tok('A'), b: await tok('B') };
      }),
    );
    sessions.push(...batch);
  }
  const brokerIdle = await broker.rss();

  const latencies: number[] = [];
  const peers: Peer[] = [];
  await broker.ask('delay-start');
  for (const s of sessions) {
    const url = `ws://127.0.0.1:${broker.port}/api/ws/${s.name}`;
    const a = await open(url, s.a);
    a.ws.send(JSON.stringify({ type: 'register', port: 9000 }));
    await a.waitFor('session');
    const b = await open(url, s.b);
    await b.waitFor('session'); // the snapshot every connection gets first
    const t0 = performance.now();
    b.ws.send(JSON.stringify({ type: 'register', port: 9000 }));
    await Promise.all([a.waitFor('peer'), b.waitFor('peer')]);
    latencies.push(performance.now() - t0);
    peers.push(a, b);
  }
  const delay = await broker.ask<{ p50: number; p99: number; max: number }>('delay-stop');
  await new Promise((r) => setTimeout(r, 500));
  const brokerFull = await broker.rss();
  for (const p of peers) p.ws.terminate();
  await broker.exit();

  const bare = await start('bare');
  const bareIdle = await bare.rss();
  const bareConns: Peer[] = [];
  for (let i = 0; i < 2 * N; i++) bareConns.push(await open(`ws://127.0.0.1:${bare.port}/`));
  await new Promise((r) => setTimeout(r, 500));
  const bareFull = await bare.rss();
  for (const p of bareConns) p.ws.terminate();
  await bare.exit();

  latencies.sort((x, y) => x - y);
  const ms = (v: number) => v.toFixed(2);
  const perConn = (full: number, idle: number) => (full - idle) / (2 * N) / 1024;
  const brokerKb = perConn(brokerFull, brokerIdle);
  const bareKb = perConn(bareFull, bareIdle);
  console.log(
    `match latency (B register -> both peer), ${latencies.length} matches: p50 ${ms(percentile(latencies, 50))} ms, ` +
      `p95 ${ms(percentile(latencies, 95))} ms, p99 ${ms(percentile(latencies, 99))} ms, max ${ms(latencies.at(-1) ?? NaN)} ms` +
      `  [target p99 < 5 ms: ${percentile(latencies, 99) < 5 ? 'met' : 'NOT met'}]`,
  );
  console.log(
    `broker event-loop delay during the matches (time ready work waited: CPU share, GC): p50 ${ms(delay.p50)} ms, ` +
      `p99 ${ms(delay.p99)} ms, max ${ms(delay.max)} ms`,
  );
  console.log(
    `RSS per idle peer connection: broker ${brokerKb.toFixed(1)} KiB (${(brokerIdle / 2 ** 20).toFixed(1)} -> ` +
      `${(brokerFull / 2 ** 20).toFixed(1)} MiB), bare ws ${bareKb.toFixed(1)} KiB (${(bareIdle / 2 ** 20).toFixed(1)} -> ` +
      `${(bareFull / 2 ** 20).toFixed(1)} MiB); ratio ${(brokerKb / bareKb).toFixed(2)}` +
      `  [target <= 2x: ${brokerKb <= 2 * bareKb ? 'met' : 'NOT met'}]`,
  );
}

await main();
