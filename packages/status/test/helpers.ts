// Shared by the status service's process and browser tests (no tests here): fake services in their own
// processes (so one can be SIGSTOPped like a hung service) and the status service on plain node.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, repoRoot, startProcess, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';

export const KINDS = ['punch', 'telemetry-bridge', 'playout-monitor', 'timesvc'] as const;
const FAKE = fileURLToPath(new URL('./fixtures/fake-service.mjs', import.meta.url));

export interface Rig {
  fakes: Map<string, { proc: RunningProcess; port: number }>;
  status: RunningProcess;
  url: string;
  pollIntervalMs: number;
  stop(): Promise<void>;
}

export async function startRig(pollIntervalMs = 1000, timeoutMs = 600): Promise<Rig> {
  const fakes = new Map<string, { proc: RunningProcess; port: number }>();
  const tmp = tempDir('status-rig-');
  const all: RunningProcess[] = [];
  try {
    for (const kind of KINDS) {
      const proc = startProcess(process.execPath, [FAKE, kind]);
      all.push(proc);
      const m = await proc.waitForOutput(/listening (\d+)/, 20_000);
      fakes.set(kind, { proc, port: Number(m[1]) });
    }
    const port = await freePort('tcp');
    const at = (kind: string, path: string): string => `http://127.0.0.1:${fakes.get(kind)?.port}${path}`;
    const config = {
      listen: { host: '127.0.0.1', port },
      pollIntervalMs,
      timeoutMs,
      services: KINDS.map((kind) => ({
        name: kind,
        kind,
        health: at(kind, '/health'),
        ...(kind === 'playout-monitor'
          ? { devices: at(kind, '/api/devices') }
          : { metrics: at(kind, '/metrics') }),
        page: at(kind, '/'),
      })),
    };
    const file = join(tmp.path, 'status.json');
    writeFileSync(file, JSON.stringify(config));
    // What users run: the bin, which runs dist/ on plain node (src/ through tsx under the test runner).
    const status = startProcess(process.execPath, [
      join(repoRoot, 'packages/status/bin/status.mjs'),
      '--config',
      file,
    ]);
    all.push(status);
    await status.waitForOutput(/status service listening/, 30_000);
    return {
      fakes,
      status,
      url: `http://127.0.0.1:${port}`,
      pollIntervalMs,
      stop: async () => {
        for (const p of all) {
          try {
            p.child.kill('SIGCONT');
          } catch {
            /* gone */
          }
          await p.stop('SIGKILL');
        }
        tmp.remove();
      },
    };
  } catch (err) {
    for (const p of all) await p.stop('SIGKILL');
    tmp.remove();
    throw err;
  }
}

export interface FleetBody {
  overall: string;
  services: {
    name: string;
    level: string;
    reason: string;
    figures: Record<string, unknown>;
    page: string | null;
  }[];
}

export async function fleet(rig: Rig): Promise<FleetBody> {
  const res = await fetch(`${rig.url}/api/fleet`, { signal: AbortSignal.timeout(5000) });
  return (await res.json()) as FleetBody;
}

export function levels(f: FleetBody): Record<string, string> {
  return Object.fromEntries(f.services.map((s) => [s.name, s.level]));
}
