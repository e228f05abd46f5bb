/**
 * The bridge as its own process (bin/telemetry-bridge.mjs) against a Satellite server (the Companion
 * simulator, or Companion's own code in the interop harness), for tests that kill or restart it: one config
 * file in `dir`, a fixed client port (the same after a restart), and every started process remembered so the
 * test can end them by PID.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, startProcess, waitFor, type RunningProcess } from '@broadcast-ops/core/testing';
import { deepMerge, freePort } from './helpers.ts';

const BIN = join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs');

export interface BridgeProcess {
  /** The client transport's port. */
  port: number;
  url: string;
  /** Start a bridge and wait until it listens and its surface is registered on the simulator. */
  start: () => Promise<RunningProcess>;
  /** SIGKILL every process started (the test's cleanup). */
  killAll: () => Promise<void>;
}

/** The Satellite server the bridge registers on: the simulator, or Companion's own code (its interop harness). */
export interface SatellitePeer {
  readonly devices: readonly string[];
}

export async function bridgeProcess(
  dir: string,
  sim: SatellitePeer,
  simPort: number | undefined,
  deviceId: string,
  extra: Record<string, unknown> = {},
): Promise<BridgeProcess> {
  if (simPort === undefined) throw new Error('the Satellite server listens on no port');
  const port = await freePort();
  const cfg = join(dir, 'bridge.json');
  const config = deepMerge(
    {
      name: 'process-test',
      clientTransport: { host: '127.0.0.1', port },
      metrics: { enabled: false },
      health: { enabled: false },
      eventLog: { path: join(dir, 'events') },
      commands: { idempotencyWindow: 60_000 },
      companion: {
        enabled: true,
        host: '127.0.0.1',
        port: simPort,
        transport: 'ws',
        device: { deviceId, productName: 'Process test', keysTotal: 8, keysPerRow: 4 },
      },
      logging: { level: 'info' },
    },
    extra,
  );
  writeFileSync(cfg, JSON.stringify(config));
  const procs: RunningProcess[] = [];
  return {
    port,
    url: `ws://127.0.0.1:${port}/`,
    start: async () => {
      const p = startProcess(process.execPath, [BIN, '--config', cfg]);
      procs.push(p);
      await p.waitForOutput(/telemetry bridge listening/, 20_000);
      await waitFor(() => sim.devices.includes(deviceId), { timeoutMs: 10_000, what: 'surface registered' });
      return p;
    },
    killAll: async () => {
      for (const p of procs) await p.stop('SIGKILL');
    },
  };
}

/** KEY-PRESS lines the simulator received with PRESSED=1 (`down`) or PRESSED=0. */
export function pressLines(sim: { linesNamed(name: string): { line: string }[] }, down = true): number {
  return sim
    .linesNamed('KEY-PRESS')
    .filter((l) => (down ? / PRESSED=(1|true)\b/ : / PRESSED=(0|false)\b/).test(l.line)).length;
}
