/**
 * The monitor: configuration in, device inputs running, the normalised store and its change stream, and
 * the HTTP app. main.ts opens it on the configured ports; tests and the bench open it on port 0.
 */
import {
  createMetricsRegistry,
  listeningUrl,
  systemClock,
  type Clock,
  type Logger,
} from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import { serverPort, type MonitorConfig, type OscServerConfig } from './config.ts';
import { DeviceStore } from './domain/device-store.ts';
import { buildHttpApp, healthBody, type HealthBody } from './io/http-server.ts';
import { HyperdeckClient } from './io/hyperdeck-client.ts';
import { OscInput } from './io/osc-input.ts';
import { VmixPoller } from './io/vmix-poller.ts';
import { MalformedInputs } from './malformed.ts';
import { VERSION } from './version.ts';

export interface MonitorOptions {
  config: MonitorConfig;
  logger: Logger;
  clock?: Clock;
}

export interface StartedMonitor {
  httpUrl: string;
  /** Bound OSC port per configured OSC port (they differ only when 0 was configured). */
  oscPorts: Map<number, number>;
}

export class Monitor {
  readonly config: MonitorConfig;
  readonly store: DeviceStore;
  readonly malformed: MalformedInputs;
  readonly app: FastifyInstance;
  /** Prometheus registry of this monitor's inputs (served on /metrics). */
  readonly registry: ReturnType<typeof createMetricsRegistry>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #startedAtMs: number;
  readonly #osc: { configured: number; input: OscInput }[] = [];
  readonly #pollers: VmixPoller[] = [];
  readonly #decks: HyperdeckClient[] = [];

  constructor(options: MonitorOptions) {
    this.config = options.config;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger;
    this.#startedAtMs = this.#clock.monotonicMs();
    const registry = createMetricsRegistry();
    this.registry = registry;
    this.malformed = new MalformedInputs(options.logger.child({ component: 'inputs' }), registry);
    const { settings, servers } = this.config;
    this.store = new DeviceStore(
      this.#clock,
      servers.map((s) => ({
        id: s.id,
        name: s.name,
        type: s.type,
        ip: s.ip,
        port: serverPort(s, settings),
        framerate: s.framerate ?? settings.defaultFramerate,
      })),
    );
    this.app = buildHttpApp({ ...this.#healthContext(), logger: options.logger, registry });
    const common = {
      defaultFramerate: settings.defaultFramerate,
      store: this.store,
      clock: this.#clock,
      malformed: this.malformed,
    };
    const oscByPort = new Map<number, OscServerConfig[]>();
    for (const s of servers) {
      if (s.type === 'osc_player') {
        const port = serverPort(s, settings);
        oscByPort.set(port, [...(oscByPort.get(port) ?? []), s]);
      } else if (s.type === 'http_mixer') {
        this.#pollers.push(
          new VmixPoller({
            ...common,
            server: s,
            port: serverPort(s, settings),
            logger: options.logger.child({ component: 'vmix' }),
          }),
        );
      } else {
        this.#decks.push(
          new HyperdeckClient({
            ...common,
            server: s,
            port: serverPort(s, settings),
            logger: options.logger.child({ component: 'hyperdeck' }),
          }),
        );
      }
    }
    for (const [port, list] of oscByPort) {
      this.#osc.push({
        configured: port,
        input: new OscInput({
          ...common,
          port,
          bindAddress: settings.bindAddress,
          servers: list,
          logger: options.logger.child({ component: 'osc' }),
        }),
      });
    }
    this.store.onChange((c) => {
      if (c.fields.includes('state') || c.fields.includes('connected')) {
        this.#logger.info(
          {
            device: c.id,
            name: c.state.name,
            state: c.state.state,
            from: c.previous.state,
            reason: c.state.reason,
          },
          'device state',
        );
      }
    });
  }

  health(): HealthBody {
    return healthBody(this.#healthContext());
  }

  /** What /health is made of; shared by the HTTP app and health(). */
  #healthContext() {
    return {
      store: this.store,
      config: this.config,
      version: VERSION,
      startedAtMs: this.#startedAtMs,
      monotonicMs: () => this.#clock.monotonicMs(),
      now: () => this.#clock.now(),
      malformed: this.malformed,
    };
  }

  /** Bind the OSC sockets, start polling and connecting, listen for HTTP on `httpPort` (default: config). */
  async start(httpPort = this.config.settings.webSocketPort): Promise<StartedMonitor> {
    const oscPorts = await this.startInputs();
    await this.app.listen({ port: httpPort, host: this.config.settings.bindAddress });
    return { httpUrl: listeningUrl(this.app), oscPorts };
  }

  /** Only the inputs (the outputs' service runs its own HTTP server and swaps monitors on a new config). */
  async startInputs(): Promise<Map<number, number>> {
    const oscPorts = new Map<number, number>();
    for (const o of this.#osc) oscPorts.set(o.configured, await o.input.start());
    for (const p of this.#pollers) p.start();
    for (const d of this.#decks) d.start();
    return oscPorts;
  }

  async closeInputs(): Promise<void> {
    for (const p of this.#pollers) p.close();
    for (const d of this.#decks) d.close();
    for (const o of this.#osc) await o.input.close();
  }

  async close(): Promise<void> {
    await this.closeInputs();
    await this.app.close();
  }
}
