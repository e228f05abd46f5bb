/**
 * `@broadcast-ops/telemetry-bridge/testing`: what benches (bench/) and the repository's scripts/test use beyond
 * the package's public API, so nothing outside the package imports its src/ or test/ by path
 * (docs/ARCHITECTURE.md "Rules the build enforces"). Sources only (the `source` condition): test/ is not built.
 */
export { CompanionSimulator } from '@broadcast-ops/simulators/companion';
export { startTestBridge, type TestBridge } from './helpers.ts';
