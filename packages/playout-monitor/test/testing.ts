/**
 * `@broadcast-ops/playout-monitor/testing`: what benches (bench/) and the repository's scripts/test use beyond
 * the package's public API, so nothing outside the package imports its src/ or test/ by path
 * (docs/ARCHITECTURE.md "Rules the build enforces"). Sources only (the `source` condition): test/ is not built.
 */
export { PlayoutService } from '../src/playout-service.ts';
export { decodeGlowRequests } from '../src/protocol/glow.ts';
export { decodeTslPacket } from '../src/protocol/tsl-umd.ts';
export { parseVmixXml } from '../src/protocol/vmix.ts';
export { startRig, type Rig } from './outputs/helpers.ts';
export { startPunchBroker } from './punch-broker.ts';
