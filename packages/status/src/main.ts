// Entry point of `broadcast-ops-status` (docs/ARCHITECTURE.md "One skeleton"): the service is built in app.ts.
import { runService } from '@broadcast-ops/core';
import { createStatusService } from './app.ts';
import { loadStatusConfig } from './config.ts';

// No top-level await: the build also bundles this file into one CommonJS start file (dist/start.cjs,
// docs/at-rest.md "One start file"), where there is none.
void runService({
  bin: 'broadcast-ops-status',
  description:
    "the toolkit's status service: polls every service's health, serves one page, /api/fleet and /metrics",
  runSummary: 'run the status service (default command)',
  configEnv: 'STATUS_CONFIG',
  configDescription: 'JSON or YAML config file (or $STATUS_CONFIG)',
  loadConfig: loadStatusConfig,
  logger: (config, env) => ({
    service: 'status',
    level: config.logging.level,
    pretty: env['LOG_PRETTY'] === '1',
  }),
  create: createStatusService,
  startedMessage: 'status service listening',
});
