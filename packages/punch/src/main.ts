// Entry point of `npx punch` (the repository's ARCHITECTURE.md "One skeleton"): the process is core's runService, the
// broker is app.ts; `agent` is io/agent/cli.ts, `relay` io/cli/relay.ts.
import { runService } from '@broadcast-ops/core';
import { loadPunchCliConfig, punchLogger } from './config.ts';
import { AGENT_COMMAND } from './io/agent/cli.ts';
import { RELAY_COMMAND } from './io/cli/relay.ts';
import { DEMO_SECRET_FILE } from './io/startup-files.ts';

await runService({
  bin: 'punch',
  description: 'SRT session broker (sessions, tokens, connection strings)',
  runCommand: 'serve',
  runSummary: 'Start the broker (configuration from PUNCH_* environment variables)',
  configDescription: 'JSON or YAML config file (environment overrides it)',
  loadConfig: loadPunchCliConfig,
  logger: (config, env) => punchLogger(config, env, 'punch'),
  // Loaded here, not at the top: `punch agent` (a device restart) starts without the broker's modules.
  create: async (context) => (await import('./app.ts')).createPunchApp(context),
  startedMessage: 'punch broker listening',
  runOptions: {
    demo: {
      type: 'boolean',
      description: `Without PUNCH_SECRET, keep a random secret in ${DEMO_SECRET_FILE}`,
    },
  },
  commands: { agent: AGENT_COMMAND, relay: RELAY_COMMAND },
});
