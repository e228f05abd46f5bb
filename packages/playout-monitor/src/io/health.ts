/**
 * The body of `GET /health` in the spec's shape (README "Endpoints") as the inputs know it; `PlayoutService`
 * (playout-service.ts), which serves it, fills in the outputs' view and protocols.
 */
import type { MonitorConfig } from '../config.ts';
import type { DeviceStore } from '../domain/device-store.ts';
import type { MalformedInputs } from '../malformed.ts';
import type { TslDestinationStatus } from './tsl-sender.ts';

export interface HealthDeps {
  store: DeviceStore;
  config: MonitorConfig;
  version: string;
  /** Monotonic ms when the service started, and a monotonic clock. */
  startedAtMs: number;
  monotonicMs: () => number;
  now: () => number;
  malformed: MalformedInputs;
}

export interface HealthBody {
  status: 'healthy' | 'degraded';
  uptime: number;
  timestamp: number;
  version: string;
  devices: {
    total: number;
    connected: number;
    list: { id: number; name: string; type: string; connected: boolean; state: string }[];
  };
  protocols: {
    websocket: { clients: number };
    emberPlus: {
      enabled: boolean;
      running: boolean;
      port: number;
      consumers?: number;
      droppedConsumers?: Record<string, number>;
    };
    tslUmd: {
      enabled: boolean;
      running: boolean;
      destinations: number;
      destinationStatus?: TslDestinationStatus[];
      /** Destinations not sending, each with the reason. */
      failing?: { host: string; port: number; error: string }[];
    };
  };
  memory: { heapUsed: number; heapTotal: number; unit: 'MB' };
  inputs: { malformed: Record<string, number> };
}

export function healthBody(d: HealthDeps): HealthBody {
  const list = d.store
    .list()
    .map((s) => ({ id: s.id, name: s.name, type: s.type, connected: s.connected, state: s.state }));
  const connected = list.filter((s) => s.connected).length;
  const mem = process.memoryUsage();
  return {
    status: connected > 0 ? 'healthy' : 'degraded',
    uptime: (d.monotonicMs() - d.startedAtMs) / 1000,
    timestamp: d.now(),
    version: d.version,
    devices: { total: list.length, connected, list },
    protocols: {
      websocket: { clients: 0 },
      emberPlus: { enabled: false, running: false, port: d.config.settings.emberPlusPort },
      tslUmd: {
        enabled: d.config.settings.tslUmdDestinations.length > 0,
        running: false,
        destinations: d.config.settings.tslUmdDestinations.length,
      },
    },
    memory: {
      heapUsed: Math.round(mem.heapUsed / 1048576),
      heapTotal: Math.round(mem.heapTotal / 1048576),
      unit: 'MB',
    },
    inputs: { malformed: d.malformed.counts() },
  };
}
