// The monitor's device codecs as a package entry (`@broadcast-ops/playout-monitor/protocol`): pure encoders and
// decoders for CasparCG OSC, vMix (XML, TCP API), HyperDeck, TSL UMD v5.0 and Ember+ framing. The device
// simulators (@broadcast-ops/simulators) build their packets with these, never with the service.
export * from './casparcg.ts';
export * from './glow.ts';
export * from './hyperdeck.ts';
export * from './osc.ts';
export * from './s101.ts';
export * from './tsl-umd.ts';
export * from './vmix-tcp.ts';
export * from './vmix.ts';
