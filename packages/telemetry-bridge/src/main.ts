// Entry point of `npx telemetry-bridge`: the only module that reads the environment and opens ports.
import { runCli } from '@broadcast-ops/core';

await runCli('telemetry-bridge', 'not implemented yet; see the issues', {});
