// Entry point of `npx punch`: the only module that reads the environment and opens ports.
import { runCli } from '@broadcast-ops/core';

await runCli('punch', 'not implemented yet; see the issues', {});
