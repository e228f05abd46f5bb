/**
 * WebSocket close codes of the client transport. 1001 and 1013 are RFC 6455 §7.4.1 codes; the 4000-4999
 * range is private use (RFC 6455 §7.4.2), numbered as the original telemetry-bridge client transport did and
 * extended with 4008 (slow consumer). The domain never sees these numbers: it reports a `DisconnectReason`
 * and this module maps it.
 */
import type { DisconnectReason } from '../domain/outbound-queue.ts';

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

const BY_REASON: Record<DisconnectReason, { code: number; text: string }> = {
  slow_consumer: { code: CloseCode.SLOW_CONSUMER, text: 'Slow consumer' },
  superseded: { code: CloseCode.DISCONNECTED, text: 'Superseded by a newer connection' },
  shutdown: { code: CloseCode.SERVER_SHUTDOWN, text: 'Server shutdown' },
};

export function closeFor(reason: DisconnectReason): { code: number; text: string } {
  return BY_REASON[reason];
}

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
