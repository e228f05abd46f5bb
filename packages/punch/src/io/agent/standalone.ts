import { runCli } from '@broadcast-ops/core';
import { AGENT_COMMAND } from './cli.ts';

/**
 * Entry of the single-file agent the broker serves under `/agent/` (src/io/agent-bundle.ts, docs/agent.md
 * "Without a checkout"): `node punch-agent-<version>.mjs --link '<join link>' --role …`, the `agent`
 * command of `punch` and nothing else. The bundler defines PUNCH_AGENT_VERSION as the broker's version.
 */
declare const PUNCH_AGENT_VERSION: string | undefined;

await runCli(
  'punch-agent',
  'one end of an SRT link, driven by a punch broker (its join page shows the command)',
  { agent: AGENT_COMMAND },
  process.argv.slice(2),
  'agent',
  { version: typeof PUNCH_AGENT_VERSION === 'string' ? PUNCH_AGENT_VERSION : 'unbundled' },
);
