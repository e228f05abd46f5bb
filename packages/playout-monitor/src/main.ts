// Entry point of `npx playout-monitor`: the process (CLI, config, logger, signals, clock) is core's
// runService; the monitor is app.ts; `simulate` is @broadcast-ops/simulators' playout CLI.
// core's start-heap.ts first: the young generation stays at its first size and TurboFan off while the
// service loads and starts (docs/at-rest.md "Young generation"). Everything else is imported after it has
// run, hence the dynamic imports: static ones would all be loaded before it.
import '@broadcast-ops/core/start-heap';

// No top-level await: the build also bundles this file into one CommonJS start file (dist/start.cjs,
// docs/at-rest.md "One start file"), where there is none.
void Promise.all([
  import('@broadcast-ops/core'),
  import('./app.ts'),
  import('@broadcast-ops/simulators/playout/cli'),
  import('./config.ts'),
]).then(
  async ([{ runService }, { loadPlayoutSetup, playoutApp }, { simulateCommand }, { DEFAULT_PORTS }]) => {
    return runService({
      bin: 'playout-monitor',
      description: 'playout monitor: CasparCG (OSC), vMix (HTTP) and HyperDeck (TCP) state, normalised',
      runSummary: 'run the monitor (default command)',
      configEnv: 'PLAYOUT_MONITOR_CONFIG',
      configDescription: 'configuration file (JSON/YAML); env PLAYOUT_MONITOR_CONFIG',
      loadConfig: loadPlayoutSetup,
      logger: (_setup, env) => ({
        service: 'playout-monitor',
        level: env['LOG_LEVEL'] ?? 'info',
        pretty: env['LOG_PRETTY'] === '1',
      }),
      create: playoutApp,
      startedMessage: 'playout monitor listening',
      runOptions: {
        'with-simulators': {
          type: 'boolean',
          description: 'demo: also simulate every device configured on a loopback address',
        },
      },
      commands: { simulate: simulateCommand(DEFAULT_PORTS) },
    });
  },
);
