// `@broadcast-ops/playout-monitor/domain`: the pure tables and arithmetic other packages share with the monitor
// (video formats and timecode), so a simulator counts frames and names formats exactly as the monitor does.
// The state machines stay inside the package.
export * from './timecode.ts';
export * from './video-format.ts';
