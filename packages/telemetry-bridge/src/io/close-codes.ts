/**
 * The transport's side of the close codes (protocol/close-codes.ts): the domain never sees these numbers; it
 * reports a `DisconnectReason` and this module maps it.
 */
import type { DisconnectReason } from '../domain/outbound-queue.ts';
import { CloseCode } from '../protocol/close-codes.ts';

const BY_REASON: Record<DisconnectReason, { code: number; text: string }> = {
  slow_consumer: { code: CloseCode.SLOW_CONSUMER, text: 'Slow consumer' },
  superseded: { code: CloseCode.DISCONNECTED, text: 'Superseded by a newer connection' },
  shutdown: { code: CloseCode.SERVER_SHUTDOWN, text: 'Server shutdown' },
};

export function closeFor(reason: DisconnectReason): { code: number; text: string } {
  return BY_REASON[reason];
}
