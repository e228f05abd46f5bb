// Entry point of `npx timesvc`: the only module that reads the environment and opens ports.
import { runCli } from '@broadcast-ops/core';

await runCli('timesvc', 'not implemented yet; see the issues', {});
