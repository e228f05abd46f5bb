// Entry point of `npx playout-monitor`: the only module that reads the environment and opens ports.
import { runCli } from '@broadcast-ops/core';

await runCli('playout-monitor', 'not implemented yet; see the issues', {});
