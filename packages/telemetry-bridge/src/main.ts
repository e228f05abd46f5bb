// Entry point of `npx telemetry-bridge`: the only module that reads the environment and opens ports.
import { ConfigError, Shutdown, createLogger, runCli } from '@broadcast-ops/core';
import { loadBridgeConfig } from './config.ts';
import { formatReplay, parseReplayFilter } from './replay.ts';
import { startBridge } from './service.ts';

function configPath(values: Record<string, unknown>): string | undefined {
  const v = values['config'];
  if (typeof v === 'string') return v;
  const env = process.env['BRIDGE_CONFIG_PATH'];
  return env === undefined || env === '' ? undefined : env;
}

function fail(err: unknown): void {
  process.stderr.write(`telemetry-bridge: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof ConfigError ? 2 : 1;
}

await runCli(
  'telemetry-bridge',
  'state-first telemetry hub: state store, router, commands, event log, client WebSocket',
  {
    run: {
      summary: 'run the bridge (default command)',
      options: {
        config: {
          type: 'string',
          short: 'c',
          description: 'JSON or YAML config file (or $BRIDGE_CONFIG_PATH)',
        },
      },
      run: async ({ values }) => {
        let config;
        try {
          config = loadBridgeConfig(configPath(values));
        } catch (err) {
          fail(err);
          return;
        }
        const logger = createLogger({
          service: 'telemetry-bridge',
          level: config.logging.level,
          pretty: config.logging.pretty || process.env['LOG_PRETTY'] === '1',
          redact: ['authToken', '*.authToken', 'authTokens', '*.authTokens'],
        });
        const shutdown = new Shutdown({ logger }).install();
        let bridge;
        try {
          bridge = await startBridge({ config, logger });
        } catch (err) {
          logger.fatal({ err }, 'could not start');
          process.exitCode = 1;
          shutdown.uninstall();
          return;
        }
        shutdown.add('bridge', () => bridge.close());
        logger.info(
          {
            name: config.name,
            environment: config.environment,
            clients: bridge.clientUrl,
            metrics: bridge.metricsUrl,
            health: bridge.healthUrl,
            epoch: bridge.hub.epoch,
            offset: bridge.hub.offset,
          },
          'telemetry bridge listening',
        );
      },
    },
    replay: {
      summary: 'print the event log as JSON lines, optionally filtered',
      options: {
        config: { type: 'string', short: 'c', description: 'config file whose eventLog.path to read' },
        dir: { type: 'string', description: 'event log directory (overrides the config)' },
        from: { type: 'string', description: 'only records with offset > this' },
        to: { type: 'string', description: 'only records with offset <= this' },
        type: { type: 'string', description: 'only this kind: state, event, command, ack, meta' },
        path: { type: 'string', description: 'only messages whose path matches this pattern (* and **)' },
        'correlation-id': { type: 'string', description: 'only messages with this correlation id' },
        summary: { type: 'boolean', description: 'print counts and the offset range instead of records' },
      },
      run: ({ values }) => {
        try {
          const dir =
            typeof values['dir'] === 'string'
              ? values['dir']
              : loadBridgeConfig(configPath(values)).eventLog.path;
          const filter = parseReplayFilter(values);
          for (const line of formatReplay(dir, filter, values['summary'] === true))
            process.stdout.write(line + '\n');
        } catch (err) {
          fail(err);
        }
      },
    },
  },
  process.argv.slice(2),
  'run',
);
