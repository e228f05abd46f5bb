import type { Socket } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { socketFd } from './kernel-rx-timestamp.ts';
import type { ServedClock } from './served-clock.ts';
import { optionalAddon } from './native-addon.ts';

/**
 * Kernel transmit timestamps (native/tx-timestamp.c) for the upstream client's T1 (RFC 5905 §8). T1 read
 * in JavaScript before send() is early by the datagram's way through Node, libuv and the socket layer:
 * 63 µs median, 130 µs at the 95th percentile on the loaded 2-core test machine (docs/clock-discipline.md
 * "Where the error came from"), and the offset is off by half of that. The kernel's stamp is taken when
 * the device takes the datagram, as chronyd's client requests are stamped. Where the addon is missing the
 * JavaScript reading stays.
 */
interface TxAddon {
  enableTxTimestamps(fd: number): boolean;
  readTxTimestampMs(fd: number): number | undefined;
}

const addon = optionalAddon<TxAddon>('tx_timestamp');

/** Whether the addon loaded. */
export function kernelTxTimestampsAvailable(): boolean {
  return addon() !== undefined;
}

/**
 * Slack for the kernel-realtime mapping, ms: a stamp may read this much outside [read before send, now]
 * through the mapping's own uncertainty (served-clock.ts measures it to a few µs) and still be taken.
 */
const MAPPING_SLACK_MS = 0.05;

export interface TransmitTime {
  kernel: boolean;
  /** Call right before send(): drops stale stamps still queued (an earlier datagram's). */
  beforeSend: () => void;
  /**
   * Call right after send() returned and again (with `late`) when the reply arrives if the first call gave
   * undefined: the monotonic ms at which the kernel sent the datagram, or undefined when no usable stamp
   * is queued. A stamp is used only inside [sentFromMs − slack, now + slack] (it cannot be earlier than
   * the reading taken before send(), nor later than now); one outside is counted in `rejected`.
   */
  sent: (sentFromMs: number) => number | undefined;
  /** Stamps read but outside their window (a stale realtime mapping, e.g. right after a host clock step). */
  rejected: number;
}

/** Transmit timestamps for a connected or bound dgram socket; undefined where the kernel cannot give them. */
export function transmitTime(socket: Socket, clock: ServedClock): TransmitTime | undefined {
  const a = addon();
  const fd = a ? socketFd(socket) : undefined;
  if (!a || fd === undefined || !a.enableTxTimestamps(fd)) return undefined;
  const t: TransmitTime = {
    kernel: true,
    rejected: 0,
    beforeSend: () => {
      a.readTxTimestampMs(fd);
    },
    sent: (sentFromMs) => {
      const stamp = a.readTxTimestampMs(fd);
      if (stamp === undefined) return undefined;
      const now = performance.now();
      const atMs = clock.kernelStampMonoMs(stamp);
      if (atMs < sentFromMs - MAPPING_SLACK_MS || atMs > now + MAPPING_SLACK_MS) {
        t.rejected++;
        clock.kernelStampsReplaced++;
        return undefined;
      }
      return Math.min(now, Math.max(sentFromMs, atMs));
    },
  };
  return t;
}
