/** The Companion session's configuration and the shapes it publishes (docs/companion.md "Configuration"). */
import type { BitmapFormat } from './features.ts';

export type CompanionConnectionState = 'disconnected' | 'connecting' | 'connected' | 'reconnecting' | 'error';

export interface CompanionVariable {
  /** Id declared to Companion; `group:name` publishes at `companion.variables.group.name`. */
  id: string;
  type: 'input' | 'output';
  name: string;
  description?: string | undefined;
}

export interface CompanionDevice {
  deviceId: string;
  productName: string;
  serial?: string;
  keysTotal: number;
  keysPerRow: number;
  /** Bitmap edge in px; 0 = no bitmaps (keys then carry text and colours only). */
  bitmaps: number;
  /** Preferred encoding of bitmaps; asked for only where CAPS BITMAP_FORMATS lists it (1.12.0). */
  bitmapFormat?: BitmapFormat;
  colors: 'hex' | 'rgb' | false;
  text: boolean;
  textStyle: boolean;
  /** Ask Companion for LOCKED-STATE instead of lock drawings (1.8.0). */
  pincodeLock: boolean;
  /** Receive BRIGHTNESS (opt-out needs 1.7.0). */
  brightness: boolean;
  variables: CompanionVariable[];
}

/** One Companion instance the adapter may use. */
export interface CompanionHost {
  host: string;
  port: number;
}

/** What the session decides from: every duration in ms. */
export interface CompanionSessionOptions {
  host: string;
  port: number;
  /**
   * Hot standby: Companion instances in order of preference (docs/companion.md "Hot standby"). When given,
   * `host`/`port` are ignored; the adapter uses the first that answers and moves to the next on a dead link.
   */
  hosts?: CompanionHost[];
  device: CompanionDevice;
  /** PING period; Companion drops a client after 5 s without inbound data. */
  heartbeatInterval: number;
  /** No line from Companion for this long (ms) = dead link. */
  deadAfter: number;
  /** Registration (BEGIN to `ADD-DEVICE OK`) must finish within this; also the ADD-DEVICE reply wait. */
  connectionTimeout: number;
  replyTimeout: number;
  reconnectDelay: number;
  /** Hot standby: wait before the first try of each other host after a loss (later rounds back off). */
  failoverDelay?: number;
  maxReconnectDelay: number;
  reconnectJitter: number;
  /** 0 = retry forever. */
  maxReconnectAttempts: number;
  /** Longest wait for the key refresh after registration before stale flags are cleared anyway. */
  refreshTimeout: number;
  /** Absolute locations `page/row/column` subscribed on every session that offers subscriptions. */
  locations?: string[];
  random?: () => number;
}

/**
 * What the session asks of the code that owns its links and timers (io/companion/adapter.ts). Link ids are
 * the session's own: an event for a link it has let go is ignored.
 */
export interface SessionLinks {
  /** Open link `link` to `host` (Satellite API); answer with `opened`, `openFailed`, `line` and `closed`. */
  open(link: number, host: CompanionHost): void;
  /** Send one `\n`-terminated line on an open link. */
  send(link: number, line: string): void;
  /** Close a link; its `closed` event is then ignored. */
  close(link: number, reason: string): void;
  /** Call `tick(atMs)` at this monotonic time (the Clock's `monotonicMs`); `undefined`: no wake needed. */
  wake(atMs: number | undefined): void;
}

/**
 * Delay before reconnect attempt `n` (1-based): `reconnectDelay × 2^(n-1)` capped at `maxReconnectDelay`,
 * plus uniform jitter in [0, reconnectJitter) so many bridges do not hammer a restarting Companion together.
 */
export function backoffDelay(
  attempt: number,
  o: Pick<CompanionSessionOptions, 'reconnectDelay' | 'maxReconnectDelay' | 'reconnectJitter'>,
  random: () => number = Math.random,
): number {
  const base = Math.min(o.maxReconnectDelay, o.reconnectDelay * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.round(base + random() * o.reconnectJitter);
}
