// `@broadcast-ops/telemetry-bridge/client`, kept for code written against it: the client SDK is its own
// package, @broadcast-ops/bridge-client (packages/bridge-client/README.md).
export * from '@broadcast-ops/bridge-client';
