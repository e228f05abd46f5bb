import type { Socket } from 'node:dgram';
import type { ServedClock } from './served-clock.ts';
import { optionalAddon } from './native-addon.ts';

/**
 * Kernel receive timestamps (native/rx-timestamp.c, built by `node-gyp` at `npm ci`). Where the addon is
 * missing (not Linux, no compiler at install), receive timestamps fall back to the 'message' handler's own
 * reading minus `rx_timestamp_correction_us`; `/api/health` tells which is in use.
 */
interface RxAddon {
  lastRxTimestampMs(fd: number): number | undefined;
}

const addon = optionalAddon<RxAddon>('rx_timestamp');

/** Whether the addon loaded. */
export function kernelRxTimestampsAvailable(): boolean {
  return addon() !== undefined;
}

/**
 * The file descriptor of a bound dgram socket. Node keeps the handle under an internal symbol (the public
 * `_handle` getter is deprecated, DEP0112); if that ever changes this returns undefined and the caller falls
 * back to userspace timestamps.
 */
export function socketFd(socket: Socket): number | undefined {
  const sym = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'state symbol');
  if (!sym) return undefined;
  const state = (socket as unknown as Record<symbol, { handle?: { fd?: unknown } } | undefined>)[sym];
  const fd = state?.handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/** Disagreement between the kernel-realtime mapping and Date.now() beyond which the mapping is stale. */
const STALE_MAPPING_MS = 2;

/** Longest plausible wait between arrival and the handler; beyond it a timestamp is stale, not a delay. */
const MAX_DELAY_MS = 1000;

/**
 * For a bound socket, a function that, called inside its 'message' handler, returns how long ago (ms) the
 * kernel received the datagram being handled, given the current Unix time in ms; undefined when unknown.
 */
export function kernelRxDelay(socket: Socket): ((nowUnixMs: number) => number | undefined) | undefined {
  const a = addon();
  const fd = a ? socketFd(socket) : undefined;
  if (!a || fd === undefined) return undefined;
  a.lastRxTimestampMs(fd); // enables timestamping on this socket (socket(7) SIOCGSTAMP)
  return (nowUnixMs) => {
    const stamp = a.lastRxTimestampMs(fd);
    if (stamp === undefined) return undefined;
    const delay = nowUnixMs - stamp;
    return delay >= 0 && delay < MAX_DELAY_MS ? delay : undefined;
  };
}

/** How a socket's receive timestamps are taken, and the function that takes them. */
export interface ArrivalTime {
  kernel: boolean;
  /**
   * Called first thing in the socket's 'message' handler with performance.now(): the monotonic ms at which
   * the datagram being handled arrived (RFC 5905 §8 T2/T4). The kernel's receive timestamp carried onto the
   * served clock's time base where available, else the handler's own reading minus `correctionMs`.
   */
  at: (perf: number) => number;
}

/**
 * The window a mapped kernel receive timestamp must lie in: [read − RX_WINDOW_MS, read], ms. Half a second:
 * a timestamp mapped through a realtime offset that a leap second (or any step of 0.5 s or more) has made
 * stale always falls outside it, whichever way the step went, while a datagram read that late after its
 * arrival is late for reasons no timestamp repairs (docs/leap-seconds.md "The host's own leap").
 */
export const RX_WINDOW_MS = 500;
/** Slack for the mapping's own uncertainty (the offset is measured to a few µs; served-clock.ts), ms. */
export const RX_MAPPING_SLACK_MS = 0.05;

/** The one receive-timestamp path shared by the NTP server and the peer clients. */
export function arrivalTime(
  socket: Socket,
  clock: ServedClock,
  options: { kernel: boolean; correctionMs: number },
): ArrivalTime {
  const correctionMs = options.correctionMs;
  const a = options.kernel ? addon() : undefined;
  const fd = a ? socketFd(socket) : undefined;
  if (!a || fd === undefined) return { kernel: false, at: (perf) => perf - correctionMs };
  a.lastRxTimestampMs(fd); // enables timestamping on this socket (socket(7) SIOCGSTAMP)
  return {
    kernel: true,
    at: (perf) => {
      const stamp = a.lastRxTimestampMs(fd);
      if (stamp === undefined) return perf - correctionMs;
      // Every mapped timestamp must lie between the read minus the window and the read itself, and the
      // realtime clock read directly (whole ms, truncated) must agree with the mapping. Either failing
      // means the host clock stepped (a leap second too) since the offset was measured (served-clock.ts
      // notices within a second): the kernel's time carried by the old offset would be off by the step,
      // so the handler's own reading is used, and counted.
      const atMs = kernelMappingFresh(clock) ? checkedKernelStamp(clock, stamp, perf) : undefined;
      if (atMs === undefined) {
        clock.kernelStampsReplaced++;
        return perf - correctionMs;
      }
      return atMs;
    },
  };
}

/**
 * Whether the kernel-realtime mapping still agrees with the realtime clock read directly (whole ms,
 * truncated): false once the host clock stepped (a leap second too) and served-clock.ts has not yet noticed.
 * Both clocks are read here, next to each other: a handler that ran late (a loaded machine) must not look
 * like a stale mapping. Checked once per read, or once per batch on the batched path.
 */
export function kernelMappingFresh(clock: ServedClock): boolean {
  const wallMs = clock.kernelRealtimeNowMs();
  const skewMs = clock.kernelRealtimeMs(performance.now()) - wallMs;
  return skewMs >= -STALE_MAPPING_MS && skewMs <= 1 + STALE_MAPPING_MS;
}

/**
 * A kernel receive timestamp (CLOCK_REALTIME, ms) on the monotonic scale, or undefined when it does not lie
 * in [read − RX_WINDOW_MS, read]: the one rule for the dgram path and the batched path.
 */
export function checkedKernelStamp(clock: ServedClock, stampMs: number, perf: number): number | undefined {
  const atMs = clock.kernelStampMonoMs(stampMs);
  if (atMs > perf + RX_MAPPING_SLACK_MS || atMs < perf - RX_WINDOW_MS) return undefined;
  return Math.min(perf, atMs);
}
