// @broadcast-ops/simulators: peers for tests and demos, never for a show (README.md). `./playout` and
// `./companion` load one family alone.
export * from './playout/index.ts';
export * from './companion/index.ts';
