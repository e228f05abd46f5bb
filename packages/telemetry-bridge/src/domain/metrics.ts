/** Counters the hub reports; the io layer maps them to prom-client (README "Metrics"). */
import type { AckStatus } from '../protocol/envelope.ts';

export interface HubMetrics {
  messageReceived(type: string, source: string): void;
  messagesSent(type: string, target: string, count: number): void;
  messageError(type: string, code: string): void;
  commandFinished(action: string, status: AckStatus, seconds: number): void;
  stateUpdate(prefix: string): void;
  rateLimited(client: string): void;
  adapterState(adapter: string, up: boolean): void;
  adapterReconnect(adapter: string): void;
  adapterLatency(adapter: string, seconds: number): void;
  slowConsumer(): void;
  /** Keys of departed clients deleted after their retention time. */
  keysExpired(count: number): void;
  /** Keys an adapter released on its device because their release was never confirmed. */
  heldKeyReleased(adapter: string): void;
}

export const noMetrics: HubMetrics = {
  messageReceived: () => undefined,
  messagesSent: () => undefined,
  messageError: () => undefined,
  commandFinished: () => undefined,
  stateUpdate: () => undefined,
  rateLimited: () => undefined,
  adapterState: () => undefined,
  adapterReconnect: () => undefined,
  adapterLatency: () => undefined,
  slowConsumer: () => undefined,
  keysExpired: () => undefined,
  heldKeyReleased: () => undefined,
};

/** Namespace prefix for metric labels: bounded cardinality (never a per-client id). */
export function labelOf(ns: string): string {
  const dot = ns.indexOf('.');
  return dot < 0 ? ns : ns.slice(0, dot);
}
