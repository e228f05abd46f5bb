import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import type { Clock, Logger, Registry } from '@broadcast-ops/core';
import { AccessList } from '../domain/access-list.ts';
import { ClockManager } from '../domain/clock-manager.ts';
import { RateLimiter } from '../domain/rate-limiter.ts';
import { asciiRefId } from '../protocol/ntp-packet.ts';
import { ntpBindAddresses, parseHostPort, peerPolls, type TimesvcConfig } from '../config.ts';
import type { ClockQuality } from '../domain/clock-quality.ts';
import { advertisedQuality } from '../domain/advertiser.ts';
import { GpsdoSource } from './gpsdo.ts';
import { arrivalTime } from './kernel-rx-timestamp.ts';
import { transmitTime } from './kernel-tx-timestamp.ts';
import type { PtpAnnouncer } from './ptp.ts';
import { registerGpsdoMetrics } from './gpsdo-metrics.ts';
import { buildHttpApp } from './http-app.ts';
import { createTimesvcMetrics } from './metrics.ts';
import { NtpServer } from './ntp-server.ts';
import { registerNtsMetrics } from './nts-metrics.ts';
import type { NtsServerSide } from './nts-service.ts';
import { PeerClient } from './peer-client.ts';
import { LeapListFile } from './leap-list.ts';
import {
  ServedClock,
  hiresClock,
  hostTimeSource,
  measurePrecision,
  type TimeSource,
} from './served-clock.ts';
import { SourceStatsTracker } from '../domain/source-stats.ts';
import { createWebLayer, type WebLayer } from './web/web-layer.ts';
import { ServiceTick } from './service-tick.ts';
import type { LogRing } from './web/log-ring.ts';
import type { GpsdoProvider, GpsdoStatus, PtpProvider, Satellite } from './web/providers.ts';

/**
 * Wires the time service: served clock, clock manager, upstream peers, NTP server, web app. `start()`
 * opens the sockets; app.ts calls it (and listens on the web port) and the tests call it with port 0.
 */
export interface TimesvcService {
  readonly config: TimesvcConfig;
  readonly clock: ServedClock;
  readonly manager: ClockManager;
  readonly peers: readonly PeerClient[];
  readonly registry: Registry;
  /** The web API, streams and dashboard (README "Web API"). */
  readonly web: WebLayer;
  readonly app: FastifyInstance;
  server(): NtpServer | undefined;
  /** The NTS server side (cookies, NTS-KE, packet responder) when nts.enabled. */
  nts(): NtsServerSide | undefined;
  /** The GPSDO reference (gpsdo.enabled): `gpsdoStatus()`, `apiStatus()`, `apiSatellites()` (docs/gpsdo.md). */
  gpsdo(): GpsdoSource | undefined;
  /** The experimental PTP announcer (ptp.enabled): `status()` (docs/ptp.md). */
  ptp(): PtpAnnouncer | undefined;
  /** The clock quality announced by NTP and PTP alike (domain/clock-quality.ts). */
  clockQuality(): ClockQuality;
  start(): Promise<void>;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);

/** The NTS client code, which `loadOptionalCode` (or the peer's addition) has loaded for an NTS peer. */
function ntsPeerCode(code: OptionalCode): NonNullable<OptionalCode['ntsPeer']> {
  if (!code.ntsPeer) throw new Error('internal: NTS peer code not loaded');
  return code.ntsPeer;
}
export const VERSION = (require('../../package.json') as { version: string }).version;

export interface TimesvcOptions {
  /**
   * The clock the clock manager, the web layer and this wiring run on (app.ts: the context's, on the served
   * clock's monotonic base, io/served-clock.ts servedBaseClock). Default `hiresClock`.
   */
  clock?: Clock | undefined;
  /** Where the served clock reads the host clock (tests inject host clock steps through it). */
  timeSource?: TimeSource;
  /** The config file the service was loaded from (GET/PUT /api/config write it); none = embedded defaults. */
  configFile?: string | undefined;
  /** The ring the logger's destination feeds (/api/logs, /api/ws/logs); app.ts and tests pass it. */
  logRing?: LogRing | undefined;
  /** GPSDO and PTP as seen by the web layer (README "Web API: GPSDO and PTP providers"). */
  gpsdo?: GpsdoProvider | undefined;
  ptp?: PtpProvider | undefined;
  /** Environment for config reloads through PUT /api/config (default process.env). */
  environment?: NodeJS.ProcessEnv;
  /** Period of the status stream (default 1 s; tests lengthen it to see the on-change pushes alone). */
  statusIntervalMs?: number;
}

/**
 * The PTP and NTS code (with node:tls), loaded only when the configuration uses it: a service with both off
 * (the demo) never loads it, which keeps it smaller at rest (docs/performance.md "At rest"). Their
 * configuration sections are validated at start all the same (config.ts holds the schemas).
 */
export interface OptionalCode {
  /** ptp.enabled: the announcer and its metrics. */
  ptp?: typeof import('./ptp.ts') & typeof import('./ptp-metrics.ts');
  /** nts.enabled: the NTS server side (cookies, NTS-KE, the packet responder). */
  ntsServer?: typeof import('./nts-service.ts');
  /** An upstream peer with nts_enabled (also loaded when PUT /api/config adds one). */
  ntsPeer?: typeof import('./nts-peer.ts');
}

/** Whether the configuration asks for an NTS client (an upstream peer with nts_enabled). */
function wantsNtsPeer(config: TimesvcConfig): boolean {
  return config.ntp.enabled && config.ntp.upstream_peers.some((p) => p.nts_enabled);
}

/** Imports what `config` enables of the optional code, and nothing else. */
export async function loadOptionalCode(config: TimesvcConfig): Promise<OptionalCode> {
  const [ptp, ptpMetrics, ntsServer, ntsPeer] = await Promise.all([
    config.ptp.enabled ? import('./ptp.ts') : undefined,
    config.ptp.enabled ? import('./ptp-metrics.ts') : undefined,
    config.nts.enabled ? import('./nts-service.ts') : undefined,
    wantsNtsPeer(config) ? import('./nts-peer.ts') : undefined,
  ]);
  return {
    ...(ptp && ptpMetrics ? { ptp: { ...ptp, ...ptpMetrics } } : {}),
    ...(ntsServer ? { ntsServer } : {}),
    ...(ntsPeer ? { ntsPeer } : {}),
  };
}

/** Builds the service; the optional code it needs is imported first (`loadOptionalCode`). */
export async function createTimesvc(
  config: TimesvcConfig,
  logger: Logger,
  options: TimesvcOptions = {},
): Promise<TimesvcService> {
  const code = await loadOptionalCode(config);
  const clock = options.clock ?? hiresClock;
  const startedMs = clock.now();
  const precision = measurePrecision();
  const clockLog = logger.child({ component: 'clock' });
  const served = new ServedClock({
    ...(options.timeSource ? { source: options.timeSource } : {}),
    onStep: (deltaMs) => {
      // The host's own leap second (the OS stepping CLOCK_REALTIME by 1 s at a UTC midnight) is one case.
      // Within two minutes of a UTC midnight on the host's clock, either side: after an insertion the
      // host reads 23:59:59 again when the step is noticed.
      const dayMs = (options.timeSource ?? hostTimeSource).wallMs() % 86_400_000;
      const leap = Math.abs(Math.abs(deltaMs) - 1000) < 50 && Math.min(dayMs, 86_400_000 - dayMs) < 120_000;
      clockLog.warn(
        { deltaMs, hostLeapSecond: leap },
        leap
          ? 'host clock leap second detected; the served clock is unaffected'
          : 'host clock step detected; the served clock is unaffected',
      );
    },
  });
  const ntp = config.ntp;
  const d = ntp.discipline;
  const leapList = ntp.leap_seconds_file
    ? new LeapListFile(ntp.leap_seconds_file, clockLog, () => served.servedUnixMs())
    : undefined;
  const manager = new ClockManager({
    clock,
    rawUnixMs: (monoMs) => served.rawUnixMs(monoMs),
    precision,
    maxSlewRate: d.max_slew_rate_ppm * 1e-6,
    stepThresholdS: d.step_threshold,
    stepoutMs: d.stepout * 1000,
    faultThresholdS: d.fault_threshold,
    holdoverTimeoutMs: d.holdover_timeout * 1000,
    minSamples: d.min_samples,
    lockThresholdS: d.lock_threshold,
    maxClockError: d.max_clock_error_ppm * 1e-6,
    primaryHoldoverMs: config.gpsdo.enabled ? config.gpsdo.fallback_after * 1000 : 0,
    local: ntp.local_stratum
      ? { stratum: ntp.stratum, referenceId: asciiRefId(ntp.ref_id), offsetS: () => served.hostOffsetS() }
      : undefined,
    leapMode: ntp.leap_mode,
    leapSmearMs: ntp.leap_smear_interval * 1000,
    leapList: () => leapList?.current(),
  });
  manager.on((e) => {
    if (e.type === 'state') clockLog.info({ from: e.from, to: e.to, reason: e.reason }, 'clock state');
    else if (e.type === 'selected') clockLog.info({ from: e.from, to: e.to }, 'reference selected');
    else if (e.type === 'suspect') {
      clockLog.warn(
        {
          source: e.source,
          offsetS: e.offsetS,
          phase: e.phase,
          stepoutS: d.stepout,
          ...(e.by ? { by: e.by } : {}),
        },
        e.phase === 'held'
          ? 'reference moved beyond the step threshold: held back until its stepout or a confirmation'
          : e.phase === 'returned'
            ? 'reference back at the served level'
            : 'reference level change followed',
      );
    } else if (e.type === 'leap') {
      clockLog.warn(
        {
          phase: e.phase,
          deltaS: e.deltaS,
          epoch: new Date(e.epochUnixMs).toISOString(),
          mode: ntp.leap_mode,
        },
        `leap second ${e.phase}`,
      );
    } else if (e.type === 'step') {
      clockLog.info({ source: e.source, stepS: e.offsetS }, 'served clock stepped');
    }
    // The served clock follows the manager's correction as soon as it changes; its listener hands the
    // native responder the new piece and the reply fields with it (native-responder.ts refresh), so an
    // 'advertised' event (new reply fields) reaches the native threads this way too.
    served.setCorrection(manager.correction);
  });
  // The GPSDO is a stratum-0 reference: with it locked the server is stratum 1 with ntp.ref_id.
  const gpsdo = config.gpsdo.enabled
    ? new GpsdoSource({
        config: config.gpsdo,
        referenceId: asciiRefId(ntp.ref_id),
        logger: logger.child({ component: 'gpsdo' }),
        // The receiver's edges and ages on the clock app.ts passes down, as the manager's samples are.
        monoMs: () => clock.monotonicMs(),
        wallMs: () => clock.now(),
        // Receiver − host realtime, plus host realtime − raw (added as each receiver sample is stored):
        // what the manager's samples measure.
        hostOffsetS: () => served.hostOffsetS(),
        stepThresholdS: d.step_threshold,
        onSample: (id, s) => {
          manager.addSample(id, {
            offsetS: s.offsetS,
            delayS: 0,
            dispersionS: s.dispersionS,
            jitterS: s.jitterS,
            atMs: s.atMonoMs,
          });
        },
      })
    : undefined;
  if (gpsdo) {
    manager.register(gpsdo);
    manager.on((e) => {
      if (e.type === 'state' && e.to === 'HOLDOVER' && manager.snapshot().lastReference === gpsdo.id) {
        gpsdo.model.counters.events['holdover'] = (gpsdo.model.counters.events['holdover'] ?? 0) + 1;
      }
    });
  }
  const rxCorrectionMs = ntp.rx_timestamp_correction_us / 1000;
  const peerLog = logger.child({ component: 'ntp-peer' });
  const peers: PeerClient[] = [];
  const makePeer = (p: TimesvcConfig['ntp']['upstream_peers'][number]): PeerClient | undefined => {
    const hp = parseHostPort(p.address, 123);
    if (!hp) return undefined; // the schema has rejected it already
    const polls = peerPolls(p, ntp.poll_interval);
    return new PeerClient({
      config: { address: p.address, prefer: p.prefer, iburst: p.iburst, ...polls },
      host: hp.host,
      port: hp.port,
      clock: served,
      manager,
      logger: peerLog,
      precision,
      rxCorrectionMs,
      kernelRxTimestamps: ntp.kernel_rx_timestamps,
      nts: p.nts_enabled
        ? new (ntsPeerCode(code).NtsPeerSecurity)({
            host: hp.host,
            kePort: p.nts_ke_port,
            caFile: config.nts.ca_path || undefined,
            logger: peerLog.child({ peer: p.address, nts: true }),
            now: () => clock.monotonicMs(),
          })
        : undefined,
    });
  };
  if (ntp.enabled) {
    for (const p of ntp.upstream_peers) {
      const client = makePeer(p);
      if (!client) continue;
      manager.register(client);
      peers.push(client);
    }
  }
  const rl = ntp.rate_limit;
  const policy = {
    access: ntp.allowed_networks.length ? new AccessList(ntp.allowed_networks) : undefined,
    // Built when limiting is off too: its bounded table is the client log (docs/cli.md "clients").
    rateLimiter: new RateLimiter({
      averageIntervalS: rl.average_interval,
      burst: rl.burst,
      kodIntervalS: rl.kod_interval,
      maxClients: rl.max_clients,
      ipv6PrefixBits: rl.ipv6_prefix,
      enabled: rl.enabled,
    }),
  };
  let server: NtpServer | undefined;
  // NTS-KE announces the NTP port actually bound (a Port record when it is not 123).
  const ntsSide = code.ntsServer?.createNtsServerSide(
    config,
    logger,
    () => server?.addresses[0]?.port ?? ntp.port,
    clock,
  );
  const registry = createTimesvcMetrics({
    server: () => server,
    manager,
    peers: () => peers,
    startedMs,
    now: () => clock.now(),
    nts: () => ntsSide,
    healthLimits: { maxErrorS: d.health_max_error, holdoverMaxErrorS: d.holdover_max_error },
  });
  registerNtsMetrics(registry, () => ntsSide);
  if (gpsdo) registerGpsdoMetrics(registry, () => gpsdo);
  const app = buildHttpApp({
    logger,
    registry,
    version: VERSION,
    servedNowMs: () => served.servedUnixMs(),
    rxTimestamps: () => server?.rxTimestamps ?? 'off',
    ntpResponder: () => server?.responder ?? 'off',
    clock: () => {
      const snap = manager.snapshot();
      return {
        state: snap.state,
        estimatedErrorS: snap.estimatedErrorS,
        selected: snap.selected ?? snap.lastReference,
        hostClockSteps: served.steps,
        kernelStampsReplaced: served.kernelStampsReplaced + (server?.nativeKernelStampsReplaced ?? 0),
        disagreements: snap.disagreements,
        nowMs: clock.monotonicMs(),
      };
    },
    holdoverMaxErrorS: d.holdover_max_error,
    maxErrorS: d.health_max_error,
    https: config.web.tls_enabled
      ? { cert: readFileSync(config.web.tls_cert), key: readFileSync(config.web.tls_key) }
      : undefined,
  });
  // One clock-quality model: NTP's stratum/LI and PTP's class/time source from the same manager state.
  const quality = (): ClockQuality =>
    advertisedQuality(manager.snapshot(), manager.serverState.leap, {
      freeRunningClass: config.ptp.clock_class,
      freeRunningAccuracy: config.ptp.clock_accuracy,
      holdoverMaxErrorS: config.ntp.discipline.holdover_max_error,
    });
  const ptp = code.ptp
    ? new code.ptp.PtpAnnouncer({
        config: config.ptp,
        servedUnixMs: (perf) => served.servedUnixMs(perf),
        kernelRealtimeMs: (perf) => served.kernelRealtimeMs(perf),
        quality,
        arrival: (socket) =>
          arrivalTime(socket, served, { kernel: ntp.kernel_rx_timestamps, correctionMs: 0 }),
        // TIMESVC_PTP_TX_TIMESTAMPS=userspace is for bench/timesvc-ptp only (its before/after comparison).
        transmit: (socket) =>
          process.env['TIMESVC_PTP_TX_TIMESTAMPS'] === 'userspace' ? undefined : transmitTime(socket, served),
        logger: logger.child({ component: 'ptp' }),
      })
    : undefined;
  if (ptp) code.ptp?.registerPtpMetrics(registry, () => ptp);
  // The web layer's view of the GPSDO and the PTP announcer (README "Web API: GPSDO and PTP providers").
  const gpsdoProvider: GpsdoProvider | undefined = gpsdo
    ? {
        status: () => {
          const s = gpsdo.gpsdoStatus();
          const lastPps = s.lastPpsUnixMs;
          return {
            ...(gpsdo.apiStatus() as Omit<GpsdoStatus, 'fix' | 'pps_ok'>),
            fix: s.fix.valid,
            pps_ok: lastPps !== undefined && Math.abs(clock.now() - lastPps) < 2000,
          };
        },
        signal: () => {
          const s = gpsdo.signal();
          const lastPps = s.lastPpsUnixMs;
          return { fix: s.fixValid, pps_ok: lastPps !== undefined && Math.abs(clock.now() - lastPps) < 2000 };
        },
        satellites: () => gpsdo.apiSatellites() as unknown as Satellite[],
      }
    : options.gpsdo;
  const ptpProvider: PtpProvider | undefined = ptp
    ? { status: () => ({ offset_ns: 0, ...ptp.status() }) }
    : options.ptp;
  let started = false;
  // The service's once-a-second work on one timer of the injected clock (service-tick.ts).
  const tick = new ServiceTick({ clock, logger });
  let offManagerTick: (() => void) | undefined;
  const web = createWebLayer({
    app,
    clock,
    config,
    logger,
    manager,
    registry,
    served,
    startedMs,
    version: VERSION,
    server: () => server,
    peers: () => peers,
    nts: () => ntsSide,
    stats: new SourceStatsTracker(),
    configFile: options.configFile,
    logRing: options.logRing,
    gpsdo: gpsdoProvider,
    ptp: ptpProvider,
    environment: options.environment,
    statusIntervalMs: options.statusIntervalMs,
    // Live peer changes from PUT /api/config (README "Web API: configuration").
    peerControl: {
      add: async (p) => {
        if (!ntp.enabled) return false;
        if (p.nts_enabled) code.ntsPeer ??= await import('./nts-peer.ts');
        const client = makePeer(p);
        if (!client) return false;
        manager.register(client);
        peers.push(client);
        if (started) client.start();
        return true;
      },
      remove: async (address) => {
        const i = peers.findIndex((c) => c.peer.config.address === address);
        const client = peers[i];
        if (!client) return;
        peers.splice(i, 1);
        manager.unregister(client.id);
        await client.close();
      },
    },
  });

  return {
    config,
    clock: served,
    manager,
    peers,
    registry,
    app,
    web,
    server: () => server,
    nts: () => ntsSide,
    gpsdo: () => gpsdo,
    ptp: () => ptp,
    clockQuality: quality,
    async start() {
      await web.checkCredentials();
      // Tick order: the host clock's step check, the reference's sample, the clock manager's evaluation
      // with it, then (added as they start) the native threads' state check and the web layer.
      served.start(tick);
      leapList?.start();
      gpsdo?.start(tick);
      // As manager.start() does: a first evaluation at once, then one a second (on the tick).
      clock.setTimer(0, () => {
        if (offManagerTick) manager.tick();
      });
      offManagerTick = tick.every(() => manager.tick());
      tick.start();
      if (ntp.enabled) {
        server = new NtpServer({
          port: ntp.port,
          bind: ntpBindAddresses(ntp.interface),
          clock: served,
          state: () => manager.serverState,
          policy,
          nts: ntsSide?.responder,
          rxCorrectionMs,
          kernelRxTimestamps: ntp.kernel_rx_timestamps,
          batchedIo: ntp.batched_io,
          nativeResponder: ntp.native_responder,
          recvBufferSize: ntp.socket_receive_buffer,
          logger: logger.child({ component: 'ntp-server' }),
          tick,
        });
        await server.start();
        await ntsSide?.start();
        for (const p of peers) p.start();
      }
      await ptp?.start();
      started = true;
      web.start(tick);
    },
    async close() {
      tick.stop();
      offManagerTick?.();
      offManagerTick = undefined;
      web.stop();
      await gpsdo?.close();
      await ptp?.close();
      served.stop();
      leapList?.stop();
      await Promise.all(peers.map((p) => p.close()));
      await server?.close();
      await ntsSide?.close();
      await app.close();
    },
  };
}
