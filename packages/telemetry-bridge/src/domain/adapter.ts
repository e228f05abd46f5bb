/**
 * The adapter interface: how a device integration (the Companion Satellite adapter, the buttons adapter, a
 * test fake) plugs into the hub. An adapter owns a state namespace, reports its connection, publishes state
 * and events through its context, and executes commands routed to it by `target` (README "Adapters").
 */
import type { Clock, Logger } from '@broadcast-ops/core';

/** Feature negotiation result (spec capability table); values are flags, versions or counts. */
export type AdapterCapabilities = Record<string, boolean | string | number>;

export interface AdapterCommand {
  /** Id of the client's command message; acks carry it as `commandId`. */
  id: string;
  source: string;
  path: string;
  action: string;
  params: Record<string, unknown>;
  /** Carry onto every state change and event the command causes. */
  correlationId: string;
  /** Wall-clock ms after which the result no longer counts (the hub answers `timeout` then). */
  deadline: number;
}

export type AdapterResult =
  | { status: 'completed'; result?: unknown }
  | { status: 'failed' | 'rejected'; error: { code: string; message: string; details?: unknown } };

export interface AdapterContext {
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Publish a value at a path inside the adapter's namespace; `null` clears the key. The change is written
   * to the event log before this returns (not only before it is delivered), so an adapter can record what
   * it is about to do to its device and find it after a crash.
   */
  setState(path: string, value: unknown, options?: { correlationId?: string }): void;
  emitEvent(path: string, event: string, data?: unknown, options?: { correlationId?: string }): void;
  /**
   * Report the link to the device. `false` marks every key the adapter owns stale (one delta per key);
   * `true` clears stale on the keys the adapter does not republish (like an MQTT last will).
   */
  setConnected(connected: boolean, except?: (path: string) => boolean): void;
  /**
   * Mark every key the adapter owns stale without changing the reported link state: for a link lost while
   * the device was still redrawing (keys written in that window would otherwise stay fresh). `except` (here
   * and in `setConnected`) names keys left as they are, e.g. the keys describing the link itself.
   */
  markStale(stale: boolean, except?: (path: string) => boolean): void;
  /** Set or clear stale on one key the adapter owns (a key the device redrew, or one it cannot restore). */
  setPathStale(path: string, stale: boolean): void;
  /** Count a reconnect attempt and feed the latency histogram (README "Metrics"). */
  reportReconnect(): void;
  reportLatency(seconds: number): void;
  /** The current value at a path the adapter owns (after a restart: as restored from the event log). */
  read(path: string): unknown;
  /** Count a key the adapter released on its device because its release was never confirmed. */
  reportHeldReleased(): void;
}

export interface Adapter {
  /** Namespace of the adapter, e.g. `companion.satellite`; the source of its messages. */
  readonly name: string;
  /** Command `target` values routed to this adapter (its name and aliases such as `companion`). */
  readonly targets: readonly string[];
  /** State path prefixes the adapter owns, e.g. `companion` or `buttons.device`. */
  readonly owns: readonly string[];
  capabilities(): AdapterCapabilities;
  start(context: AdapterContext): Promise<void> | void;
  stop(): Promise<void> | void;
  /** Execute a command. A thrown error becomes `failed` with ADAPTER_ERROR; `signal` aborts at the deadline. */
  execute(command: AdapterCommand, signal: AbortSignal): Promise<AdapterResult>;
}
