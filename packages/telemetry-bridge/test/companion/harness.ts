/**
 * A bridge with the real Companion adapter, pointed at the Companion simulator over WebSocket or TCP.
 * Timers are shortened (heartbeat, dead link, backoff) so recovery tests finish in well under a second each.
 */
import { silentLogger } from '@broadcast-ops/core';
import { loadFactor } from '@broadcast-ops/core/testing';
import { startBridge, type RunningBridge } from '../../src/app.ts';
import { CompanionSimulator, type CompanionSimOptions } from '@broadcast-ops/simulators/companion';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { testConfig } from '../helpers.ts';

export const DEVICE = 'tb-test-01';
export const DEV = 'tb_test_01';

export const VARIABLES = [
  { id: 'internal:time_hms', type: 'output', name: 'Clock' },
  { id: 'custom:tally_pgm', type: 'output', name: 'Programme tally' },
  { id: 'custom:cue', type: 'input', name: 'Cue text' },
] as const;

export interface Rig {
  sim: CompanionSimulator;
  bridge: RunningBridge;
  ports: { tcp?: number; ws?: number };
  get(path: string): { value: unknown; stale: boolean } | undefined;
  /** Resolve when the hub's state satisfies `pred` (polled; no timing assertion). */
  until(pred: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  client(name: string): Promise<BridgeClient>;
  close(): Promise<void>;
}

export async function rig(
  opts: {
    sim?: CompanionSimOptions;
    transport?: 'ws' | 'tcp';
    companion?: Record<string, unknown>;
    /** Start the bridge first, the simulator later on this port (Companion down at start). */
    simLater?: boolean;
    port?: number;
  } = {},
): Promise<Rig> {
  const sim = new CompanionSimulator(opts.sim);
  const transport = opts.transport ?? 'ws';
  let ports: { tcp?: number; ws?: number } = {};
  if (!opts.simLater) ports = await sim.listen(transport === 'ws' ? { tcp: null } : { ws: null });
  const port = opts.port ?? (transport === 'ws' ? ports.ws : ports.tcp);
  const config = testConfig({
    companion: {
      enabled: true,
      host: '127.0.0.1',
      port,
      transport,
      heartbeatInterval: 100,
      deadAfter: 2000,
      connectionTimeout: 1000,
      replyTimeout: 1000,
      reconnectDelay: 20,
      maxReconnectDelay: 200,
      reconnectJitter: 20,
      refreshTimeout: 300,
      device: {
        deviceId: DEVICE,
        productName: 'Telemetry "Bridge" Test',
        keysTotal: 8,
        keysPerRow: 4,
        variables: VARIABLES,
      },
      ...opts.companion,
    },
  });
  const bridge = await startBridge({ config, logger: silentLogger() });
  const clients: BridgeClient[] = [];
  const get = (path: string): { value: unknown; stale: boolean } | undefined => {
    const e = bridge.hub.store.get(path);
    return e ? { value: e.value, stale: e.stale } : undefined;
  };
  return {
    sim,
    bridge,
    ports,
    get,
    async until(pred, what, timeoutMs = 5000) {
      const end = Date.now() + timeoutMs * loadFactor();
      while (!pred()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    async client(name) {
      const c = new BridgeClient({ url: bridge.clientUrl, name, reconnect: { enabled: false } });
      clients.push(c);
      await c.connect();
      return c;
    },
    async close() {
      await Promise.all(clients.map((c) => c.close()));
      await bridge.close();
      await sim.close();
    },
  };
}

export function stateOf(r: Rig): string | undefined {
  return r.get('companion.connection.state')?.value as string | undefined;
}
