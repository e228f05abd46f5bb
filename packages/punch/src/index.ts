// Public surface of the punch package (the WebSocket layer builds on these).
export {
  SessionBroker,
  type BrokerEvent,
  type ClaimResult,
  type CloseOutcome,
  type CreateOutcome,
  type CreateSessionInput,
  type StoreHealth,
  type StreamChangeOutcome,
} from './domain/broker.ts';
export { refuse, type Outcome, type Refusal, type RefusalCode } from './domain/outcome.ts';
export type { SessionStore } from './domain/store.ts';
export { MemoryStore } from './domain/store.ts';
export * from './domain/session.ts';
export { FixedWindowLimiter, type LimitGroup } from './domain/rate-limiter.ts';
export { clientAddress, parseTrustPolicy, rateLimitKey, type TrustPolicy } from './io/client-address.ts';
export { ClientLimits } from './io/client-limits.ts';
export { AccessChecker, type AccessRefusal, type AuthFailureReason } from './domain/access.ts';
export { SessionStoreError, SqliteSessionStore } from './io/sqlite-store.ts';
export { TokenSigner, type TokenClaims } from './protocol/token.ts';
export { connectionStrings, type ConnectionParams } from './protocol/connection-strings.ts';
export { PUNCH_ERRORS, httpErrorOf, type PunchErrorCode } from './io/http-errors.ts';
export { loadPunchConfig, type PunchConfig } from './config.ts';
export {
  createPunchApp,
  createPunchServer,
  type PunchApp,
  type PunchAppOptions,
  type PunchServer,
  type PunchServerOptions,
} from './app.ts';
