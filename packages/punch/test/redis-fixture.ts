import { join } from 'node:path';
import {
  freePort,
  repoRoot,
  requireTool,
  startProcess,
  tempDir,
  type RunningProcess,
} from '@broadcast-ops/core/testing';

/**
 * A real `redis-server` (Debian's package) on a free loopback port, with the persistence the broker's
 * docs require (docs/multi-instance.md "Redis settings"): append-only file, fsync on every write, no RDB
 * snapshots. The data directory survives `stop`/`kill` so that `start` again replays the append-only file.
 */
export interface RedisFixture {
  port: number;
  url: string;
  dir: string;
  /** Start (again) on the same port and directory; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stop: SIGTERM (Redis flushes and exits) or SIGKILL (a crash). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stop and remove the data directory. */
  remove(): Promise<void>;
}

export async function startRedis(
  options: { appendfsync?: 'always' | 'everysec' } = {},
): Promise<RedisFixture> {
  const bin = requireTool('redis-server');
  const port = await freePort();
  const tmp = tempDir('punch-redis-');
  let proc: RunningProcess | undefined;
  const fixture: RedisFixture = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir: tmp.path,
    async start() {
      proc = startProcess(
        bin,
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'yes',
          '--appendfsync',
          options.appendfsync ?? 'always',
          '--dir',
          tmp.path,
          '--logfile',
          join(tmp.path, 'redis.log'),
          '--daemonize',
          'no',
          '--protected-mode',
          'yes',
        ],
        { cwd: repoRoot },
      );
      // The log goes to a file; wait until the port accepts connections.
      const deadline = Date.now() + 20_000;
      for (;;) {
        const ok = await new Promise<boolean>((resolve) => {
          import('node:net').then(
            ({ connect }) => {
              const c = connect(port, '127.0.0.1');
              c.once('connect', () => {
                c.end();
                resolve(true);
              });
              c.once('error', () => resolve(false));
            },
            () => resolve(false),
          );
        });
        if (ok) return;
        if (proc.child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`redis-server did not start on port ${port}: ${proc.output().slice(-2000)}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop(signal = 'SIGTERM') {
      const p = proc;
      proc = undefined;
      if (p) await p.stop(signal);
    },
    async remove() {
      await fixture.stop('SIGKILL');
      tmp.remove();
    },
  };
  await fixture.start();
  return fixture;
}
