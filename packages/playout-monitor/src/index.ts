// Public surface of the package (the output side and the tests build on these).
export * from './config.ts';
export * from './domain/device-state.ts';
export * from './domain/device-store.ts';
export * from './domain/video-format.ts';
export { MALFORMED_KINDS, type MalformedKind } from './malformed.ts';
export { Monitor, type MonitorOptions } from './monitor.ts';
export { healthBody, type HealthBody } from './io/health.ts';
export { PlayoutService, type PlayoutServiceOptions, type StartedService } from './playout-service.ts';
export { playoutApp, loadPlayoutSetup, type PlayoutSetup } from './app.ts';
// The device simulators are their own package; re-exported here for code written against this index.
export {
  startSimulator,
  simulatorKind,
  type SimulatorHandle,
  type SimulatorKind,
  CasparcgSimulator,
  VmixSimulator,
  HyperdeckSimulator,
} from '@broadcast-ops/simulators/playout';
