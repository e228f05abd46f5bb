// Entry point of `npx telemetry-bridge`: the process (CLI, config, logger, signals, clock) is core's
// runService; the bridge is app.ts; the other sub-commands are io/cli/commands.ts.
// core's start-heap.ts first: the young generation stays at its first size and TurboFan off while the
// service loads and starts (docs/at-rest.md "Young generation"). Everything else is imported after it has
// run, hence the dynamic imports: static ones would all be loaded before it.
import '@broadcast-ops/core/start-heap';

// No top-level await: the build also bundles this file into one CommonJS start file (dist/start.cjs,
// docs/at-rest.md "One start file"), where there is none.
void Promise.all([
  import('@broadcast-ops/core'),
  import('./app.ts'),
  import('./config.ts'),
  import('./io/cli/commands.ts'),
]).then(async ([{ runService }, { bridgeApp }, { loadBridgeConfig }, { CONFIG_ENV, commands }]) => {
  return runService({
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
});
