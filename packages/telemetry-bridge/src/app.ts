/**
 * Assembles one bridge (docs/ARCHITECTURE.md "One skeleton"): event log → hub → adapters → client transport
 * (with the console) → metrics and health servers. `bridgeApp` is what main.ts's `runService` creates;
 * `createBridge` is the same `Service` without the demo; `startBridge` builds and starts at once (tests, bench
 * and code that embeds the bridge: port 0, a fake adapter, a `ManualClock`).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  listeningUrl,
  systemClock,
  type Clock,
  type Logger,
  type Service,
  type ServiceContext,
  type ServiceHealth,
} from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import type { BridgeConfig } from './config.ts';
import type { Adapter } from './domain/adapter.ts';
import { companionAdapterFromConfig } from './io/companion/index.ts';
import { identityFile } from './io/identity-file.ts';
import { Hub } from './domain/hub.ts';
import { UuidV7Generator } from './domain/ids.ts';
import { EventLog } from './io/event-log.ts';
import {
  buildHealthApp,
  buildMetricsApp,
  createBridgeMetrics,
  overallStatus,
  type BridgeMetrics,
  type DependencyCheck,
} from './io/observability.ts';
import { WsTransport } from './io/ws-transport.ts';
import { buildConsoleApp } from './io/console-http.ts';
import { CommandTap } from './io/command-tap.ts';
import { isLoopback } from './io/request-origin.ts';
import { withCompanionSimulator } from './companion-demo.ts';

export const SERVER_VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export interface BridgeOptions {
  config: BridgeConfig;
  logger: Logger;
  clock?: Clock;
  adapters?: Adapter[];
  /** Base directory for a relative eventLog.path (default: the current directory). */
  cwd?: string;
}

export interface RunningBridge {
  hub: Hub;
  metrics: BridgeMetrics;
  eventLog: EventLog | undefined;
  transport: WsTransport;
  clientUrl: string;
  /** The web console and state API (docs/console.md), on the client transport's port. */
  consoleUrl: string | undefined;
  metricsUrl: string | undefined;
  healthUrl: string | undefined;
  /** The dependency checks of `GET /health`, summed up (README "Endpoints"). */
  health(): ServiceHealth;
  /** The fields of the 'telemetry bridge listening' log line. */
  describe(): Record<string, unknown>;
  close(): Promise<void>;
}

/** The bridge as a `Service`: nothing opens before `start`; `running` is set while it runs. */
export interface BridgeService extends Service {
  readonly running: RunningBridge | undefined;
}

export function createBridge(options: BridgeOptions): BridgeService {
  let running: RunningBridge | undefined;
  return {
    get running() {
      return running;
    },
    start: async () => {
      running = await startBridge(options);
    },
    close: async () => {
      const r = running;
      running = undefined;
      await r?.close();
    },
    health: () => running?.health() ?? { status: 'unhealthy', reason: 'not running' },
    describe: () => running?.describe() ?? {},
  };
}

/**
 * What `runService` creates: the bridge on the configured ports with the process's clock; with
 * `--companion-sim` and no Companion configured, on a Companion simulator started first (demo).
 */
export function bridgeApp(ctx: ServiceContext<BridgeConfig>): Service {
  const build = (config: BridgeConfig): BridgeService =>
    createBridge({ config, logger: ctx.logger, clock: ctx.clock });
  if (ctx.values['companion-sim'] !== true || ctx.config.companion.enabled) return build(ctx.config);
  return withCompanionSimulator(ctx.config, ctx.logger, build);
}

export async function startBridge(options: BridgeOptions): Promise<RunningBridge> {
  const { config, logger } = options;
  const clock = options.clock ?? systemClock;
  const startedAt = clock.now();
  const metrics = createBridgeMetrics();
  const ids = new UuidV7Generator(() => clock.now());
  let eventLog: EventLog | undefined;
  if (config.eventLog.enabled) {
    eventLog = new EventLog({
      dir: resolve(options.cwd ?? process.cwd(), config.eventLog.path),
      maxFileBytes: config.eventLog.maxFileSize,
      maxFiles: config.eventLog.maxFiles,
      newEpoch: () => ids.next(),
      now: () => clock.now(),
      syncIntervalMs: config.eventLog.syncInterval,
      sync: config.eventLog.fsync,
    });
    eventLog.open();
    const r = eventLog.report;
    const log = logger.child({ component: 'event-log' });
    if (r.damage)
      log.error(
        { ...r, epoch: eventLog.epoch },
        'event log damaged: kept the readable records, quarantined the rest, new epoch',
      );
    else if (r.newEpoch) log.warn({ ...r, epoch: eventLog.epoch }, 'event log opened in a new epoch');
    else log.info({ ...r, epoch: eventLog.epoch }, 'event log opened');
  }
  const ct = config.clientTransport;
  // Recent commands for the console, read off the log feed (or standing in for a disabled log).
  const commandTap = new CommandTap(eventLog);
  const hub = new Hub({
    clock,
    logger,
    metrics,
    log: commandTap,
    ...(eventLog ? { epoch: eventLog.epoch } : {}),
    ...(eventLog?.recovered ? { recovered: eventLog.recovered } : {}),
    ...(eventLog && config.clientTransport.requireAuth
      ? { identities: identityFile(resolve(options.cwd ?? process.cwd(), config.eventLog.path)) }
      : {}),
    limits: {
      rateLimit: ct.rateLimit,
      rateLimitWindowMs: ct.rateLimitWindow,
      maxPatternsPerClient: ct.maxPatternsPerClient,
      maxPendingSnapshotKeys: ct.maxPendingSnapshotKeys,
      defaultCommandTimeoutMs: config.commands.defaultTimeout,
      idempotencyWindowMs: config.commands.idempotencyWindow,
      maxCommandsInFlightPerClient: config.commands.maxInFlightPerClient,
      replayRingSize: config.replay.ringSize,
      replayRingBytes: config.replay.maxBytes,
      maxKeysPerClient: ct.maxKeysPerClient,
      departedKeyTtlMs: ct.departedKeyTtl,
      outbound: {
        softLimitBytes: ct.backpressure.softLimitBytes,
        hardLimitBytes: ct.backpressure.hardLimitBytes,
        maxQueuedMessages: ct.backpressure.maxQueuedMessages,
        pollMs: 5,
      },
    },
  });
  for (const a of options.adapters ?? []) hub.registerAdapter(a);
  // The Companion Satellite adapter (docs/companion.md), unless the caller brought its own.
  if (config.companion.enabled && !(options.adapters ?? []).some((a) => a.name === 'companion.satellite')) {
    hub.registerAdapter(companionAdapterFromConfig(config.companion));
  }
  // The new segment (if any) starts with a checkpoint of the recovered state; then restored keys go stale.
  eventLog?.start(() => hub.store.checkpoint());
  hub.markRecovered();

  const consoleApp = config.console.enabled
    ? buildConsoleApp({
        logger,
        hub,
        requireAuth: ct.requireAuth,
        authTokens: ct.authTokens,
        allowedHosts: config.console.allowedHosts,
        eventLog,
        commands: commandTap,
        serverVersion: SERVER_VERSION,
      })
    : undefined;
  await consoleApp?.ready();
  const transport = new WsTransport(
    hub,
    {
      host: ct.host,
      port: ct.port,
      maxClients: ct.maxClients,
      maxMessageSize: ct.maxMessageSize,
      heartbeatIntervalMs: ct.heartbeatInterval,
      requireAuth: ct.requireAuth,
      authTokens: ct.authTokens,
      handshakeTimeoutMs: ct.handshakeTimeout,
      idleTimeoutMs: ct.idleTimeout,
      serverVersion: SERVER_VERSION,
      allowedHosts: config.console.allowedHosts,
      allowedOrigins: ct.allowedOrigins,
      ...(consoleApp ? { server: consoleApp.server } : {}),
      // The log's records of this job are written before any frame leaves (README "Durability").
      ...(eventLog ? { beforeWrite: () => eventLog.writePending() } : {}),
    },
    clock,
    logger,
    {
      opened: () => {
        metrics.connectionOpened('client');
        metrics.clientsChanged();
      },
      closed: (reason) => {
        if (reason !== 'slow_consumer') metrics.disconnected('client', reason);
        metrics.clientsChanged();
      },
      authFailed: () => metrics.authFailed(),
      upgradeRefused: (reason) => metrics.upgradeRefused(reason),
    },
  );
  let metricsApp: FastifyInstance | undefined;
  let healthApp: FastifyInstance | undefined;
  // One teardown for both a failed start and close(): nothing started may outlive it (adapter timers or an
  // open log would keep a process that failed to start from exiting).
  const closeAll = async (): Promise<void> => {
    await transport.close();
    if (consoleApp) {
      // The transport listens on the console app's server, so fastify does not close it: the app's close
      // starts first (core's close rules: a connection that never sent a byte, a page's preconnect, ends at
      // once; the rest after a grace), then the server's.
      const srv = consoleApp.server;
      const appClosed = consoleApp.close();
      srv.closeIdleConnections();
      await new Promise<void>((r) => (srv.listening ? srv.close(() => r()) : r()));
      await appClosed;
    }
    hub.abortAll();
    await hub.stopAdapters();
    await healthApp?.close();
    await metricsApp?.close();
    eventLog?.close();
    metrics.close();
  };
  if (!ct.requireAuth && !isLoopback(ct.host)) {
    // Anyone who can reach this address can press Companion's buttons (docs/protocol.md "Host and Origin").
    logger.warn(
      { component: 'client-transport', host: ct.host, port: ct.port },
      'client transport listens on a non-loopback address with requireAuth off: any client that can reach it may send commands',
    );
  }
  let clientPort: number;
  try {
    await hub.startAdapters();
    clientPort = await transport.listen();
  } catch (err) {
    await closeAll();
    throw err;
  }
  metrics.bind({ hub, clientConnections: () => transport.connections });

  const checks = (): DependencyCheck[] => {
    const now = clock.now();
    const t0 = clock.monotonicMs();
    const stats = hub.stats();
    const lat = (): number => Math.round((clock.monotonicMs() - t0) * 1000) / 1000;
    const list: DependencyCheck[] = [
      {
        name: 'state_store',
        status: 'healthy',
        latencyMs: lat(),
        lastCheck: now,
        metadata: { entries: stats.stateEntries },
      },
      {
        name: 'router',
        status: 'healthy',
        latencyMs: lat(),
        lastCheck: now,
        metadata: {
          patterns: stats.patterns,
          coalescingClients: stats.coalescingClients,
          streams: stats.streams,
          ringBytes: stats.ringBytes,
        },
      },
      {
        name: 'client_transport',
        status: transport.listening ? 'healthy' : 'unhealthy',
        latencyMs: lat(),
        lastCheck: now,
        metadata: { clients: transport.connections, port: clientPort },
      },
    ];
    if (eventLog) {
      list.push({
        name: 'event_log',
        status: eventLog.healthy ? 'healthy' : 'degraded',
        latencyMs: lat(),
        lastCheck: now,
        ...(eventLog.lastError ? { error: eventLog.lastError.message } : {}),
        metadata: {
          epoch: eventLog.epoch,
          offset: stats.offset,
          recovery: eventLog.report,
        },
      });
    }
    for (const a of hub.adapters()) {
      // A disconnected device degrades the service but keeps it ready (README "Endpoints").
      list.push({
        name: a.name,
        status: a.connected ? 'healthy' : 'degraded',
        latencyMs: lat(),
        lastCheck: now,
        metadata: { capabilities: a.capabilities },
      });
    }
    if (config.companion.enabled && !hub.adapters().some((a) => a.name === 'companion.satellite')) {
      list.push({
        name: 'companion',
        status: 'degraded',
        latencyMs: 0,
        lastCheck: now,
        error: 'adapter not implemented yet',
      });
    }
    return list;
  };

  let metricsUrl: string | undefined;
  let healthUrl: string | undefined;
  try {
    if (config.metrics.enabled) {
      metricsApp = buildMetricsApp(
        logger,
        metrics.registry,
        config.metrics.path,
        config.console.allowedHosts,
      );
      await metricsApp.listen({ host: config.metrics.host, port: config.metrics.port });
      metricsUrl = listeningUrl(metricsApp) + config.metrics.path;
    }
    if (config.health.enabled) {
      healthApp = buildHealthApp(
        logger,
        {
          version: SERVER_VERSION,
          startedAt,
          now: () => clock.now(),
          checks,
          metrics: () => {
            const s = hub.stats();
            return { stateEntries: s.stateEntries, subscriptions: s.subscriptions, clients: s.clients };
          },
        },
        config.console.allowedHosts,
      );
      await healthApp.listen({ host: config.health.host, port: config.health.port });
      healthUrl = listeningUrl(healthApp);
    }
  } catch (err) {
    await closeAll();
    throw err;
  }
  const clientHost = ct.host === '0.0.0.0' || ct.host === '::' ? '127.0.0.1' : ct.host;
  const clientUrl = `ws://${clientHost}:${clientPort}/`;
  const consoleUrl = consoleApp ? `http://${clientHost}:${clientPort}/` : undefined;
  return {
    hub,
    metrics,
    eventLog,
    transport,
    clientUrl,
    consoleUrl,
    metricsUrl,
    healthUrl,
    health: () => {
      const dependencies = checks();
      return { status: overallStatus(dependencies), dependencies };
    },
    describe: () => ({
      name: config.name,
      environment: config.environment,
      clients: clientUrl,
      console: consoleUrl,
      metrics: metricsUrl,
      health: healthUrl,
      epoch: hub.epoch,
      offset: hub.offset,
    }),
    close: closeAll,
  };
}
