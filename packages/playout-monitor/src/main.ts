// Entry point of `npx playout-monitor`: the process (CLI, config, logger, signals, clock) is core's
// runService; the monitor is app.ts; `simulate` is @broadcast-ops/simulators' playout CLI.
import { runService } from '@broadcast-ops/core';
import { loadPlayoutSetup, playoutApp } from './app.ts';
import { simulateCommand } from '@broadcast-ops/simulators/playout';
import { DEFAULT_PORTS } from './config.ts';

await runService({
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
