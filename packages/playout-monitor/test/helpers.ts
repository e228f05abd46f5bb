// Shared test helpers (not a test file itself).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { silentLogger } from '@broadcast-ops/core';
import { configSchema, type MonitorConfig } from '../src/config.ts';
import type { Monitor } from '../src/monitor.ts';
import { PlayoutService } from '../src/playout-service.ts';
import { waitFor } from '@broadcast-ops/core/testing';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');

/** A .hex fixture: `#` comment lines, then hex digits. */
export function readHex(name: string): Uint8Array {
  const text = readFileSync(join(FIXTURES, 'osc', name), 'utf8');
  const hex = text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('')
    .replace(/\s+/g, '');
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

export function readFixture(...parts: string[]): string {
  return readFileSync(join(FIXTURES, ...parts), 'utf8');
}

export function makeConfig(servers: unknown[], settings: Record<string, unknown> = {}): MonitorConfig {
  return configSchema.parse({
    settings: { webSocketPort: 0, bindAddress: '127.0.0.1', ...settings },
    servers,
  });
}

/** An `http_mixer` entry for a vMix simulator speaking both APIs (HTTP on `port`, TCP on `tcpPort`). */
export function vmixEntry(
  id: number,
  sim: { port: number; tcpPort: number },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id,
    name: 'vMix',
    type: 'http_mixer',
    ip: '127.0.0.1',
    port: sim.port,
    tcpPort: sim.tcpPort,
    pollIntervalMs: 100,
    timeoutMs: 400,
    ...extra,
  };
}

/** What the input tests look at: the monitor's store and malformed counts; `close` stops the whole service. */
export interface MonitorRig {
  store: Monitor['store'];
  malformed: Monitor['malformed'];
  close(): Promise<void>;
}

/** The whole monitor (its one HTTP app included) on port 0 and Ember+ on port 0, as main.ts runs it. */
export async function startMonitor(
  config: MonitorConfig,
): Promise<{ monitor: MonitorRig; service: PlayoutService; url: string; oscPort: number }> {
  const service = new PlayoutService({ config, logger: silentLogger() });
  const started = await service.start({ http: 0, ember: 0 });
  const oscPort = [...started.oscPorts.values()][0] ?? 0;
  const { store, malformed } = service.monitor;
  return {
    monitor: { store, malformed, close: () => service.close() },
    service,
    url: started.httpUrl,
    oscPort,
  };
}

export interface HealthJson {
  status: string;
  devices: { total: number; connected: number; list: { id: number; state: string; connected: boolean }[] };
  inputs: { malformed: Record<string, number> };
}

export async function health(url: string): Promise<HealthJson> {
  const res = await fetch(`${url}/health`);
  return (await res.json()) as HealthJson;
}

/** Wait until device `id` satisfies `pred` (polling the store), or fail naming the last state seen. */
export async function waitDevice(
  monitor: Pick<Monitor, 'store'>,
  id: number,
  pred: (d: NonNullable<ReturnType<Monitor['store']['get']>>) => boolean,
  timeoutMs = 5000,
): Promise<NonNullable<ReturnType<Monitor['store']['get']>>> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  try {
    return await waitFor(
      () => {
        const d = monitor.store.get(id);
        return d && pred(d) ? d : undefined;
      },
      { timeoutMs, intervalMs: 10, what: `device ${id}` },
    );
  } catch {
    throw new Error(`device ${id} not as expected in time; last: ${JSON.stringify(monitor.store.get(id))}`);
  }
}

export async function healthState(
  url: string,
  id: number,
): Promise<{ state: string; connected: boolean } | undefined> {
  return (await health(url)).devices.list.find((d) => d.id === id);
}
