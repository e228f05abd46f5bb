/**
 * One broker instance of bench/punch-scale per process (forked by run.ts with --expose-gc):
 *   argv: `sqlite` | `redis <url> <prefix>`. Rate limits off, LOG_LEVEL=warn, the defaults otherwise.
 * Prints `{"port":N}` on its IPC channel, then answers `rss` (resident set size after a full GC), `role`
 * (owner or relay) and `exit`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { punchConfigSchema } from '@broadcast-ops/punch/testing';
import { createPunchServer } from '@broadcast-ops/punch';

export const BENCH_SECRET = 'bench-punch-scale-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEF';

function measure(): number {
  const g = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) g?.();
  return process.memoryUsage().rss;
}

async function main(): Promise<void> {
  const [kind, url, prefix] = process.argv.slice(2);
  const dir = mkdtempSync(join(tmpdir(), 'bench-punch-scale-'));
  const config = punchConfigSchema.parse({
    secret: BENCH_SECRET,
    host: '127.0.0.1',
    port: 0,
    db: join(dir, 'punch.db'),
    logLevel: 'warn',
    limits: { rateLimits: false, maxSessions: 0 },
    ...(kind === 'redis' ? { redis: { url, prefix } } : {}),
  });
  const server = createPunchServer({ config: { ...config, secret: BENCH_SECRET }, logger: silentLogger() });
  const port = Number(new URL(await server.listen()).port);
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'rss') process.send?.({ rss: measure() });
    else if (m.cmd === 'role') process.send?.({ owner: server.cluster ? server.cluster.isOwner : true });
    else if (m.cmd === 'exit')
      void server.close().then(() => {
        rmSync(dir, { recursive: true, force: true });
        process.exit(0);
      });
  });
  process.send?.({ port });
}

await main();
