// Entry point of `npx timesvc` (docs/ARCHITECTURE.md "One skeleton"): the service is built in app.ts, the
// other sub-commands are in io/cli/commands.ts.
import { runService } from '@broadcast-ops/core';
import { createTimesvcApp, timesvcLogger } from './app.ts';
import { loadTimesvcConfig } from './config.ts';
import { timesvcCommands } from './io/cli/commands.ts';
import { LogRing } from './io/web/log-ring.ts';

// Every JSON log line also feeds /api/logs and /api/ws/logs (not with pretty output).
const logRing = new LogRing();

await runService({
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
