// Entry point of `npx punch` (the repository's ARCHITECTURE.md "One skeleton"): the process is core's runService, the
// broker is app.ts; `agent` is io/agent/cli.ts, `relay` io/cli/relay.ts.
// core's start-heap.ts first: the young generation stays at its first size and TurboFan off while the
// service loads and starts (docs/at-rest.md "Young generation"). Everything else is imported after it has
// run, hence the dynamic imports: static ones would all be loaded before it.
import '@broadcast-ops/core/start-heap';

// No top-level await: the build also bundles this file into one CommonJS start file (dist/start.cjs,
// docs/at-rest.md "One start file"), where there is none.
void Promise.all([
  import('@broadcast-ops/core'),
  import('./config.ts'),
  import('./io/agent/cli.ts'),
  import('./io/cli/relay.ts'),
  import('./io/startup-files.ts'),
]).then(
  async ([
    { runService },
    { loadPunchCliConfig, punchLogger },
    { AGENT_COMMAND },
    { RELAY_COMMAND },
    { DEMO_SECRET_FILE },
  ]) => {
    return runService({
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
  },
);
