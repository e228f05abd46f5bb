import {
  Counter,
  Gauge,
  Histogram,
  createMetricsRegistry,
  listeningUrl,
  systemClock,
  type Clock,
  type Logger,
} from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import { defaultBaseUrl, type PunchConfig } from './config.ts';
import { SessionBroker } from './domain/broker.ts';
import type { RandomBytes } from './domain/session.ts';
import type { SessionStore } from './domain/store.ts';
import { ClientLimits } from './io/client-limits.ts';
import { AlarmWebhook } from './io/alarm-webhook.ts';
import { buildHttpApi } from './io/http-api.ts';
import { SqliteSessionStore } from './io/sqlite-store.ts';
import { AccessChecker } from './domain/access.ts';
import { SignallingHub } from './domain/signalling.ts';
import { parseTrustPolicy } from './io/client-address.ts';
import { attachSignalling, tokenFingerprint, type SignallingServer } from './io/ws-server.ts';
import { cloudflareTurnstile, type TurnstileVerifier } from './io/turnstile.ts';
import { clientAddress } from './io/client-address.ts';
import { RedisBridge } from './io/redis-bridge.ts';
import { createBrokerRelays } from './io/relay/relay-wiring.ts';
import { RedisCluster } from './io/redis-cluster.ts';
import { installForwarding } from './io/redis-forward.ts';
import { sharedLimit } from './io/redis-rate-limit.ts';
import { RedisSessionStore } from './io/redis-store.ts';
import { SessionStoreError } from './io/sqlite-store.ts';
import type { LimitGroup } from './domain/rate-limiter.ts';
import { TokenSigner } from './protocol/token.ts';

/** Everything the broker process runs, wired once; main.ts only adds the environment and signals. */
export interface PunchServer {
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
  /** Load the store and listen; resolves with the URL the server answers on. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

export interface PunchServerOptions {
  config: PunchConfig & { secret: string };
  logger: Logger;
  clock?: Clock;
  /** Default: the SQLite file of `config.db`. */
  store?: SessionStore;
  random?: RandomBytes;
  /** Default: Cloudflare when `config.turnstile.secret` is set, else none. */
  turnstile?: TurnstileVerifier;
  /** PEM certificate chain and key (main.ts reads `PUNCH_TLS_CERT`/`PUNCH_TLS_KEY`): serve HTTPS. */
  tls?: { cert: Buffer; key: Buffer };
  /**
   * Redis only: this instance lost the owner lease to another instance (after Redis was lost for longer
   * than the lease). It can no longer write; main.ts exits so that a supervisor restarts it as a relay.
   */
  onOwnerLost?: () => void;
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

export function createPunchServer(options: PunchServerOptions): PunchServer {
  const { config, logger } = options;
  const clock = options.clock ?? systemClock;
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
  /** Redis: whether this instance owns the sessions and has loaded them (SQLite: always, after listen). */
  let serving = false;
  const broker = new SessionBroker({
    store,
    clock,
    ...(options.random ? { random: options.random } : {}),
    maxSessions: config.limits.maxSessions,
    tombstoneMs: config.limits.tombstoneTtl * 1000,
    maxTombstones: config.limits.maxTombstones,
  });
  const scheme = options.tls ? 'https' : 'http';
  let baseUrl = config.baseUrl?.replace(/\/+$/, '') ?? defaultBaseUrl(config.host, config.port, scheme);
  const turnstile =
    options.turnstile ??
    (config.turnstile.secret
      ? cloudflareTurnstile(config.turnstile.secret, config.turnstile.verifyUrl)
      : undefined);
  const clientLimits = new ClientLimits(config.limits);
  const signer = new TokenSigner(config.secret);
  const trust = parseTrustPolicy(config.trustProxy);
  const perMinute: Record<LimitGroup, number> = {
    create: config.limits.createPerMinute,
    read: config.limits.getPerMinute,
    admin: config.limits.adminPerMinute,
    page: config.limits.pagePerMinute,
    wsConnect: config.limits.wsConnectPerMinute,
  };
  const shared = cluster
    ? (Object.fromEntries(
        (Object.keys(perMinute) as LimitGroup[]).map((g) => [
          g,
          sharedLimit(cluster, g, perMinute[g], config.limits.ipv6PrefixBits),
        ]),
      ) as Record<LimitGroup, (ip: string) => Promise<number>>)
    : undefined;
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
    tls: options.tls,
    clientLimits,
    sharedLimits: shared ? (group, ip) => shared[group](ip) : undefined,
    // The hub is built below; requests arrive only after listen.
    healthView: (session, stream) => hub.healthView(session, stream),
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
  // Metrics (README "Metrics"; sessions are counted in http-api.ts): present peers, matches, match latency, signalling refusals.
  const refusals = new Counter({
    name: 'punch_signalling_refusals_total',
    help: 'register messages refused, by code (SESSION_FULL, STREAM_TAKEN, ADDRESS_FAMILY, STORE_FAILED, ...)',
    labelNames: ['code'],
    registers: [registry],
  });
  const matches = new Counter({
    name: 'punch_matches_total',
    help: 'Streams matched (both peers present with their coordinates exchanged), re-matches included',
    registers: [registry],
  });
  const matchLatency = new Histogram({
    name: 'punch_match_latency_seconds',
    help: 'Time from the earlier of the two claims of a stream to its match',
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 1800],
    registers: [registry],
  });
  broker.subscribe((e) => {
    if (e.type !== 'peer_matched' || !e.stream.peerA || !e.stream.peerB) return;
    matches.inc();
    const first = Math.min(e.stream.peerA.claimedAt, e.stream.peerB.claimedAt);
    matchLatency.observe(Math.max(0, clock.now() - first) / 1000);
  });
  new Gauge({
    name: 'punch_peers',
    help: 'Claimed peer slots, by presence (present: holder connected; absent: within the grace period)',
    labelNames: ['presence'],
    registers: [registry],
    collect() {
      const n = broker.peerCounts();
      this.set({ presence: 'present' }, n.present);
      this.set({ presence: 'absent' }, n.absent);
    },
  });
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
  // docs/relay.md "Running inside the broker": the relay a stream falls back to when rendezvous fails.
  const relayFallbacks = new Counter({
    name: 'punch_relay_fallbacks_total',
    help: 'Streams moved to the relay after direct rendezvous failed, by outcome (allocated, refused) and reason',
    labelNames: ['outcome', 'reason'],
    registers: [registry],
  });
  const sessionsByPath = new Counter({
    name: 'punch_sessions_total',
    help: 'Streams that got connected, once per session, stream and path (direct or relayed)',
    labelNames: ['path'],
    registers: [registry],
  });
  for (const path of ['direct', 'relayed']) sessionsByPath.inc({ path }, 0);
  const relays = createBrokerRelays({ config, cluster, baseUrl: () => baseUrl, clock, registry, logger });
  const hub = new SignallingHub({
    broker,
    clock,
    ...(relays.port ? { relay: relays.port } : {}),
    relaysOutlive: relays.outlive,
    relayAfterMs: config.relay.fallbackAfterMs,
    onRelayFallback: (outcome, reason) => relayFallbacks.inc({ outcome, reason: reason ?? '' }),
    onStreamConnected: (path) => sessionsByPath.inc({ path }),
    ...(ws.detachedGraceMs === undefined ? {} : { detachedGraceMs: ws.detachedGraceMs }),
    ...(ws.healthReportMs === undefined ? {} : { healthReportMs: ws.healthReportMs }),
    ...(ws.probeMs === undefined ? {} : { probeMs: ws.probeMs }),
    ...(ws.maxConnections === undefined ? {} : { maxConnections: ws.maxConnections }),
    onError: (err) => logger.error({ err }, 'signalling handler failed'),
    log: logger,
    onRefused: (code) => refusals.inc({ code }),
    onAlarm: (alarm) => {
      logger.warn(
        { session: alarm.session, stream: alarm.stream, alarm: alarm.alarm, active: alarm.active },
        'health alarm',
      );
      alarmWebhook?.send(alarm);
    },
  });
  relays.bind(hub);
  const wsRejected = new Counter({
    name: 'punch_ws_rejected_total',
    help: 'WebSocket connections refused before joining a session, by reason',
    labelNames: ['reason'],
    registers: [registry],
  });
  // Same port as the REST API: the upgrade event of fastify's own (HTTP or HTTPS) server.
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
        (options.onOwnerLost ?? (() => undefined))();
      }
    };
    cluster.onLost = () => {
      serving = false;
      broker.stop();
      (options.onOwnerLost ?? (() => undefined))();
    };
  }
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
    onReject: (reason) => wsRejected.inc({ reason }),
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
  new Gauge({
    name: 'punch_ws_connections',
    help: 'Open signalling WebSocket connections (peers and observers)',
    registers: [registry],
    collect() {
      this.set(signalling.connections);
    },
  });
  let closed = false;
  return {
    app,
    broker,
    store,
    clientLimits,
    hub,
    signalling,
    cluster,
    async listen() {
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
      const url = listeningUrl(app).replace(/^http:/, `${scheme}:`);
      if (!config.baseUrl) baseUrl = defaultBaseUrl(config.host, Number(new URL(url).port), scheme);
      await relays.start();
      return url;
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
  };
}
