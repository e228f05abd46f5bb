/**
 * WebSocket close codes of the client protocol, shared by the server's transport (io/close-codes.ts maps the
 * domain's disconnect reasons to them) and the client SDK (@broadcast-ops/bridge-client). 1001, 1009 and 1013
 * are RFC 6455 §7.4.1 codes; the 4000-4999 range is private use (RFC 6455 §7.4.2), numbered as the original
 * telemetry-bridge client transport did and extended with 4008 (slow consumer).
 */
export const CloseCode = {
  SERVER_SHUTDOWN: 1001,
  MESSAGE_TOO_BIG: 1009,
  MAX_CLIENTS: 1013,
  HANDSHAKE_TIMEOUT: 4000,
  NOT_HANDSHAKE: 4001,
  INVALID_HANDSHAKE: 4002,
  AUTH_FAILED: 4003,
  IDLE_TIMEOUT: 4004,
  /** Closed by the server: a newer connection proved the same identity and took the namespace over. */
  DISCONNECTED: 4005,
  SLOW_CONSUMER: 4008,
} as const;

/** Metric label for a close code the transport saw (bounded set). */
export function reasonOfCode(code: number): string {
  switch (code) {
    case CloseCode.SLOW_CONSUMER:
      return 'slow_consumer';
    case CloseCode.MESSAGE_TOO_BIG:
      return 'message_too_large';
    case CloseCode.DISCONNECTED:
      return 'superseded';
    case CloseCode.IDLE_TIMEOUT:
      return 'idle_timeout';
    case CloseCode.SERVER_SHUTDOWN:
      return 'shutdown';
    default:
      return 'client';
  }
}
