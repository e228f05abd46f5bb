// Entry point of `npx timesvc`: the only module that reads the environment and opens ports.
import { ConfigError, Shutdown, createLogger, listeningUrl, runCli } from '@broadcast-ops/core';
import { loadTimesvcConfig, parseHostPort } from './config.ts';
import { queryServer } from './io/query.ts';
import { createTimesvc } from './io/service.ts';

const configOption = {
  config: {
    type: 'string' as const,
    short: 'c',
    description: 'YAML or JSON config file (default: embedded defaults)',
  },
};

function load(values: Record<string, unknown>): ReturnType<typeof loadTimesvcConfig> | undefined {
  const file = typeof values['config'] === 'string' ? values['config'] : undefined;
  try {
    return loadTimesvcConfig(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`timesvc: ${err.message}\n`);
      process.exitCode = 2;
      return undefined;
    }
    throw err;
  }
}

await runCli(
  'timesvc',
  'NTPv4 and NTS time service with a clock manager (upstream peers, local stratum)',
  {
    serve: {
      summary: 'Run the time service (the default command)',
      options: configOption,
      run: async ({ values }) => {
        const config = load(values);
        if (!config) return;
        const level = config.logging.level === 'warning' ? 'warn' : config.logging.level;
        const logger = createLogger({
          service: 'timesvc',
          level: process.env['LOG_LEVEL'] ?? level,
          pretty: process.env['LOG_PRETTY'] === '1' || config.logging.format === 'pretty',
          redact: ['web.jwt_secret', 'nts.cookie_key', 'config.web.jwt_secret', 'config.nts.cookie_key'],
        });
        const service = createTimesvc(config, logger);
        const shutdown = new Shutdown({ logger }).install();
        // SIGHUP re-reads the NTS-KE certificate and key (docs/nts.md "Certificates").
        const onHangup = (): void => {
          service.nts()?.ke.reload('SIGHUP');
        };
        process.on('SIGHUP', onHangup);
        shutdown.add('sighup', () => {
          process.off('SIGHUP', onHangup);
        });
        shutdown.add('timesvc', () => service.close());
        try {
          await service.start();
          await service.app.listen({ port: config.web.port, host: config.web.bind_address });
        } catch (err) {
          logger.error({ err: (err as Error).message }, 'start-up failed');
          shutdown.uninstall();
          await service.close().catch(() => undefined);
          process.exitCode = 1;
          return;
        }
        logger.info(
          {
            ntp: service.server()?.addresses ?? [],
            web: listeningUrl(service.app),
            peers: config.ntp.upstream_peers.map((p) => p.address),
            localStratum: config.ntp.local_stratum ? config.ntp.stratum : null,
          },
          'timesvc started; the system clock is never adjusted',
        );
      },
    },
    'check-config': {
      summary: 'Validate a config file and print the effective configuration (secrets hidden)',
      options: configOption,
      run: ({ values }) => {
        const config = load(values);
        if (!config) return;
        const shown = {
          ...config,
          web: { ...config.web, jwt_secret: config.web.jwt_secret ? '[set]' : '' },
          nts: { ...config.nts, cookie_key: config.nts.cookie_key ? '[set]' : '' },
        };
        process.stdout.write(JSON.stringify(shown, null, 2) + '\n');
      },
    },
    query: {
      summary: 'Ask an NTP server for the time once and print offset, delay, stratum, refid',
      positionals: '<host[:port]>',
      options: { count: { type: 'string', description: 'number of queries (default 1, max 20)' } },
      run: async ({ positionals, values }) => {
        const hp = parseHostPort(positionals[0] ?? '', 123);
        if (!hp) {
          process.stderr.write('timesvc query: give host or host:port\n');
          process.exitCode = 2;
          return;
        }
        const count = Math.max(1, Math.min(20, Number(values['count'] ?? 1) || 1));
        for (let i = 0; i < count; i++) {
          try {
            const r = await queryServer(hp.host, hp.port, 2000);
            process.stdout.write(JSON.stringify(r) + '\n');
          } catch (err) {
            process.stderr.write(`timesvc query: ${(err as Error).message}\n`);
            process.exitCode = 1;
          }
        }
      },
    },
  },
  process.argv.slice(2),
  'serve',
);
