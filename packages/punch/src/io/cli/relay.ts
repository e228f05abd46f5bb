import { configFileOf, createLogger, Shutdown, ConfigError, type CliCommand } from '@broadcast-ops/core';
import { loadPunchCliConfig, punchLogger, type PunchConfig } from '../../config.ts';

/** `punch relay`: the opaque relay as a process of its own (docs/relay.md "Deploying a separate relay"). */
async function relay(values: Record<string, unknown>): Promise<void> {
  // Loaded here: `punch serve` and `punch agent` start without the relay's modules.
  const { startRelayProcess } = await import('../relay/relay-process.ts');
  let config: PunchConfig;
  try {
    config = loadPunchCliConfig(configFileOf(values, process.env, undefined), process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`punch: ${err.message}\n`);
    process.exitCode = 2;
    return;
  }
  const logger = createLogger(punchLogger(config, process.env, 'punch-relay'));
  let running;
  try {
    running = await startRelayProcess(config, logger);
  } catch (err) {
    process.stderr.write(`punch relay: ${(err as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  const r = running;
  new Shutdown({ logger }).install().add('relay', () => r.close());
  logger.info(
    {
      relay: r.id,
      address: config.relay.publicAddress,
      host: config.relay.host,
      ports: config.relay.ports,
      capacity: config.relay.maxAllocations,
      ...(r.http === undefined ? {} : { http: r.http }),
    },
    'punch relay registered',
  );
}

export const RELAY_COMMAND: CliCommand = {
  summary: 'Run the opaque SRT relay on its own; brokers reach it through Redis (PUNCH_REDIS_URL)',
  options: {
    config: { type: 'string', description: 'JSON or YAML config file (environment overrides it)' },
  },
  run: ({ values }) => relay(values),
};
