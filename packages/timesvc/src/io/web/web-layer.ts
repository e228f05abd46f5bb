import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, type Clock, type Logger, type Registry } from '@broadcast-ops/core';
import type { ClockManager } from '../../domain/clock-manager.ts';
import type { SourceStatsTracker } from '../../domain/source-stats.ts';
import type { TimesvcConfig } from '../../config.ts';
import type { NtpServer } from '../ntp-server.ts';
import type { NtsServerSide } from '../nts-service.ts';
import type { PeerClient } from '../peer-client.ts';
import { hiresClock, type ServedClock } from '../served-clock.ts';
import { registerWebApi, type WebApiContext } from './api.ts';
import { Authenticator } from './auth.ts';
import { ConfigStore, changedPaths } from './config-store.ts';
import { inConfigOrder, knownLabCredentialUse, verifyLabUsers } from './lab-credential.ts';
import { LogRing } from './log-ring.ts';
import { registerPages } from './pages.ts';
import type { GpsdoProvider, PtpProvider } from './providers.ts';
import { REFERENCE_EVENT_TYPES, ReferenceEventWatcher } from './reference-events.ts';
import { chartClock } from './status.ts';
import { Streams } from './streams.ts';
import type { Ticker } from '../service-tick.ts';

type PeerEntry = TimesvcConfig['ntp']['upstream_peers'][number];

export interface WebLayerOptions {
  app: FastifyInstance;
  /** The API's wall time (uptime) and monotonic time (ages, on the served clock's base); default hiresClock. */
  clock?: Clock | undefined;
  config: TimesvcConfig;
  logger: Logger;
  manager: ClockManager;
  registry: Registry;
  served: ServedClock;
  startedMs: number;
  version: string;
  server: () => NtpServer | undefined;
  peers: () => readonly PeerClient[];
  nts: () => NtsServerSide | undefined;
  stats: SourceStatsTracker;
  configFile?: string | undefined;
  logRing?: LogRing | undefined;
  gpsdo?: GpsdoProvider | undefined;
  ptp?: PtpProvider | undefined;
  environment?: NodeJS.ProcessEnv | undefined;
  statusIntervalMs?: number | undefined;
  peerControl: { add(p: PeerEntry): Promise<boolean>; remove(address: string): Promise<void> };
}

export interface WebLayer {
  readonly logs: LogRing;
  readonly events: ReferenceEventWatcher;
  readonly streams: Streams;
  readonly configStore: ConfigStore;
  /** The running configuration (with the changes applied at run time). */
  config(): TimesvcConfig;
  /** Which parts of the documented lab credential are in use (after checkCredentials). */
  labCredential(): readonly string[];
  /** Warn about the lab credential; refuse it with `environment: production`. */
  checkCredentials(): Promise<void>;
  /** Settles when the users' hashes that `checkCredentials` left to derive after start are checked. */
  labCredentialChecked(): Promise<void>;
  /** Start the streams, events and statistics; their once-a-second work on `tick` when given. */
  start(tick?: Ticker): void;
  stop(): void;
}

/** The web API, streams, dashboard and their metrics around one service (README "Web API"). */
export function createWebLayer(o: WebLayerOptions): WebLayer {
  let running = o.config;
  let lab: string[] = [];
  let labCheck: Promise<void> = Promise.resolve();
  let stopped = false;
  const logs = o.logRing ?? new LogRing();
  const configStore = new ConfigStore(o.configFile, o.environment);
  const events = new ReferenceEventWatcher({ manager: o.manager, logger: o.logger, gpsdo: o.gpsdo });
  const auth =
    o.config.web.users.length > 0 && o.config.web.jwt_secret
      ? new Authenticator({
          secret: o.config.web.jwt_secret,
          users: o.config.web.users,
          expiryS: o.config.web.jwt_expiry,
        })
      : undefined;
  const webLog = o.logger.child({ component: 'web' });

  const ctx: WebApiContext = {
    config: () => running,
    manager: o.manager,
    servedNowMs: () => o.served.servedUnixMs(),
    monotonicMs: () => (o.clock ?? hiresClock).monotonicMs(),
    nowMs: () => (o.clock ?? hiresClock).now(),
    server: o.server,
    peers: o.peers,
    nts: o.nts,
    stats: o.stats,
    startedMs: o.startedMs,
    version: o.version,
    gpsdo: o.gpsdo,
    ptp: o.ptp,
    defaultCredential: () => lab.length > 0,
    labCredential: () => lab,
    logger: o.logger,
    logs,
    auth,
    configStore,
    reloadNtsCertificate: () => {
      const side = o.nts();
      if (!side) return false;
      side.ke.reload('api');
      return true;
    },
    applyConfig: async (next) => {
      const applied: string[] = [];
      const before = running;
      const key = (p: PeerEntry): string => JSON.stringify(p);
      const oldPeers = new Map(before.ntp.upstream_peers.map((p) => [key(p), p]));
      const newPeers = new Map(next.ntp.upstream_peers.map((p) => [key(p), p]));
      let peersChanged = false;
      for (const [k, p] of oldPeers) {
        if (!newPeers.has(k)) {
          await o.peerControl.remove(p.address);
          peersChanged = true;
        }
      }
      const kept: PeerEntry[] = before.ntp.upstream_peers.filter((p) => newPeers.has(key(p)));
      for (const [k, p] of newPeers) {
        if (oldPeers.has(k)) continue;
        peersChanged = true;
        try {
          if (await o.peerControl.add(p)) kept.push(p);
        } catch (err) {
          webLog.warn({ peer: p.address, err: (err as Error).message }, 'peer not added');
        }
      }
      if (peersChanged) applied.push('ntp.upstream_peers');
      let logging = before.logging;
      if (JSON.stringify(next.logging) !== JSON.stringify(before.logging)) {
        const level = next.logging.level === 'warning' ? 'warn' : next.logging.level;
        o.logger.level = level;
        logging = next.logging;
        applied.push('logging.level');
      }
      running = { ...before, ntp: { ...before.ntp, upstream_peers: kept }, logging };
      const rest = changedPaths(
        { ...before, ntp: { ...before.ntp, upstream_peers: [] }, logging: null, web: null },
        { ...next, ntp: { ...next.ntp, upstream_peers: [] }, logging: null, web: null },
      );
      return { applied, restartRequired: rest };
    },
  };

  registerWebApi(o.app, ctx);
  registerPages(o.app);
  registerWebMetrics(o.registry, events, o.gpsdo, o.ptp);
  const streams = new Streams({
    ctx,
    manager: o.manager,
    logs,
    events,
    logger: webLog,
    ...(o.statusIntervalMs ? { statusIntervalMs: o.statusIntervalMs } : {}),
  });
  let statsTimer: NodeJS.Timeout | undefined;
  let offStats: (() => void) | undefined;
  let offTick: (() => void) | undefined;
  const updateStats = (): void => o.stats.update(o.manager.sources(), o.manager.correction);

  return {
    logs,
    events,
    streams,
    configStore,
    config: () => running,
    labCredential: () => lab,
    async checkCredentials() {
      // The lab JWT secret and the demo's own hash are told apart without a key derivation; other users'
      // hashes need one scrypt derivation each (about a second, passwords.ts). `environment: production`
      // waits for them (it must refuse to start); a lab start does not: they run after it and warn when
      // they find the lab password (README "Web API: the lab credential").
      const { found, toVerify } = knownLabCredentialUse(o.config);
      const warn = (inUse: readonly string[]): void =>
        webLog.warn(
          { inUse },
          'the documented lab credential is in use: anyone can log in or forge tokens; change it before production use',
        );
      if (o.config.environment === 'production') {
        lab = inConfigOrder([...found, ...(await verifyLabUsers(o.config, toVerify))]);
        if (lab.length === 0) return;
        throw new Error(
          `environment is production but the documented lab credential is in use (${lab.join(', ')}): ` +
            'set your own users (npx timesvc hash-password) and TIMESVC_JWT_SECRET',
        );
      }
      lab = found;
      if (lab.length > 0) warn(lab);
      if (toVerify.length === 0) return;
      labCheck = verifyLabUsers(o.config, toVerify).then(
        (more) => {
          if (more.length === 0 || stopped) return;
          lab = inConfigOrder([...found, ...more]);
          warn(lab);
        },
        (err: unknown) => webLog.warn({ err: (err as Error).message }, 'lab credential check failed'),
      );
    },
    labCredentialChecked: () => labCheck,
    start(tick) {
      // On the service's tick (service-tick.ts) the events, the source statistics and the status push
      // share one snapshot of the clock manager a second; the status push keeps its own timer when a test
      // sets another period.
      const statusOnTick = tick !== undefined && (o.statusIntervalMs ?? 1000) === 1000;
      events.start(tick ? 0 : 1000);
      streams.attach(o.app.server, !statusOnTick);
      updateStats();
      offStats = o.manager.on(() => updateStats());
      if (tick) {
        // The chart's fields of the last snapshot, for the seconds the clock manager finds quiet.
        let chart: ReturnType<typeof chartClock> | undefined;
        offTick = tick.every(() => {
          // Nothing but time changed since the last snapshot (clock-manager.ts quietTick: no sample, no
          // source's usability, no event): the sources, selection, state and stratum are as they were, so
          // the events need only the GPSDO's fix and PPS (time-driven), the statistics nothing (they record
          // new samples), and the chart's point the estimated error read now (docs/performance.md "Fifth
          // pass").
          if (chart !== undefined && o.manager.quietTick) {
            events.checkSignal();
            if (statusOnTick) {
              const e = o.manager.estimatedErrorS();
              chart.estimated_error_ns = Number.isFinite(e) ? Math.round(e * 1e9) : null;
              streams.chartTick(chart);
            }
            return;
          }
          const snap = o.manager.snapshot();
          events.check(snap);
          o.stats.update(snap.sources, o.manager.correction);
          chart = chartClock(snap);
          if (statusOnTick) streams.statusTick(snap);
        });
        return;
      }
      statsTimer = setInterval(updateStats, 1000);
      statsTimer.unref();
    },
    stop() {
      stopped = true;
      events.stop();
      streams.close();
      offStats?.();
      offTick?.();
      if (statsTimer) clearInterval(statsTimer);
    },
  };
}

/**
 * Metrics of the web layer and, when no owner has registered them, the spec's PTP and GPSDO metrics read
 * from the providers (0 while a provider is absent), so every spec name is always exposed.
 */
function registerWebMetrics(
  registry: Registry,
  events: ReferenceEventWatcher,
  gpsdo: GpsdoProvider | undefined,
  ptp: PtpProvider | undefined,
): void {
  new Counter({
    name: 'timesvc_reference_events_total',
    help: 'Reference-health events (source lost/back, selection changed, holdover, stratum, leap, GPS fix, PPS)',
    labelNames: ['event'],
    registers: [registry],
    collect() {
      this.reset();
      for (const t of REFERENCE_EVENT_TYPES) this.inc({ event: t }, events.counts.get(t) ?? 0);
    },
  });
  const absent = (name: string): boolean => registry.getSingleMetric(name) === undefined;
  const counter = (name: string, help: string, read: () => number): void => {
    if (!absent(name)) return;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(Math.max(0, read()));
      },
    });
  };
  const gauge = (name: string, help: string, read: () => number): void => {
    if (!absent(name)) return;
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  counter(
    'timesvc_ptp_sync_total',
    'PTP Sync messages sent (0 while PTP is not enabled)',
    () => ptp?.status().sync_count ?? 0,
  );
  counter(
    'timesvc_ptp_announce_total',
    'PTP Announce messages sent (0 while PTP is not enabled)',
    () => ptp?.status().announce_count ?? 0,
  );
  gauge(
    'timesvc_ptp_offset_nanoseconds',
    'Offset of the PTP time base from the served clock, ns',
    () => ptp?.status().offset_ns ?? 0,
  );
  gauge('timesvc_gpsdo_locked', 'GPSDO locked (1) or not (0; also while no GPSDO is enabled)', () =>
    gpsdo?.status().locked ? 1 : 0,
  );
  gauge('timesvc_gpsdo_satellites', 'Satellites used in the GPS fix', () => gpsdo?.status().satellites ?? 0);
  counter('timesvc_gpsdo_pps_total', 'PPS pulses seen since start', () => gpsdo?.status().pps_count ?? 0);
}
