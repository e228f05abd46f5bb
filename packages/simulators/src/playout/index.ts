// `@broadcast-ops/simulators/playout`: CasparCG (OSC), vMix (HTTP XML API, TCP API) and HyperDeck (Ethernet
// protocol) simulators, one text-command handle over them (handle.ts), the `simulate` CLI command and the
// `--with-simulators` demo.
export * from './casparcg-sim.ts';
export * from './vmix-sim.ts';
export * from './hyperdeck-sim.ts';
export * from './handle.ts';
export * from './cli.ts';
export * from './demo.ts';
