// Shared test helpers (not a test file itself).
import { silentLogger } from '@broadcast-ops/core';
import type { MonitorConfig } from '../src/config.ts';
import type { Monitor } from '../src/monitor.ts';
import { PlayoutService } from '../src/playout-service.ts';
import { waitFor } from '@broadcast-ops/core/testing';

export {
  FIXTURES,
  apiHeaders,
  deckEntry,
  makeConfig,
  readFixture,
  readHex,
  vmixEntry,
} from './pure-helpers.ts';

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
