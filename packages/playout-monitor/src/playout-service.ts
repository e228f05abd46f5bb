/**
 * The whole playout monitor as one process (app.ts wraps it as core's `Service`): the inputs (a `Monitor`,
 * inputs only), the output view, and the outputs on their ports: the one HTTP app (pages, `/health`,
 * `/metrics`, the device and control API, behind core's Host guard) with
 * the WebSocket on `settings.webSocketPort`, Ember+ on `settings.emberPlusPort`, TSL UMD to
 * `settings.tslUmdDestinations`. A new configuration from the control API is saved, then applied per
 * device (Monitor.reconfigure): untouched devices keep their inputs and state; the outputs keep running.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import {
  bearerToken,
  createHttpApp,
  hostAllowed,
  installHostGuard,
  listeningUrl,
  systemClock,
  type Clock,
  type Logger,
} from '@broadcast-ops/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { configSchema, serverPort, type MonitorConfig, type ServerConfig } from './config.ts';
import { OutputView } from './domain/output-view.ts';
import { fail } from './errors.ts';
import { writeConfigAtomically } from './io/config-file.ts';
import { allowedHostNames } from './io/access.ts';
import { registerControlApi, type ApplyResult, type ControlPort } from './io/control-api.ts';
import { EmberProvider } from './io/ember-provider.ts';
import { healthBody, type HealthBody } from './io/health.ts';
import { registerPages } from './io/pages.ts';
import { probe } from './io/port-probe.ts';
import { PunchTallyOutput, type PunchTallySession } from './io/punch-tally.ts';
import { RetryGrid } from './io/retry-grid.ts';
import { resolveTslHost, TslSender } from './io/tsl-sender.ts';
import { WsOutput } from './io/ws-output.ts';
import { Monitor } from './monitor.ts';
import { VERSION } from './version.ts';

/** The stale guard's check period while the view needs it (docs/OUTPUTS.md "Stale guard"). */
const VIEW_TICK_MS = 250;

export interface PlayoutServiceOptions {
  config: MonitorConfig;
  logger: Logger;
  /** Where PUTs of the configuration are saved; without it the control API refuses to change it. */
  configPath?: string | undefined;
  /** When set, mutating control endpoints need `Authorization: Bearer <token>`. */
  adminToken?: string | undefined;
  clock?: Clock;
  /** Where `settings.punchTally[].adminTokenEnv` names are read (default: the process environment). */
  env?: NodeJS.ProcessEnv;
  /** Tests: shorter TSL refresh. */
  tslRefreshMs?: number;
  /** Tests: a shorter interval between two "TSL destination refusing" warnings (default 60 s). */
  tslWarnIntervalMs?: number;
}

export interface StartedService {
  httpUrl: string;
  emberPort: number;
  oscPorts: Map<number, number>;
}

/** How old a device's data may get before the outputs stop showing it as playing (per device kind). */
export function staleAfterMs(s: ServerConfig): number {
  switch (s.type) {
    case 'osc_player':
      return s.staleTimeoutMs;
    case 'http_mixer':
      return s.offlineAfterFailures * (s.pollIntervalMs + s.timeoutMs) + 1000;
    case 'tcp_recorder':
      return s.timeoutMs + 1000;
  }
}

function staleMap(config: MonitorConfig): Map<number, number> {
  return new Map(config.servers.map((s) => [s.id, staleAfterMs(s)]));
}

export class PlayoutService implements ControlPort {
  readonly app: FastifyInstance;
  readonly view: OutputView;
  readonly #o: PlayoutServiceOptions;
  readonly #clock: Clock;
  /** The absent devices' retries and the TSL rest rounds share its instants: one wake (io/retry-grid.ts). */
  readonly #retryGrid: RetryGrid;
  readonly #startedAtMs: number;
  #config: MonitorConfig;
  #monitor: Monitor;
  #ember: EmberProvider;
  #tsl: TslSender;
  #punch: PunchTallyOutput | undefined;
  readonly #ws: WsOutput;
  #tick: NodeJS.Timeout | undefined;
  #tickWake: (() => void)[] = [];
  #oscPorts = new Map<number, number>();
  /** Configuration changes run one at a time. */
  #applying: Promise<unknown> = Promise.resolve();
  /** The admin token's SHA-256, taken by the first check (node:crypto is then loaded on use, not at start). */
  #tokenHash: Buffer | undefined;
  #allowedHosts: readonly string[];

  constructor(options: PlayoutServiceOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#retryGrid = new RetryGrid(this.#clock);
    this.#startedAtMs = this.#clock.monotonicMs();
    this.#config = options.config;
    this.view = new OutputView(this.#clock);
    this.#monitor = this.#newMonitor(options.config);
    this.view.attach(this.#monitor.store, staleMap(options.config));
    this.#ember = this.#newEmber(options.config);
    this.#tsl = this.#newTsl(options.config);
    this.#ws = new WsOutput({
      view: this.view,
      updateIntervalMs: options.config.settings.updateIntervalMs,
      logger: options.logger.child({ component: 'websocket' }),
      protocols: () => this.#protocols(),
      config: () => this.publicConfig(),
      hostAllowed: (host) => hostAllowed(host, this.#allowedHosts),
    });
    this.app = createHttpApp({ logger: options.logger });
    this.#allowedHosts = allowedHostNames(options.config.settings);
    // DNS rebinding: every route (and the WebSocket upgrade, in WsOutput) answers only to known names.
    installHostGuard(this.app, () => this.#allowedHosts);
    this.app.get('/health', () => this.health());
    this.app.get('/api/devices', () => this.view.list());
    this.app.get<{ Params: { id: string } }>('/api/devices/:id', (req) => {
      const device = this.view.get(Number(req.params.id));
      if (!device) throw fail('DEVICE_NOT_FOUND', `no device with id ${req.params.id}`);
      return device;
    });
    this.app.get('/metrics', async (_req, reply) => {
      void reply.header('content-type', this.#monitor.registry.contentType);
      return this.#monitor.registry.metrics();
    });
    registerControlApi(this.app, this);
    registerPages(this.app);
  }

  get config(): MonitorConfig {
    return this.#config;
  }

  get monitor(): Monitor {
    return this.#monitor;
  }

  get emberPort(): number {
    return this.#ember.port;
  }

  get canSave(): boolean {
    return this.#o.configPath !== undefined;
  }

  publicConfig(): MonitorConfig {
    const { punchTally, ...settings } = this.#config.settings;
    return {
      ...this.#config,
      // Admin tokens of punch sessions never leave the monitor.
      settings: {
        ...settings,
        ...(punchTally
          ? { punchTally: punchTally.map((p) => (p.adminToken ? { ...p, adminToken: '********' } : p)) }
          : {}),
      },
      servers: this.#config.servers.map((s) =>
        s.type === 'http_mixer' && s.password !== undefined ? { ...s, password: '********' } : s,
      ),
    };
  }

  /** Throws 401 unless no token is configured or the request carries it (compared in constant time). */
  authorize(req: FastifyRequest): void {
    const adminToken = this.#o.adminToken;
    if (!adminToken) return;
    this.#tokenHash ??= sha256(adminToken);
    const token = bearerToken(req.headers.authorization);
    if (token === undefined || !timingSafeEqual(sha256(token), this.#tokenHash)) {
      throw fail('UNAUTHORIZED', 'this endpoint needs Authorization: Bearer <admin token>', {
        headers: { 'www-authenticate': 'Bearer' },
      });
    }
  }

  health(): HealthBody {
    const body = healthBody({
      store: this.#monitor.store,
      config: this.#config,
      version: VERSION,
      startedAtMs: this.#startedAtMs,
      monotonicMs: () => this.#clock.monotonicMs(),
      now: () => this.#clock.now(),
      malformed: this.#monitor.malformed,
    });
    // The outputs' view (a simulated device shows as the outputs show it).
    const list = this.view.list();
    const connected = list.filter((d) => d.connected).length;
    return {
      ...body,
      status: connected > 0 ? 'healthy' : 'degraded',
      devices: {
        total: list.length,
        connected,
        list: list.map((d) => ({
          id: d.id,
          name: d.name,
          type: d.type,
          connected: d.connected,
          state: d.state,
        })),
      },
      protocols: this.#protocols(),
    };
  }

  #protocols(): HealthBody['protocols'] {
    return {
      websocket: { clients: this.#ws.clients },
      emberPlus: {
        enabled: true,
        running: this.#ember.running,
        port: this.#ember.running ? this.#ember.port : this.#config.settings.emberPlusPort,
        consumers: this.#ember.consumers,
        droppedConsumers: { ...this.#ember.dropped },
      },
      tslUmd: {
        enabled: this.#tsl.enabled,
        running: this.#tsl.running,
        destinations: this.#config.settings.tslUmdDestinations.length,
        destinationStatus: this.#tsl.destinations(),
        failing: this.#tsl
          .destinations()
          .filter((d) => !d.ok)
          .map((d) => ({ host: d.host, port: d.port, error: d.error ?? 'not connected' })),
      },
    };
  }

  #newMonitor(config: MonitorConfig): Monitor {
    return new Monitor({ config, logger: this.#o.logger, clock: this.#clock, retryGrid: this.#retryGrid });
  }

  #newEmber(config: MonitorConfig, port = config.settings.emberPlusPort): EmberProvider {
    return new EmberProvider({
      view: this.view,
      port,
      address: config.settings.listenAddress,
      version: VERSION,
      logger: this.#o.logger.child({ component: 'emberplus' }),
    });
  }

  #newTsl(config: MonitorConfig): TslSender {
    return new TslSender({
      view: this.view,
      destinations: config.settings.tslUmdDestinations,
      screen: config.settings.tslUmdScreen,
      packing: config.settings.tslUmdPacking,
      shutdownState: config.settings.tslUmdShutdownState,
      logger: this.#o.logger.child({ component: 'tsl' }),
      restGrid: this.#retryGrid,
      tallyInputs: () =>
        new Map(
          this.#config.servers.flatMap((s) =>
            s.type === 'http_mixer' && s.tallyInputs ? [[s.id, s.tallyInputs] as const] : [],
          ),
        ),
      ...(this.#o.tslRefreshMs !== undefined ? { refreshMs: this.#o.tslRefreshMs } : {}),
      ...(this.#o.tslWarnIntervalMs !== undefined ? { warnIntervalMs: this.#o.tslWarnIntervalMs } : {}),
    });
  }

  async start(ports: { http?: number; ember?: number } = {}): Promise<StartedService> {
    this.#oscPorts = await this.#monitor.start();
    if (ports.ember !== undefined) this.#ember = this.#newEmber(this.#config, ports.ember);
    // TSL first: its listener runs first on every change (the tightest latency target).
    await this.#tsl.start();
    await this.#ember.start();
    this.#ws.attach(this.app.server);
    await this.app.listen({
      port: ports.http ?? this.#config.settings.webSocketPort,
      host: this.#config.settings.listenAddress,
    });
    // The stale guard's check (docs/OUTPUTS.md): every 250 ms while the view needs it, asleep otherwise;
    // a change that makes it needed again comes with a change or reset event.
    this.#tickWake = [
      this.view.onChange(() => this.#armViewTick()),
      this.view.onReset(() => this.#armViewTick()),
    ];
    this.#armViewTick();
    this.#punch = new PunchTallyOutput({
      view: this.view,
      sessions: this.#punchSessions(),
      logger: this.#o.logger.child({ component: 'punch-tally' }),
    });
    this.#punch.start();
    return { httpUrl: listeningUrl(this.app), emberPort: this.#ember.port, oscPorts: this.#oscPorts };
  }

  /** True while the view's 250 ms check runs (tests; docs/OUTPUTS.md "Stale guard"). */
  get viewTicking(): boolean {
    return this.#tick !== undefined;
  }

  #armViewTick(): void {
    if (this.#tick || !this.view.needsTick) return;
    this.#tick = setInterval(() => {
      this.view.tick();
      if (!this.view.needsTick) {
        clearInterval(this.#tick);
        this.#tick = undefined;
      }
    }, VIEW_TICK_MS);
    this.#tick.unref();
  }

  get oscPorts(): Map<number, number> {
    return this.#oscPorts;
  }

  /**
   * Validate, save (atomically), then apply a new configuration without a restart. Nothing is applied
   * unless it was saved. The HTTP port and address cannot move under the request that asks for it: they
   * are saved and named in `restartRequired`.
   */
  applyConfig(candidate: unknown): Promise<ApplyResult> {
    const run = this.#applying.then(() => this.#apply(candidate));
    this.#applying = run.catch(() => undefined);
    return run;
  }

  async #apply(candidate: unknown): Promise<ApplyResult> {
    const parsed = configSchema.safeParse(candidate);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw fail('CONFIG_INVALID', `${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`, {
        details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
      });
    }
    const next = parsed.data;
    if (!this.#o.configPath) throw fail('CONFIG_NOT_SAVED');
    // A TSL destination whose name does not resolve cannot be applied: refuse it before saving.
    for (const [i, d] of next.settings.tslUmdDestinations.entries()) {
      try {
        await resolveTslHost(d.host);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'error';
        throw fail(
          'CONFIG_INVALID',
          `settings.tslUmdDestinations.${i}.host: cannot resolve ${d.host} (${code})`,
          {
            details: {
              issues: [
                { path: `settings.tslUmdDestinations.${i}.host`, message: `cannot resolve (${code})` },
              ],
            },
          },
        );
      }
    }
    // Nothing changed: nothing to save, and the inputs keep their connections.
    if (JSON.stringify(next) === JSON.stringify(this.#config))
      return { config: this.publicConfig(), restartRequired: [] };
    // What could fail while applying (binding a new OSC port or a moved Ember+ port) is tried first:
    // a change that cannot be applied is refused and not saved.
    await this.#preflight(next);
    try {
      await writeConfigAtomically(this.#o.configPath, next);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EDQUOT')
        throw fail(
          'STORAGE_FULL',
          `the configuration was not saved: the disk is full (${code}); nothing changed`,
        );
      throw fail(
        'CONFIG_WRITE_FAILED',
        `the configuration was not saved (${code ?? 'error'}); nothing changed`,
      );
    }
    const prev = this.#config;
    this.#config = next;
    this.#allowedHosts = allowedHostNames(next.settings);
    const restartRequired: string[] = [];
    if (next.settings.webSocketPort !== prev.settings.webSocketPort)
      restartRequired.push('settings.webSocketPort');
    if (next.settings.listenAddress !== prev.settings.listenAddress)
      restartRequired.push('settings.listenAddress');
    // Inputs, per device: unchanged and renamed devices keep their connection and state; only added,
    // removed or re-addressed devices' inputs are closed or opened (Monitor.reconfigure).
    this.#oscPorts = await this.#monitor.reconfigure(next);
    this.view.setStaleAfter(staleMap(next));
    this.#ws.updateIntervalMs = next.settings.updateIntervalMs;
    const s = next.settings;
    const p = prev.settings;
    if (
      JSON.stringify([s.tslUmdDestinations, s.tslUmdScreen, s.tslUmdPacking, s.tslUmdShutdownState]) !==
      JSON.stringify([p.tslUmdDestinations, p.tslUmdScreen, p.tslUmdPacking, p.tslUmdShutdownState])
    ) {
      await this.#tsl.close();
      this.#tsl = this.#newTsl(next);
      await this.#tsl.start();
    }
    if (s.emberPlusPort !== p.emberPlusPort) {
      await this.#ember.close();
      this.#ember = this.#newEmber(next);
      await this.#ember.start();
    }
    this.#o.logger.info({ devices: next.servers.length, restartRequired }, 'configuration applied');
    return { config: this.publicConfig(), restartRequired };
  }

  async #preflight(next: MonitorConfig): Promise<void> {
    const s = next.settings;
    const current = new Set(
      this.#config.servers
        .filter((x) => x.type === 'osc_player')
        .map((x) => serverPort(x, this.#config.settings)),
    );
    const sameBind = s.bindAddress === this.#config.settings.bindAddress;
    for (const server of next.servers) {
      if (server.type !== 'osc_player') continue;
      const port = serverPort(server, s);
      if (port === 0 || (sameBind && current.has(port))) continue;
      await probe('udp', s.bindAddress, port, `servers (id ${server.id}): OSC port ${port}`);
    }
    if (s.emberPlusPort !== this.#config.settings.emberPlusPort && s.emberPlusPort !== 0)
      await probe('tcp', s.listenAddress, s.emberPlusPort, `settings.emberPlusPort ${s.emberPlusPort}`);
  }

  /** The punch sessions with their admin token (config, else environment); one without a token is skipped. */
  #punchSessions(): PunchTallySession[] {
    const out: PunchTallySession[] = [];
    for (const p of this.#config.settings.punchTally ?? []) {
      const adminToken =
        p.adminToken ?? (p.adminTokenEnv ? (this.#o.env ?? process.env)[p.adminTokenEnv] : undefined);
      if (!adminToken) {
        this.#o.logger.error(
          { session: p.session, adminTokenEnv: p.adminTokenEnv },
          'punch tally: no admin token (settings.punchTally[].adminToken or the variable adminTokenEnv names)',
        );
        continue;
      }
      out.push({ brokerUrl: p.brokerUrl, session: p.session, adminToken, inputs: p.inputs });
    }
    return out;
  }

  /** Stop: the final TSL packet (tallies to the shutdown state) first, then every output and input. */
  async close(): Promise<void> {
    for (const u of this.#tickWake) u();
    this.#tickWake = [];
    if (this.#tick) clearInterval(this.#tick);
    this.#tick = undefined;
    this.#punch?.close();
    await this.#tsl.sendFinal().catch(() => undefined);
    await this.#ws.close();
    await this.#ember.close();
    await this.#tsl.close();
    await this.#monitor.close();
    await this.app.close();
  }
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
