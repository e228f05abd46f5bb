// Entry point of `broadcast-ops-status`: the only module that reads the environment and opens ports.
import {
  ConfigError,
  Shutdown,
  createLogger,
  listeningUrl,
  packageVersion,
  runCli,
  systemClock,
} from '@broadcast-ops/core';
import { loadStatusConfig } from './config.ts';
import { Fleet } from './domain/fleet.ts';
import { buildStatusApp } from './io/http-app.ts';
import { statusMetrics } from './io/metrics.ts';
import { Poller } from './io/poller.ts';

await runCli(
  'broadcast-ops-status',
  "the toolkit's status service: polls every service's health, serves one page, /api/fleet and /metrics",
  {
    run: {
      summary: 'run the status service (default command)',
      options: {
        config: { type: 'string', short: 'c', description: 'JSON or YAML config file (or $STATUS_CONFIG)' },
      },
      run: async ({ values }) => {
        const file =
          typeof values['config'] === 'string' ? values['config'] : process.env['STATUS_CONFIG'] || undefined;
        let config;
        try {
          config = loadStatusConfig(file);
        } catch (err) {
          process.stderr.write(`broadcast-ops-status: ${(err as Error).message}\n`);
          process.exitCode = err instanceof ConfigError ? 2 : 1;
          return;
        }
        const logger = createLogger({
          service: 'status',
          level: config.logging.level,
          pretty: process.env['LOG_PRETTY'] === '1',
        });
        const shutdown = new Shutdown({ logger }).install();
        const clock = systemClock;
        const fleet = new Fleet(config.services);
        const { registry, onPoll } = statusMetrics(fleet);
        const poller = new Poller({ config, fleet, clock, logger, env: process.env, onPoll });
        const app = buildStatusApp({
          fleet,
          registry,
          clock,
          logger,
          version: packageVersion() ?? '0.0.0',
          pollIntervalMs: config.pollIntervalMs,
          startedAtMs: clock.monotonicMs(),
          notes: config.notes,
        });
        await app.listen({ host: config.listen.host, port: config.listen.port });
        poller.start();
        shutdown.add('poller', () => poller.stop());
        shutdown.add('http', () => app.close());
        logger.info(
          {
            url: listeningUrl(app),
            services: config.services.map((s) => s.name),
            pollIntervalMs: config.pollIntervalMs,
          },
          'status service listening',
        );
      },
    },
  },
  process.argv.slice(2),
  'run',
);
