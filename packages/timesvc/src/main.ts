// Entry point of `npx timesvc` (docs/ARCHITECTURE.md "One skeleton"): the service is built in app.ts, the
// other sub-commands are in io/cli/commands.ts.
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
  import('./io/web/log-ring.ts'),
]).then(
  async ([
    { runService },
    { createTimesvcApp, timesvcLogger },
    { loadTimesvcConfig },
    { timesvcCommands },
    { LogRing },
  ]) => {
    // Every JSON log line also feeds /api/logs and /api/ws/logs (not with pretty output).
    const logRing = new LogRing();

    return runService({
      bin: 'timesvc',
      description: 'NTPv4 and NTS time service with a clock manager (upstream peers, local stratum)',
      runCommand: 'serve',
      runSummary: 'Run the time service (the default command)',
      configDescription: 'YAML or JSON config file (default: embedded defaults)',
      loadConfig: loadTimesvcConfig,
      logger: (config, env) => timesvcLogger(config, env, logRing),
      create: (context) => createTimesvcApp(context, { logRing }),
      startedMessage: 'timesvc started; the system clock is never adjusted',
      commands: timesvcCommands,
    });
  },
);
