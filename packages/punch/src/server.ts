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
import { buildHttpApi } from './io/http-api.ts';
import { SqliteSessionStore } from './io/sqlite-store.ts';
import { AccessChecker } from './domain/access.ts';
import { SignallingHub } from './domain/signalling.ts';
import { parseTrustPolicy } from './io/client-address.ts';
import { attachSignalling, type SignallingServer } from './io/ws-server.ts';
import { cloudflareTurnstile, type TurnstileVerifier } from './io/turnstile.ts';
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
  const store = options.store ?? new SqliteSessionStore(config.db);
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
  const hub = new SignallingHub({
    broker,
    clock,
    ...(ws.detachedGraceMs === undefined ? {} : { detachedGraceMs: ws.detachedGraceMs }),
    ...(ws.healthReportMs === undefined ? {} : { healthReportMs: ws.healthReportMs }),
    ...(ws.probeMs === undefined ? {} : { probeMs: ws.probeMs }),
    ...(ws.maxConnections === undefined ? {} : { maxConnections: ws.maxConnections }),
    onError: (err) => logger.error({ err }, 'signalling handler failed'),
    log: logger,
    onRefused: (code) => refusals.inc({ code }),
  });
  const wsRejected = new Counter({
    name: 'punch_ws_rejected_total',
    help: 'WebSocket connections refused before joining a session, by reason',
    labelNames: ['reason'],
    registers: [registry],
  });
  // Same port as the REST API: the upgrade event of fastify's own (HTTP or HTTPS) server.
  const signalling = attachSignalling(app.server, {
    broker,
    hub,
    access: new AccessChecker(signer),
    clock,
    logger,
    trust: parseTrustPolicy(config.trustProxy),
    clientLimits,
    rateLimits: config.limits.rateLimits,
    messagesPerSecond: config.limits.wsMessagesPerSecond,
    ...(ws.maxPayload === undefined ? {} : { maxPayload: ws.maxPayload }),
    ...(ws.pingIntervalMs === undefined ? {} : { pingIntervalMs: ws.pingIntervalMs }),
    ...(ws.registerDeadlineMs === undefined ? {} : { registerDeadlineMs: ws.registerDeadlineMs }),
    onReject: (reason) => wsRejected.inc({ reason }),
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
    async listen() {
      await broker.start();
      await app.listen({ host: config.host, port: config.port });
      const url = listeningUrl(app).replace(/^http:/, `${scheme}:`);
      if (!config.baseUrl) baseUrl = defaultBaseUrl(config.host, Number(new URL(url).port), scheme);
      return url;
    },
    async close() {
      if (closed) return;
      closed = true;
      await signalling.close();
      hub.stop();
      await app.close();
      broker.stop();
      await store.close();
    },
  };
}
