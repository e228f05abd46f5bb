/**
 * Metrics (spec names plus the set in the README) and health endpoints (README "Endpoints"). Counters are fed by the hub's
 * HubMetrics calls; gauges are read from the hub when scraped, so they are always current and cost nothing
 * on the hot path.
 */
import {
  Counter,
  Gauge,
  Histogram,
  createMetricsRegistry,
  registerNodeMetrics,
  type NodeMetrics,
  type Logger,
  type Registry,
} from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import type { Hub } from '../domain/hub.ts';
import type { HubMetrics } from '../domain/metrics.ts';
import { bridgeHttpApp } from './http-app.ts';

export interface BridgeMetrics extends HubMetrics {
  registry: Registry;
  authFailed(): void;
  /** A WebSocket upgrade refused for its Host or Origin header. */
  upgradeRefused(reason: string): void;
  connectionOpened(type: string): void;
  disconnected(type: string, reason: string): void;
  /** Attach the live sources of the gauges. */
  bind(sources: { hub: Hub; clientConnections: () => number }): void;
  /**
   * A client session opened or closed: the event-loop-lag histogram runs while a client is connected or
   * an adapter's device link is up, and is stopped at rest (core's node-metrics.ts).
   */
  clientsChanged(): void;
  /** Node's default metrics' event-loop-lag histogram (running or stopped). */
  readonly eventLoopLag: Pick<NodeMetrics, 'active'>;
  /** Stop the lag histogram (the service closing). */
  close(): void;
}

export function createBridgeMetrics(): BridgeMetrics {
  // Node's defaults from core's registerNodeMetrics rather than `defaultMetrics: true`: the same set, with
  // the event-loop-lag histogram stopped while nothing is connected (core's node-metrics.ts).
  const registry = createMetricsRegistry();
  const nodeMetrics = registerNodeMetrics(registry);
  let sources: { hub: Hub; clientConnections: () => number } | undefined;
  const linksUp = new Set<string>();
  const updateLagMonitor = (): void => {
    nodeMetrics.setActive(linksUp.size > 0 || (sources?.hub.clientCount ?? 0) > 0);
  };
  new Gauge({
    name: 'telemetry_bridge_connections_current',
    help: 'Open connections by type',
    labelNames: ['type'],
    registers: [registry],
    collect() {
      if (!sources) return;
      this.set({ type: 'client' }, sources.clientConnections());
      this.set({ type: 'adapter' }, sources.hub.adapters().filter((a) => a.connected).length);
    },
  });
  const connectionsTotal = new Counter({
    name: 'telemetry_bridge_connections_total',
    help: 'Connections accepted by type',
    labelNames: ['type'],
    registers: [registry],
  });
  const disconnections = new Counter({
    name: 'telemetry_bridge_disconnections_total',
    help: 'Disconnections by type and reason',
    labelNames: ['type', 'reason'],
    registers: [registry],
  });
  const received = new Counter({
    name: 'telemetry_bridge_messages_received_total',
    help: 'Messages received by type and source namespace prefix',
    labelNames: ['type', 'source'],
    registers: [registry],
  });
  const sent = new Counter({
    name: 'telemetry_bridge_messages_sent_total',
    help: 'Message deliveries by type and target namespace prefix',
    labelNames: ['type', 'target'],
    registers: [registry],
  });
  const errors = new Counter({
    name: 'telemetry_bridge_message_errors_total',
    help: 'Error answers by message type and error code',
    labelNames: ['type', 'code'],
    registers: [registry],
  });
  const commands = new Counter({
    name: 'telemetry_bridge_commands_total',
    help: 'Commands by action and final ack status',
    labelNames: ['action', 'status'],
    registers: [registry],
  });
  const commandDuration = new Histogram({
    name: 'telemetry_bridge_command_duration_seconds',
    help: 'Time from command arrival to its final ack',
    labelNames: ['action'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  new Gauge({
    name: 'telemetry_bridge_state_entries_current',
    help: 'State store entries by owner',
    labelNames: ['owner'],
    registers: [registry],
    collect() {
      if (!sources) return;
      this.reset();
      for (const [owner, n] of sources.hub.store.countByOwner()) {
        // Owner prefix only: per-client namespaces would be unbounded label values.
        const label = owner.startsWith('app.') ? 'app' : owner;
        this.inc({ owner: label }, n);
      }
    },
  });
  const stateUpdates = new Counter({
    name: 'telemetry_bridge_state_updates_total',
    help: 'State changes by path prefix',
    labelNames: ['prefix'],
    registers: [registry],
  });
  new Gauge({
    name: 'telemetry_bridge_subscriptions_current',
    help: 'Active subscriptions',
    registers: [registry],
    collect() {
      if (sources) this.set(sources.hub.stats().subscriptions);
    },
  });
  new Gauge({
    name: 'telemetry_bridge_subscribers_current',
    help: 'Connected clients',
    registers: [registry],
    collect() {
      if (sources) this.set(sources.hub.stats().clients);
    },
  });
  new Gauge({
    name: 'telemetry_bridge_queue_size_current',
    help: 'Queued outgoing messages and bytes of coalescing clients',
    labelNames: ['queue'],
    registers: [registry],
    collect() {
      if (!sources) return;
      const s = sources.hub.stats();
      this.set({ queue: 'client_messages' }, s.queuedMessages);
      this.set({ queue: 'client_bytes' }, s.queuedBytes);
      this.set({ queue: 'commands_inflight' }, s.inflightCommands);
    },
  });
  const rateLimited = new Counter({
    name: 'telemetry_bridge_rate_limit_hits_total',
    help: 'Messages refused with RATE_LIMITED',
    labelNames: ['client'],
    registers: [registry],
  });
  const authFailures = new Counter({
    name: 'telemetry_bridge_auth_failures_total',
    help: 'Handshakes refused for missing or wrong credentials',
    registers: [registry],
  });
  const keysExpired = new Counter({
    name: 'telemetry_bridge_keys_expired_total',
    help: 'Keys of departed clients deleted after their retention time',
    registers: [registry],
  });
  const heldReleased = new Counter({
    name: 'telemetry_bridge_held_keys_released_total',
    help: 'Keys an adapter released on its device because their release was never confirmed (docs/companion.md)',
    labelNames: ['adapter'],
    registers: [registry],
  });
  const upgradesRefused = new Counter({
    name: 'telemetry_bridge_upgrades_refused_total',
    help: 'WebSocket upgrades refused for their Host or Origin header',
    labelNames: ['reason'],
    registers: [registry],
  });
  const adapterState = new Gauge({
    name: 'telemetry_bridge_adapter_state',
    help: '1 when the adapter is connected to its device, else 0',
    labelNames: ['adapter'],
    registers: [registry],
  });
  const adapterReconnects = new Counter({
    name: 'telemetry_bridge_adapter_reconnects_total',
    help: 'Adapter reconnect attempts',
    labelNames: ['adapter'],
    registers: [registry],
  });
  const adapterLatency = new Histogram({
    name: 'telemetry_bridge_adapter_latency_seconds',
    help: 'Adapter ping round trip',
    labelNames: ['adapter'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [registry],
  });

  return {
    registry,
    bind: (s) => {
      sources = s;
      updateLagMonitor();
    },
    clientsChanged: updateLagMonitor,
    eventLoopLag: nodeMetrics,
    close: () => nodeMetrics.close(),
    connectionOpened: (type) => connectionsTotal.inc({ type }),
    disconnected: (type, reason) => disconnections.inc({ type, reason }),
    messageReceived: (type, source) => received.inc({ type, source }),
    messagesSent: (type, target, count) => sent.inc({ type, target }, count),
    messageError: (type, code) => errors.inc({ type, code }),
    commandFinished: (action, status, seconds) => {
      commands.inc({ action, status });
      commandDuration.observe({ action }, seconds);
    },
    stateUpdate: (prefix) => stateUpdates.inc({ prefix }),
    rateLimited: (client) => rateLimited.inc({ client }),
    adapterState: (adapter, up) => {
      adapterState.set({ adapter }, up ? 1 : 0);
      if (up) linksUp.add(adapter);
      else linksUp.delete(adapter);
      updateLagMonitor();
    },
    adapterReconnect: (adapter) => adapterReconnects.inc({ adapter }),
    adapterLatency: (adapter, seconds) => adapterLatency.observe({ adapter }, seconds),
    slowConsumer: () => disconnections.inc({ type: 'client', reason: 'slow_consumer' }),
    authFailed: () => {
      authFailures.inc();
      disconnections.inc({ type: 'client', reason: 'auth_failed' });
    },
    keysExpired: (n) => keysExpired.inc(n),
    upgradeRefused: (reason) => upgradesRefused.inc({ reason }),
    heldKeyReleased: (adapter) => heldReleased.inc({ adapter }),
  };
}

/** `allowedHosts`: the names core's Host guard accepts besides its own rule (`console.allowedHosts`). */
export function buildMetricsApp(
  logger: Logger,
  registry: Registry,
  path: string,
  allowedHosts: readonly string[] = [],
): FastifyInstance {
  const app = bridgeHttpApp(logger, allowedHosts);
  app.get(path, async (_req, reply) => {
    const body = await registry.metrics();
    return reply.header('content-type', registry.contentType).send(body);
  });
  return app;
}

export type DependencyStatus = 'healthy' | 'degraded' | 'unhealthy';

export interface DependencyCheck {
  name: string;
  status: DependencyStatus;
  latencyMs: number;
  lastCheck: number;
  error?: string;
  metadata?: Record<string, unknown>;
}

export interface HealthSources {
  version: string;
  startedAt: number;
  now: () => number;
  checks: () => DependencyCheck[];
  metrics: () => { stateEntries: number; subscriptions: number; clients: number };
}

/** Overall status: any unhealthy dependency → unhealthy; any degraded → degraded. */
export function overallStatus(checks: DependencyCheck[]): DependencyStatus {
  if (checks.some((c) => c.status === 'unhealthy')) return 'unhealthy';
  if (checks.some((c) => c.status === 'degraded')) return 'degraded';
  return 'healthy';
}

export function buildHealthApp(
  logger: Logger,
  src: HealthSources,
  allowedHosts: readonly string[] = [],
): FastifyInstance {
  const app = bridgeHttpApp(logger, allowedHosts);
  app.get('/health', async (_req, reply) => {
    const dependencies = src.checks();
    const status = overallStatus(dependencies);
    return reply.status(status === 'unhealthy' ? 503 : 200).send({
      status,
      timestamp: src.now(),
      uptime: src.now() - src.startedAt,
      version: src.version,
      dependencies,
      metrics: src.metrics(),
    });
  });
  app.get('/health/live', () => Promise.resolve({ alive: true, timestamp: src.now() }));
  app.get('/health/ready', async (_req, reply) => {
    const bad = src.checks().filter((c) => c.status === 'unhealthy');
    return reply.status(bad.length ? 503 : 200).send({
      ready: bad.length === 0,
      timestamp: src.now(),
      ...(bad.length ? { reason: `Unhealthy dependencies: ${bad.map((c) => c.name).join(', ')}` } : {}),
    });
  });
  return app;
}
