/**
 * The two servers of bench/punch-ws, one per process (forked by run.ts with --expose-gc):
 *   `broker`: the punch server (SQLite store in a temporary file, rate limits off, LOG_LEVEL=warn);
 *   `bare`: a bare `ws` server with the same socket options (perMessageDeflate off, maxPayload 16 KiB) that
 *   accepts connections and does nothing else.
 * Each prints `{"port":N}` on its IPC channel, then answers `rss` with its resident set size after a full GC,
 * and `delay-start`/`delay-stop` with its event-loop delay percentiles (ms) in between.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { WebSocketServer } from 'ws';
import { punchConfigSchema } from '@broadcast-ops/punch/testing';
import { MemoryStore, createPunchServer } from '@broadcast-ops/punch';

export const BENCH_SECRET = 'bench-punch-ws-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH';

function measure(): number {
  const g = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) g?.();
  return process.memoryUsage().rss;
}

async function main(): Promise<void> {
  const kind = process.argv[2];
  let close: () => Promise<void>;
  let port: number;
  if (kind === 'broker') {
    const dir = mkdtempSync(join(tmpdir(), 'bench-punch-ws-'));
    const config = punchConfigSchema.parse({
      secret: BENCH_SECRET,
      host: '127.0.0.1',
      port: 0,
      db: join(dir, 'punch.db'),
      logLevel: 'warn',
      limits: { rateLimits: false, maxSessions: 0 },
    });
    // `broker-memory`: the same server with the in-memory store, to separate SQLite's share of the latency.
    const server = createPunchServer({
      config: { ...config, secret: BENCH_SECRET },
      logger: silentLogger(),
      ...(process.argv[3] === 'memory' ? { store: new MemoryStore() } : {}),
    });
    port = Number(new URL(await server.listen()).port);
    close = async () => {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    };
  } else {
    const wss = new WebSocketServer({
      port: 0,
      host: '127.0.0.1',
      perMessageDeflate: false,
      maxPayload: 16_384,
    });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    const a = wss.address();
    port = a === null || typeof a === 'string' ? 0 : a.port;
    wss.on('connection', (ws) => ws.on('error', () => undefined));
    close = () => new Promise<void>((r) => wss.close(() => r()));
  }
  // Event-loop delay of this process: how long ready work waited for the CPU (scheduling, GC), beside latency.
  const delay = monitorEventLoopDelay({ resolution: 1 });
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'rss') process.send?.({ rss: measure() });
    else if (m.cmd === 'delay-start') {
      delay.reset();
      delay.enable();
      process.send?.({ ok: true });
    } else if (m.cmd === 'delay-stop') {
      delay.disable();
      process.send?.({
        p50: delay.percentile(50) / 1e6,
        p99: delay.percentile(99) / 1e6,
        max: delay.max / 1e6,
      });
    } else if (m.cmd === 'exit') void close().then(() => process.exit(0));
  });
  process.send?.({ port });
}

await main();
