/**
 * Builds the punch broker from its configuration and the process's context (the repository's ARCHITECTURE.md "One
 * skeleton"): the token secret and TLS files, the store (SQLite, or Redis shared by several instances,
 * docs/multi-instance.md), the session broker and signalling hub on the context's `Clock`, the HTTP API with
 * the WebSocket signalling on the same port, the relay, the metrics and the alarm webhook. Nothing listens
 * before `start`, which loads the sessions (or joins the cluster) and opens the port.
 */
import {
  createMetricsRegistry,
  listeningUrl,
  serviceContext,
  type Clock,
  type Logger,
  type Service,
  type ServiceContext,
  type ServiceHealth,
} from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import { defaultBaseUrl, isLoopbackHost, warnsPlainHttp, type PunchConfig } from './config.ts';
import { AccessChecker } from './domain/access.ts';
import { SessionBroker } from './domain/broker.ts';
import type { LimitGroup } from './domain/rate-limiter.ts';
import type { RandomBytes } from './domain/session.ts';
import { SignallingHub } from './domain/signalling.ts';
import type { SessionStore } from './domain/store.ts';
import { AlarmWebhook } from './io/alarm-webhook.ts';
import { brokerMetrics } from './io/broker-metrics.ts';
import { clientAddress, parseTrustPolicy } from './io/client-address.ts';
import { ClientLimits } from './io/client-limits.ts';
import { buildHttpApi } from './io/http-api.ts';
import { isLoopbackBase, loopbackBaseNote } from './io/join-steps.ts';
import { RedisBridge } from './io/redis-bridge.ts';
import { RedisCluster } from './io/redis-cluster.ts';
import { installForwarding } from './io/redis-forward.ts';
import { sharedLimit } from './io/redis-rate-limit.ts';
import { RedisSessionStore } from './io/redis-store.ts';
import { createBrokerRelays } from './io/relay/relay-wiring.ts';
import { SessionStoreError, SqliteSessionStore } from './io/sqlite-store.ts';
import { brokerSecret, readTls } from './io/startup-files.ts';
import { cloudflareTurnstile, type TurnstileVerifier } from './io/turnstile.ts';
import { attachSignalling, tokenFingerprint, type SignallingServer } from './io/ws-server.ts';
import { TokenSigner } from './protocol/token.ts';

export interface PunchAppOptions {
  /** Default: the SQLite file of `config.db`, or Redis with `config.redis.url`. */
  store?: SessionStore;
  random?: RandomBytes;
  /** Default: Cloudflare when `config.turnstile.secret` is set, else none. */
  turnstile?: TurnstileVerifier;
  /** PEM certificate chain and key: serve HTTPS. Default: the files of PUNCH_TLS_CERT/PUNCH_TLS_KEY, if set. */
  tls?: { cert: Buffer; key: Buffer };
  /**
   * Redis only: this instance lost the owner lease to another instance (after Redis was lost for longer
   * than the lease), so it can no longer write. Default (docs/multi-instance.md "Failures"): log it, close
   * everything and exit 1, so that a supervisor restarts it as a relay to the new owner.
   */
  onOwnerLost?: () => void;
  /** How the default `onOwnerLost` exits (default `process.exit`). */
  exit?: (code: number) => void;
  /** WebSocket timings (tests shorten them); defaults in README "WebSocket signalling". */
  signalling?: {
    pingIntervalMs?: number;
    detachedGraceMs?: number;
    healthReportMs?: number;
    probeMs?: number;
    maxConnections?: number;
    maxPayload?: number;
    registerDeadlineMs?: number;
  };
}

/** core's `Service`, with the wired broker inside for tests, benches and tools. */
export interface PunchApp extends Service {
  app: FastifyInstance;
  broker: SessionBroker;
  store: SessionStore;
  /** The per-client buckets, shared by every transport on this server (HTTP and WebSocket upgrades). */
  clientLimits: ClientLimits;
  /** The WebSocket signalling: slot holders and presence (`hub`), sockets (`signalling`). */
  hub: SignallingHub;
  signalling: SignallingServer;
  /** Several instances on Redis: this instance's membership (owner lease, heartbeat, bus); else undefined. */
  cluster: RedisCluster | undefined;
  /** The URL the server answers on; throws before `start` has opened the port. */
  url(): string;
}

export function createPunchApp(
  context: ServiceContext<PunchConfig>,
  options: PunchAppOptions = {},
): PunchApp {
  const { config, logger, clock } = context;
  const secret = brokerSecret(config, context.values['demo'] === true, logger);
  if (!config.limits.rateLimits)
    logger.warn('per-client rate limits are OFF (PUNCH_RATE_LIMITING=off); benchmarks only');
  const tls = options.tls ?? readTls(config);
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const onOwnerLost =
    options.onOwnerLost ??
    (() => {
      logger.fatal('this instance lost the owner lease to another instance; exiting to restart as a relay');
      void context.shutdown.abort('owner lease lost').finally(() => exit(1));
      setTimeout(() => exit(1), 5_000).unref();
    });
  const redisUrl = config.redis.url;
  const cluster = redisUrl
    ? new RedisCluster({ url: redisUrl, prefix: config.redis.prefix, leaseMs: config.redis.leaseMs, logger })
    : undefined;
  const store =
    options.store ??
    (cluster
      ? new RedisSessionStore({
          redis: cluster.redis,
          prefix: config.redis.prefix,
          fence: () => cluster.token,
          tombstoneMs: config.limits.tombstoneTtl * 1000,
        })
      : new SqliteSessionStore(config.db));
  /** Redis: whether this instance owns the sessions and has loaded them (SQLite: always, after start). */
  let serving = false;
  const broker = new SessionBroker({
    store,
    clock,
    ...(options.random ? { random: options.random } : {}),
    maxSessions: config.limits.maxSessions,
    tombstoneMs: config.limits.tombstoneTtl * 1000,
    maxTombstones: config.limits.maxTombstones,
  });
  const scheme = tls ? 'https' : 'http';
  let baseUrl = config.baseUrl?.replace(/\/+$/, '') ?? defaultBaseUrl(config.host, config.port, scheme);
  const turnstile =
    options.turnstile ??
    (config.turnstile.secret
      ? cloudflareTurnstile(config.turnstile.secret, config.turnstile.verifyUrl)
      : undefined);
  const clientLimits = new ClientLimits(config.limits);
  const signer = new TokenSigner(secret);
  const trust = parseTrustPolicy(config.trustProxy);
  const shared = cluster ? sharedLimits(cluster, config) : undefined;
  const registry = createMetricsRegistry();
  const app = buildHttpApi({
    config,
    broker,
    signer,
    clock,
    logger,
    registry,
    baseUrl: () => baseUrl,
    turnstile,
    tls,
    clientLimits,
    sharedLimits: shared ? (group, ip) => shared[group](ip) : undefined,
    // The hub is built below; requests arrive only after start.
    healthView: (session, stream) => hub.healthView(session, stream),
    relayFigures: (stream) => hub.relayFigures(stream),
    storeInfo: async () => {
      if (!cluster) return { kind: 'sqlite' };
      // A PING with a short bound: a stopped (not closed) Redis keeps the connection `ready`.
      const reachable =
        cluster.reachable &&
        (await Promise.race([
          cluster.redis.ping().then(
            () => true,
            () => false,
          ),
          new Promise<boolean>((r) => setTimeout(() => r(false), 1_000).unref()),
        ]));
      return {
        kind: 'redis',
        reachable,
        instance: cluster.id,
        role: cluster.isOwner ? 'owner' : 'relay',
        // An owner still loading the sessions serves nothing yet: no owner to report.
        owner: cluster.isOwner && !serving ? null : cluster.leader,
      };
    },
  });
  broker.subscribe((e) => {
    if (e.type === 'session_closed')
      logger.info({ session: e.session.name, reason: e.reason }, 'session closed');
  });
  const ws = options.signalling ?? {};
  // The signalling server is attached below; the gauge reads it only when scraped.
  const metrics = brokerMetrics(registry, broker, clock, () => signalling.connections);
  const hook = config.alarms.webhook;
  const alarmWebhook = hook.url
    ? new AlarmWebhook({
        url: hook.url,
        secret: hook.secret,
        retries: hook.retries,
        timeoutMs: hook.timeoutMs,
        logger,
      })
    : undefined;
  const relays = createBrokerRelays({ config, cluster, baseUrl: () => baseUrl, clock, registry, logger });
  const hub = new SignallingHub({
    broker,
    clock,
    ...(relays.port ? { relay: relays.port } : {}),
    relaysOutlive: relays.outlive,
    relayAfterMs: config.relay.fallbackAfterMs,
    relayLifetimeMs: config.relay.lifetimeMs,
    onRelayFallback: metrics.relayFallback,
    onStreamConnected: metrics.streamConnected,
    ...(ws.detachedGraceMs === undefined ? {} : { detachedGraceMs: ws.detachedGraceMs }),
    ...(ws.healthReportMs === undefined ? {} : { healthReportMs: ws.healthReportMs }),
    ...(ws.probeMs === undefined ? {} : { probeMs: ws.probeMs }),
    ...(ws.maxConnections === undefined ? {} : { maxConnections: ws.maxConnections }),
    onError: (err) => logger.error({ err }, 'signalling handler failed'),
    log: logger,
    onRefused: metrics.refused,
    onAlarm: (alarm) => {
      logger.warn(
        { session: alarm.session, stream: alarm.stream, alarm: alarm.alarm, active: alarm.active },
        'health alarm',
      );
      alarmWebhook?.send(alarm);
    },
  });
  relays.bind(hub);
  const access = new AccessChecker(signer);
  const bridge = cluster
    ? new RedisBridge({
        cluster,
        broker,
        hub,
        access,
        clock,
        logger,
        holderOf: tokenFingerprint,
        registerDeadlineMs: ws.registerDeadlineMs ?? 10_000,
        ownerReady: () => serving,
      })
    : undefined;
  if (cluster && bridge) {
    installForwarding({
      cluster,
      app,
      logger,
      bodyLimit: config.limits.bodyLimit,
      clientOf: (r) => clientAddress(r.socket.remoteAddress, r.headers['x-forwarded-for'], trust),
      ownerReady: () => serving,
    });
    cluster.onLeaderChanged = (owner) => {
      logger.info({ instance: cluster.id, owner }, 'owner of the sessions changed');
      bridge.ownerChanged(owner);
    };
    cluster.onReconnected = () => bridge.resync();
    cluster.onElected = async () => {
      try {
        await broker.start();
        await relays.adopt(hub);
        serving = true;
        logger.info(
          { instance: cluster.id, sessions: broker.liveSessions },
          'sessions loaded; this instance owns them',
        );
      } catch (err) {
        logger.error({ err }, 'could not load the sessions from Redis after taking the owner lease');
        serving = false;
        onOwnerLost();
      }
    };
    cluster.onLost = () => {
      serving = false;
      broker.stop();
      onOwnerLost();
    };
  }
  // Same port as the REST API: the upgrade event of fastify's own (HTTP or HTTPS) server.
  const signalling = attachSignalling(app.server, {
    broker,
    hub,
    access,
    clock,
    logger,
    trust,
    clientLimits,
    rateLimits: config.limits.rateLimits,
    messagesPerSecond: config.limits.wsMessagesPerSecond,
    ...(ws.maxPayload === undefined ? {} : { maxPayload: ws.maxPayload }),
    ...(ws.pingIntervalMs === undefined ? {} : { pingIntervalMs: ws.pingIntervalMs }),
    ...(ws.registerDeadlineMs === undefined ? {} : { registerDeadlineMs: ws.registerDeadlineMs }),
    onReject: metrics.wsRejected,
    ...(cluster && bridge
      ? {
          remote: {
            active: () => !cluster.isOwner,
            open: (socket, name, token) => bridge.open(socket, name, token),
          },
          unavailable: () => !cluster.reachable || (cluster.isOwner && !serving),
          ...(shared ? { sharedConnectLimit: shared.wsConnect } : {}),
        }
      : {}),
  });
  let url: string | undefined;
  let closed = false;
  return {
    app,
    broker,
    store,
    clientLimits,
    hub,
    signalling,
    cluster,
    url() {
      if (url === undefined) throw new Error('punch: the broker has not been started');
      return url;
    },
    async start() {
      if (cluster) {
        try {
          await cluster.start();
        } catch (err) {
          const where = (redisUrl ?? '').replace(/\/\/[^@/]*@/, '//');
          throw new SessionStoreError(
            where,
            `session store: cannot reach Redis at ${where} (${(err as Error).message}). Start Redis or fix PUNCH_REDIS_URL.`,
            { cause: err },
          );
        }
      } else {
        await broker.start();
        serving = true;
      }
      await app.listen({ host: config.host, port: config.port });
      url = listeningUrl(app).replace(/^http:/, `${scheme}:`);
      if (!config.baseUrl) baseUrl = defaultBaseUrl(config.host, Number(new URL(url).port), scheme);
      await relays.start();
      startNotes(config, logger, tls !== undefined, baseUrl);
    },
    async close() {
      if (closed) return;
      closed = true;
      bridge?.stop();
      await signalling.close();
      alarmWebhook?.close();
      hub.stop();
      await relays.close();
      await app.close();
      broker.stop();
      await cluster?.stop();
      await store.close();
    },
    health(): ServiceHealth {
      const own = cluster && !cluster.isOwner ? { state: 'ok' } : broker.storeState;
      const lost = cluster !== undefined && (!cluster.reachable || (cluster.isOwner && !serving));
      return {
        status: url === undefined ? 'starting' : own.state !== 'ok' || lost ? 'degraded' : 'ok',
        sessions: broker.liveSessions,
        store: cluster ? 'redis' : 'sqlite',
        role: cluster ? (cluster.isOwner ? 'owner' : 'relay') : null,
      };
    },
    describe: () => ({
      url: url ?? null,
      store: config.redis.url ? 'redis' : 'sqlite',
      db: config.redis.url ? null : config.db,
      instance: cluster?.id ?? null,
      owner: cluster ? cluster.isOwner : null,
      baseUrl: config.baseUrl ?? null,
      trustProxy: config.trustProxy,
      tls: tls !== undefined,
      sessions: broker.liveSessions,
    }),
  };
}

/** Several instances share the per-client limits through Redis (docs/multi-instance.md "Rate limits"). */
function sharedLimits(
  cluster: RedisCluster,
  config: PunchConfig,
): Record<LimitGroup, (ip: string) => Promise<number>> {
  const perMinute: Record<LimitGroup, number> = {
    create: config.limits.createPerMinute,
    read: config.limits.getPerMinute,
    admin: config.limits.adminPerMinute,
    page: config.limits.pagePerMinute,
    wsConnect: config.limits.wsConnectPerMinute,
  };
  return Object.fromEntries(
    (Object.keys(perMinute) as LimitGroup[]).map((g) => [
      g,
      sharedLimit(cluster, g, perMinute[g], config.limits.ipv6PrefixBits),
    ]),
  ) as Record<LimitGroup, (ip: string) => Promise<number>>;
}

/** What the operator should know once the port is open: clear-text exposure and links only this machine reaches. */
function startNotes(config: PunchConfig, logger: Logger, tls: boolean, baseUrl: string): void {
  if (warnsPlainHttp(config.host, tls)) {
    logger.warn(
      { host: config.host },
      'serving plain HTTP on a non-loopback address: tokens and the passphrases in /connect travel in clear ' +
        'text. Put a TLS reverse proxy in front (and set PUNCH_TRUST_PROXY), or set PUNCH_TLS_CERT and PUNCH_TLS_KEY',
    );
  }
  // Links handed out under a loopback base URL reach only this machine (the quick start's 127.0.0.1): say so,
  // and how to set it; a warning when the broker listens for other machines that would get such links.
  if (isLoopbackBase(baseUrl)) {
    const level = isLoopbackHost(config.host) ? 'info' : 'warn';
    logger[level]({ baseUrl, setting: 'PUNCH_BASE_URL' }, loopbackBaseNote(baseUrl));
  }
}

/** What tests, benches and other packages pass to `createPunchServer`. */
export interface PunchServerOptions extends Omit<PunchAppOptions, 'exit'> {
  config: PunchConfig & { secret: string };
  logger: Logger;
  clock?: Clock;
}

/** The broker built outside `runService`, as tests and benches drive it; `listen` starts it and gives its URL. */
export interface PunchServer extends PunchApp {
  listen(): Promise<string>;
}

/**
 * `createPunchApp` with a context of its own (core's `serviceContext`: no signals, no flags): the entry
 * point of the tests, the benches and other packages' tests. Losing the owner lease does nothing unless
 * `onOwnerLost` says so.
 */
export function createPunchServer(options: PunchServerOptions): PunchServer {
  const { config, logger, clock, ...rest } = options;
  const punch = createPunchApp(serviceContext(config, { logger, ...(clock ? { clock } : {}) }), {
    onOwnerLost: () => undefined,
    ...rest,
  });
  return Object.assign(punch, {
    async listen(): Promise<string> {
      await punch.start();
      return punch.url();
    },
  });
}
