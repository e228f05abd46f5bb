/**
 * bench/punch-http: session creates per second with rate limits off, against a bare fastify route that
 * returns a fixed 201 body, under the same load in the same run.
 * Target on a 2-core machine: >= 5,000 creates/s and a ratio >= 0.5 (judged with the default LOG_LEVEL=info;
 * a second broker with LOG_LEVEL=warn is measured in the same rounds to show what logging costs).
 *
 * Each server runs in its own process; the load generator here is a minimal HTTP/1.1 client on raw
 * sockets with pipelining (no per-request objects beyond one Buffer), so that it is not the bottleneck.
 *
 * Usage: npx tsx bench/punch-http/run.ts [--rounds 2] [--seconds 5] [--warmup 1.5] [--connections 64] [--pipelining 4]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { TokenSigner } from '@broadcast-ops/punch';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1.5' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '64' },
    pipelining: { type: 'string', default: '4' },
  },
});
const SECONDS = Number(values.seconds);
const WARMUP = Number(values.warmup);
const ROUNDS = Number(values.rounds);
const CONNECTIONS = Number(values.connections);
const PIPELINING = Number(values.pipelining);
/** The service default (`info`: one JSON line per created session); BENCH_LOG_LEVEL=warn to leave logging out. */
const LOG_LEVEL = process.env['BENCH_LOG_LEVEL'] ?? 'info';

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const addr = srv.address();
  await new Promise<void>((r) => srv.close(() => r()));
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

async function waitHealthy(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited early:\n${log()}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/health`);
      if (res.ok) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server did not become healthy:\n${log()}`);
}

/** A server process; its stdout (JSON logs) goes to /dev/null so the load generator does not pay for it. */
function startServer(args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; log: () => string } {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-16_384);
  };
  child.stderr?.on('data', keep);
  return { child, log: () => out };
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}

interface LoadResult {
  byStatus: Map<number, number>;
  latenciesMs: number[];
  seconds: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

/** Pipelined HTTP/1.1 load: every connection keeps `pipelining` requests in flight. */
async function runLoad(
  port: number,
  makeRequest: () => Buffer,
  warmupS: number,
  seconds: number,
): Promise<LoadResult> {
  const byStatus = new Map<number, number>();
  const latenciesMs: number[] = [];
  let measuring = false;
  let stopping = false;
  const sockets: Socket[] = [];
  const done: Promise<void>[] = [];
  for (let c = 0; c < CONNECTIONS; c++) {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    sockets.push(socket);
    const sentAt: number[] = [];
    let buf: Buffer = Buffer.alloc(0);
    const send = () => {
      sentAt.push(performance.now());
      socket.write(makeRequest());
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
        const status = Number(head.slice(9, 12));
        buf = buf.subarray(total);
        const t0 = sentAt.shift() ?? performance.now();
        if (measuring) {
          byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
          if (latenciesMs.length < 2_000_000) latenciesMs.push(performance.now() - t0);
        }
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
  await new Promise((r) => setTimeout(r, warmupS * 1000));
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  stopping = true;
  for (const s of sockets) s.destroy();
  await Promise.all(done);
  return { byStatus, latenciesMs, seconds: elapsed };
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function summarize(label: string, r: LoadResult): number {
  const created = r.byStatus.get(201) ?? 0;
  const rate = created / r.seconds;
  const sorted = r.latenciesMs.sort((a, b) => a - b);
  const other = [...r.byStatus].filter(([s]) => s !== 201);
  console.log(
    `${label.padEnd(34)} ${rate.toFixed(0).padStart(7)} 201/s   latency p50 ${pct(sorted, 50).toFixed(2)} ms, ` +
      `p99 ${pct(sorted, 99).toFixed(2)} ms` +
      (other.length ? `   other statuses: ${other.map(([s, n]) => `${s}×${n}`).join(', ')}` : ''),
  );
  return rate;
}

function requestFor(port: number, body: string): Buffer {
  return Buffer.from(
    `POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

function merge(results: LoadResult[]): LoadResult {
  const byStatus = new Map<number, number>();
  for (const r of results) for (const [k, v] of r.byStatus) byStatus.set(k, (byStatus.get(k) ?? 0) + v);
  return {
    byStatus,
    latenciesMs: results.flatMap((r) => r.latenciesMs),
    seconds: results.reduce((a, r) => a + r.seconds, 0),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'punch-bench-'));
console.log(
  `bench/punch-http: ${CONNECTIONS} connections × ${PIPELINING} pipelined; ${ROUNDS} alternating rounds of ` +
    `${WARMUP} s warm-up + ${SECONDS} s per target; Node ${process.version}; punch LOG_LEVEL=${LOG_LEVEL}`,
);
// Side figure (target >= 100k/s): stateless token verification in this process.
{
  const signer = new TokenSigner('bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz-0123456789AB');
  const token = signer.sign({
    session: 'bench',
    role: 'peer',
    stream: 'cam-1',
    exp: 4_000_000_000,
    sid: 'abc',
  });
  const N = 200_000;
  const t0 = performance.now();
  let ok = 0;
  for (let i = 0; i < N; i++) if (signer.verify(token, Date.now()).ok) ok++;
  const s = (performance.now() - t0) / 1000;
  console.log(`token verify (in process)          ${(ok / s).toFixed(0).padStart(7)} verifications/s`);
}
const servers: ChildProcess[] = [];
try {
  // Anchor: bare fastify, fixed 201. Broker: unique names, rate limits off, SQLite (WAL) on a temp file,
  // once with the service's default logging (one info line per created session) and once with warn.
  const barePort = await freePort();
  const bare = startServer(
    ['--import', 'tsx', join(root, 'bench/punch-http/bare-server.ts'), String(barePort)],
    {},
  );
  servers.push(bare.child);
  const startPunch = async (level: string, db: string) => {
    const port = await freePort();
    const p = startServer([join(root, 'packages/punch/bin/punch.mjs'), 'serve'], {
      PUNCH_SECRET: 'bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz-0123456789AB',
      PUNCH_HOST: '127.0.0.1',
      PUNCH_PORT: String(port),
      PUNCH_DB: join(dir, db),
      PUNCH_RATE_LIMITING: 'off',
      PUNCH_MAX_SESSIONS: '0',
      LOG_LEVEL: level,
    });
    servers.push(p.child);
    await waitHealthy(port, p.child, p.log);
    return port;
  };
  await waitHealthy(barePort, bare.child, bare.log);
  const punchPort = await startPunch(LOG_LEVEL, 'punch.db');
  const quietPort = await startPunch('warn', 'punch-quiet.db');
  const bareReq = requestFor(barePort, '{"name":"bench-fixed","streams":["cam-1","cam-2"]}');
  let n = 0;
  const run = Date.now().toString(36);
  const createReq = (port: number) => () =>
    requestFor(port, `{"name":"b${run}-${n++}","streams":["cam-1","cam-2"]}`);
  // Alternate the targets so that a change of background load on a shared machine hits all alike.
  const bareResults: LoadResult[] = [];
  const punchResults: LoadResult[] = [];
  const quietResults: LoadResult[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    bareResults.push(await runLoad(barePort, () => bareReq, WARMUP, SECONDS));
    punchResults.push(await runLoad(punchPort, createReq(punchPort), WARMUP, SECONDS));
    quietResults.push(await runLoad(quietPort, createReq(quietPort), WARMUP, SECONDS));
  }
  const bareRate = summarize('bare fastify route (fixed 201)', merge(bareResults));
  const punchRate = summarize(`punch creates, LOG_LEVEL=${LOG_LEVEL}`, merge(punchResults));
  const quietRate = summarize('punch creates, LOG_LEVEL=warn', merge(quietResults));
  const ratio = punchRate / bareRate;
  console.log(
    `ratio punch / bare fastify: ${ratio.toFixed(2)} (LOG_LEVEL=${LOG_LEVEL}), ` +
      `${(quietRate / bareRate).toFixed(2)} (warn)   targets: >= 5000 creates/s, ratio >= 0.5`,
  );
  console.log(
    `result (LOG_LEVEL=${LOG_LEVEL}): ${punchRate >= 5000 && ratio >= 0.5 ? 'PASS' : 'BELOW TARGET'}`,
  );
} finally {
  for (const c of servers) await stopServer(c);
  rmSync(dir, { recursive: true, force: true });
}
