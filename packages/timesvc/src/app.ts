/**
 * Builds the time service from its configuration and the process's context (docs/ARCHITECTURE.md "One
 * skeleton"): io/service.ts wires the served clock, the clock manager, peers, NTP, NTS, GPSDO, PTP and the web
 * layer on the context's clock put on the served clock's monotonic base (README "Clock"); `start` opens the
 * NTP sockets, then the web port; SIGHUP re-reads the NTS-KE certificate and key (docs/nts.md "Certificates").
 */
import {
  listeningUrl,
  type LoggerConfig,
  type Service,
  type ServiceContext,
  type ServiceHealth,
} from '@broadcast-ops/core';
import type { TimesvcConfig } from './config.ts';
import { assessHealth } from './domain/health.ts';
import { servedBaseClock, type TimeSource } from './io/served-clock.ts';
import { createTimesvc, type TimesvcService } from './io/service.ts';
import type { LogRing } from './io/web/log-ring.ts';

/** Secrets of the configuration, never logged whatever logs the configuration. */
const REDACT = ['web.jwt_secret', 'nts.cookie_key', 'config.web.jwt_secret', 'config.nts.cookie_key'];

/**
 * The logger from the configuration: `LOG_LEVEL` over `logging.level`, pretty with `LOG_PRETTY=1` or
 * `logging.format: pretty`; otherwise JSON lines that also feed `logRing` (/api/logs, /api/ws/logs).
 */
export function timesvcLogger(config: TimesvcConfig, env: NodeJS.ProcessEnv, logRing: LogRing): LoggerConfig {
  const level = config.logging.level === 'warning' ? 'warn' : config.logging.level;
  const pretty = env['LOG_PRETTY'] === '1' || config.logging.format === 'pretty';
  return {
    service: 'timesvc',
    level: env['LOG_LEVEL'] ?? level,
    pretty,
    ...(pretty ? {} : { destination: logRing.stream() }),
    redact: REDACT,
  };
}

export interface TimesvcAppOptions {
  /** The ring the logger's destination feeds (main.ts gives the one `timesvcLogger` wrote to). */
  logRing?: LogRing | undefined;
  /** Where the served clock reads the host's clocks (default: the host's; tests simulate host steps). */
  timeSource?: TimeSource | undefined;
}

/** core's `Service`, with the wired time service inside for tests and tools. */
export interface TimesvcApp extends Service {
  readonly timesvc: TimesvcService;
  reload(reason: string): void;
}

export async function createTimesvcApp(
  context: ServiceContext<TimesvcConfig>,
  options: TimesvcAppOptions = {},
): Promise<TimesvcApp> {
  const { config, logger } = context;
  const clock = servedBaseClock(context.clock, options.timeSource);
  const timesvc = await createTimesvc(config, logger, {
    clock,
    configFile: context.configFile,
    logRing: options.logRing,
    environment: context.env,
    ...(options.timeSource ? { timeSource: options.timeSource } : {}),
  });
  const d = config.ntp.discipline;
  return {
    timesvc,
    async start() {
      await timesvc.start();
      await timesvc.app.listen({ port: config.web.port, host: config.web.bind_address });
    },
    close: () => timesvc.close(),
    health(): ServiceHealth {
      const snap = timesvc.manager.snapshot();
      const h = assessHealth(
        {
          state: snap.state,
          estimatedErrorS: snap.estimatedErrorS,
          disagreements: snap.disagreements,
          nowMs: clock.monotonicMs(),
        },
        { maxErrorS: d.health_max_error, holdoverMaxErrorS: d.holdover_max_error },
      );
      return { ...h, clock_state: snap.state, reference: snap.selected ?? snap.lastReference ?? null };
    },
    describe: () => ({
      ntp: timesvc.server()?.addresses ?? [],
      web: listeningUrl(timesvc.app),
      peers: config.ntp.upstream_peers.map((p) => p.address),
      localStratum: config.ntp.local_stratum ? config.ntp.stratum : null,
    }),
    reload(reason) {
      timesvc.nts()?.ke.reload(reason);
    },
  };
}
