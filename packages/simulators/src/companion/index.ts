// `@broadcast-ops/simulators/companion`: a Bitfocus Companion Satellite API server (companion-sim.ts) and the
// demo's scripted activity (demo.ts).
export * from './companion-sim.ts';
export * from './demo.ts';
