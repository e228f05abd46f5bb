// The bridge's wire protocol as a package entry (`@broadcast-ops/telemetry-bridge/protocol`): the client
// envelope and its schemas, the close codes, the event-log record and the Companion Satellite API codec. Pure
// codecs: the client SDK (@broadcast-ops/bridge-client) and the Companion simulator (@broadcast-ops/simulators)
// depend on this entry only, never on the server.
export * from './envelope.ts';
export * from './close-codes.ts';
export * from './log-record.ts';
export * from './satellite.ts';
