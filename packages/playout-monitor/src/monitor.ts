/**
 * The monitor's inputs: configuration in, device inputs running, the normalised store and its change
 * stream, the inputs' metrics registry. No HTTP here: `PlayoutService` (playout-service.ts) builds the one
 * HTTP app on top of it; the bench drives the inputs alone.
 */
import { createMetricsRegistry, systemClock, type Clock, type Logger } from '@broadcast-ops/core';
import { serverPort, type MonitorConfig, type OscServerConfig, type ServerConfig } from './config.ts';
import { DeviceStore } from './domain/device-store.ts';
import { HyperdeckClient } from './io/hyperdeck-client.ts';
import { OscInput } from './io/osc-input.ts';
import { RetryGrid } from './io/retry-grid.ts';
import { VmixPoller } from './io/vmix-poller.ts';
import { MalformedInputs } from './malformed.ts';

export interface MonitorOptions {
  config: MonitorConfig;
  logger: Logger;
  clock?: Clock;
  /** Shared with the outputs (the TSL refresh at rest); one of its own without. */
  retryGrid?: RetryGrid;
}

type DeviceInput = VmixPoller | HyperdeckClient;

function oscGroupKey(list: OscServerConfig[], settings: MonitorConfig['settings']): string {
  return JSON.stringify(list.map((s) => inputKey(s, settings)));
}

/** What an input depends on, beyond the device's name: equal keys mean the running input can stay. */
function inputKey(s: ServerConfig, settings: MonitorConfig['settings']): string {
  const { name: _name, ...rest } = s;
  return JSON.stringify({
    ...rest,
    port: serverPort(s, settings),
    defaultFramerate: settings.defaultFramerate,
    ...(s.type === 'osc_player' ? { bindAddress: settings.bindAddress } : {}),
  });
}

function identities(config: MonitorConfig) {
  const { settings, servers } = config;
  return servers.map((s) => ({
    id: s.id,
    name: s.name,
    type: s.type,
    ip: s.ip,
    port: serverPort(s, settings),
    framerate: s.framerate ?? settings.defaultFramerate,
  }));
}

export class Monitor {
  #config: MonitorConfig;
  readonly store: DeviceStore;
  readonly malformed: MalformedInputs;
  /** Prometheus registry of this monitor's inputs (served on /metrics). */
  readonly registry: ReturnType<typeof createMetricsRegistry>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  /** One OSC socket per configured port, with the input key of every server it serves. */
  readonly #osc = new Map<number, { key: string; input: OscInput; bound: number | undefined }>();
  /** vMix pollers and HyperDeck clients by device id, with their input key. */
  readonly #inputs = new Map<number, { key: string; input: DeviceInput }>();
  #started = false;
  /** The absent devices' retries at their cap, in one wake per instant (io/retry-grid.ts). */
  readonly #retryGrid: RetryGrid;

  constructor(options: MonitorOptions) {
    this.#config = options.config;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger;
    this.#retryGrid = options.retryGrid ?? new RetryGrid(this.#clock);
    const registry = createMetricsRegistry();
    this.registry = registry;
    this.malformed = new MalformedInputs(options.logger.child({ component: 'inputs' }), registry);
    this.store = new DeviceStore(this.#clock, identities(this.#config));
    this.#build();
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

  get config(): MonitorConfig {
    return this.#config;
  }

  /** Create the inputs the configuration needs and that do not run yet (nothing is started here). */
  #build(): { osc: number[]; inputs: number[] } {
    const { settings, servers } = this.#config;
    const common = {
      defaultFramerate: settings.defaultFramerate,
      store: this.store,
      clock: this.#clock,
      malformed: this.malformed,
      retryGrid: this.#retryGrid,
    };
    const created = { osc: [] as number[], inputs: [] as number[] };
    const oscByPort = new Map<number, OscServerConfig[]>();
    for (const s of servers) {
      if (s.type === 'osc_player') {
        const port = serverPort(s, settings);
        oscByPort.set(port, [...(oscByPort.get(port) ?? []), s]);
        continue;
      }
      if (this.#inputs.has(s.id)) continue;
      const key = inputKey(s, settings);
      const port = serverPort(s, settings);
      const input =
        s.type === 'http_mixer'
          ? new VmixPoller({ ...common, server: s, port, logger: this.#logger.child({ component: 'vmix' }) })
          : new HyperdeckClient({
              ...common,
              server: s,
              port,
              logger: this.#logger.child({ component: 'hyperdeck' }),
            });
      this.#inputs.set(s.id, { key, input });
      created.inputs.push(s.id);
    }
    for (const [port, list] of oscByPort) {
      if (this.#osc.has(port)) continue;
      this.#osc.set(port, {
        key: oscGroupKey(list, settings),
        bound: undefined,
        input: new OscInput({
          ...common,
          port,
          bindAddress: settings.bindAddress,
          servers: list,
          logger: this.#logger.child({ component: 'osc' }),
        }),
      });
      created.osc.push(port);
    }
    return created;
  }

  /**
   * Apply a new configuration per device: an input whose key is unchanged (the device may have been
   * renamed) keeps running and its device keeps its state; removed devices' inputs close; added or
   * re-addressed devices get a new input and start from `offline`. CasparCG servers sharing an OSC port
   * share one socket: a change to one of them restarts that port's input (the others keep their state in
   * the store until their next bundle, a fraction of a second later).
   */
  async reconfigure(next: MonitorConfig): Promise<Map<number, number>> {
    const { settings, servers } = next;
    const byId = new Map(servers.map((s) => [s.id, s]));
    const reset = new Set<number>();
    for (const [id, unit] of this.#inputs) {
      const s = byId.get(id);
      if (!s || inputKey(s, settings) !== unit.key) {
        unit.input.close();
        this.#inputs.delete(id);
        if (s) reset.add(id);
      }
    }
    const groups = new Map<number, OscServerConfig[]>();
    for (const s of servers) {
      if (s.type !== 'osc_player') continue;
      const port = serverPort(s, settings);
      groups.set(port, [...(groups.get(port) ?? []), s]);
    }
    const prevById = new Map(this.#config.servers.map((s) => [s.id, s]));
    for (const [port, group] of this.#osc) {
      const list = groups.get(port);
      if (list && oscGroupKey(list, settings) === group.key) continue;
      await group.input.close();
      this.#osc.delete(port);
    }
    for (const s of servers) {
      const prev = prevById.get(s.id);
      if (prev && inputKey(prev, this.#config.settings) !== inputKey(s, settings)) reset.add(s.id);
    }
    this.#config = next;
    this.store.reconfigure(identities(next), reset);
    const created = this.#build();
    if (this.#started) {
      for (const port of created.osc) {
        const g = this.#osc.get(port);
        if (g) g.bound = await g.input.start();
      }
      for (const id of created.inputs) this.#inputs.get(id)?.input.start();
    }
    return this.#oscPorts();
  }

  #oscPorts(): Map<number, number> {
    const out = new Map<number, number>();
    for (const [port, g] of this.#osc) if (g.bound !== undefined) out.set(port, g.bound);
    return out;
  }

  /**
   * Bind the OSC sockets, start polling and connecting. Resolves with the bound OSC port per configured
   * OSC port (they differ only when 0 was configured).
   */
  async start(): Promise<Map<number, number>> {
    this.#started = true;
    for (const g of this.#osc.values()) g.bound = await g.input.start();
    for (const { input } of this.#inputs.values()) input.start();
    return this.#oscPorts();
  }

  async close(): Promise<void> {
    this.#started = false;
    for (const { input } of this.#inputs.values()) input.close();
    for (const g of this.#osc.values()) await g.input.close();
  }
}
