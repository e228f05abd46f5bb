/**
 * `@broadcast-ops/punch/testing`: what benches (bench/) and the repository's scripts/test use beyond the
 * package's public API, so nothing outside the package imports its src/ or test/ by path
 * (docs/ARCHITECTURE.md "Rules the build enforces"). Sources only (the `source` condition): test/ is not built.
 */
export { punchConfigSchema } from '../src/config.ts';
export { startTestServer, type TestServer } from './helpers.ts';
export { startRedis } from './redis-fixture.ts';
