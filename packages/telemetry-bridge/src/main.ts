// Entry point of `npx telemetry-bridge`: the process (CLI, config, logger, signals, clock) is core's
// runService; the bridge is app.ts; the other sub-commands are io/cli/commands.ts.
import { runService } from '@broadcast-ops/core';
import { bridgeApp } from './app.ts';
import { loadBridgeConfig } from './config.ts';
import { CONFIG_ENV, commands } from './io/cli/commands.ts';

await runService({
  bin: 'telemetry-bridge',
  description: 'state-first telemetry hub: state store, router, commands, event log, client WebSocket',
  runSummary: 'run the bridge (default command)',
  configEnv: CONFIG_ENV,
  configDescription: `JSON or YAML config file (or $${CONFIG_ENV})`,
  loadConfig: (file, env) => loadBridgeConfig(file, env),
  logger: (config, env) => ({
    service: 'telemetry-bridge',
    level: config.logging.level,
    pretty: config.logging.pretty || env['LOG_PRETTY'] === '1',
    // Client tokens never reach a log line, whatever logs the configuration.
    redact: ['authToken', '*.authToken', 'authTokens', '*.authTokens'],
  }),
  create: bridgeApp,
  startedMessage: 'telemetry bridge listening',
  runOptions: {
    'companion-sim': {
      type: 'boolean',
      description:
        'demo: when companion.enabled is false, run a scripted Companion simulator in-process and connect to it',
    },
  },
  commands,
});
