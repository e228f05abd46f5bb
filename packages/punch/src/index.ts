// Public surface of the punch package (the WebSocket layer of the next issue builds on these).
export {
  SessionBroker,
  type BrokerEvent,
  type ClaimResult,
  type CreateSessionInput,
} from './domain/broker.ts';
export type { SessionStore } from './domain/store.ts';
export { MemoryStore } from './domain/store.ts';
export * from './domain/session.ts';
export { FixedWindowLimiter } from './domain/rate-limiter.ts';
export { AccessChecker, type AuthFailureReason } from './domain/access.ts';
export { SqliteSessionStore } from './io/sqlite-store.ts';
export { TokenSigner, type TokenClaims } from './protocol/token.ts';
export { connectionStrings, type ConnectionParams } from './protocol/connection-strings.ts';
export { PUNCH_ERRORS, type PunchErrorCode } from './errors.ts';
export { loadPunchConfig, type PunchConfig } from './config.ts';
export { createPunchServer, type PunchServer } from './server.ts';
