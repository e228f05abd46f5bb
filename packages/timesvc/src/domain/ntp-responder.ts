import {
  LEAP,
  MODE,
  NTP_HEADER_LENGTH,
  PHI,
  asciiRefId,
  decodeNtpPacket,
  secondsToShort,
  type NtpTimestamp,
} from '../protocol/ntp-packet.ts';
import type { AccessList } from './access-list.ts';
import type { RateLimiter } from './rate-limiter.ts';

/**
 * The NTP server's decision for one datagram (RFC 5905 §8 and §9.2 "fast_xmit"; kiss codes §7.4).
 * Pure: the io layer passes the receive timestamp it took first thing on arrival, and writes the transmit
 * timestamp (bytes 40–47) itself immediately before send(), so it is as late as possible.
 */

/** What the clock manager advertises; changed only when the clock state changes, read per request. */
export interface ServerSystemState {
  /** 0–3; 3 while unsynchronised. */
  leap: number;
  /** Wire stratum: 0 while unsynchronised, 1–15 otherwise. */
  stratum: number;
  /** log2 seconds. */
  precision: number;
  referenceId: number;
  referenceTimestamp: NtpTimestamp;
  rootDelayS: number;
  /** Root dispersion at `updatedAtMs`; it grows by `dispersionRateS` per second after that. */
  rootDispersionS: number;
  /**
   * Growth of the root dispersion, seconds per second: PHI (RFC 5905 §11.3, 15 ppm) plus the error of the
   * frequency estimate. PHI when absent.
   */
  dispersionRateS?: number;
  /** Monotonic ms of the last clock update. */
  updatedAtMs: number;
}

export const UNSYNCHRONISED_STATE: ServerSystemState = Object.freeze({
  leap: LEAP.UNSYNCHRONISED,
  stratum: 0,
  precision: -20,
  referenceId: asciiRefId('INIT'),
  referenceTimestamp: Object.freeze({ seconds: 0, fraction: 0 }),
  rootDelayS: 0,
  rootDispersionS: 0,
  updatedAtMs: 0,
});

export type DropReason =
  'short' | 'not_client' | 'bad_version' | 'malformed' | 'authenticated' | 'rate_limited';

export type ResponderOutcome =
  | { kind: 'reply'; packet: Buffer }
  | { kind: 'kod'; code: 'RATE' | 'DENY'; packet: Buffer }
  | { kind: 'drop'; reason: DropReason };

export interface ResponderPolicy {
  access?: AccessList | undefined;
  rateLimiter?: RateLimiter | undefined;
}

const RATE = asciiRefId('RATE');
const DENY = asciiRefId('DENY');

/**
 * Decide about `msg` from `address`. On 'reply' the packet has every field set except the transmit
 * timestamp (bytes 40–47, zero), which the caller fills just before sending.
 */
export function respond(
  msg: Uint8Array,
  address: string,
  rx: NtpTimestamp,
  nowMs: number,
  state: ServerSystemState,
  policy: ResponderPolicy,
): ResponderOutcome {
  if (msg.length < NTP_HEADER_LENGTH) return { kind: 'drop', reason: 'short' };
  const b0 = msg[0] ?? 0;
  const version = (b0 >>> 3) & 0x07;
  // Only client requests are answered: modes 6/7 are amplification vectors, symmetric and broadcast
  // modes are not served (README "NTP server").
  if ((b0 & 0x07) !== MODE.CLIENT) return { kind: 'drop', reason: 'not_client' };
  if (version < 1 || version > 4) return { kind: 'drop', reason: 'bad_version' };
  if (msg.length > NTP_HEADER_LENGTH) {
    // Extension fields are allowed (and ignored: RFC 7822 §3, unknown fields are skipped); a legacy MAC
    // asks for symmetric-key authentication, which we do not offer, so it is dropped rather than answered
    // with an unauthenticated reply the client would discard anyway.
    try {
      if (decodeNtpPacket(msg).mac !== undefined) return { kind: 'drop', reason: 'authenticated' };
    } catch {
      return { kind: 'drop', reason: 'malformed' };
    }
  }
  const denied = policy.access !== undefined && !policy.access.allows(address);
  if (policy.rateLimiter !== undefined) {
    const decision = policy.rateLimiter.check(address, nowMs);
    if (decision === 'drop') return { kind: 'drop', reason: 'rate_limited' };
    if (decision === 'kod') return { kind: 'kod', code: 'RATE', packet: kiss(msg, version, RATE) };
  }
  if (denied) return { kind: 'kod', code: 'DENY', packet: kiss(msg, version, DENY) };

  const out = Buffer.allocUnsafe(NTP_HEADER_LENGTH);
  out[0] = ((state.leap & 3) << 6) | (version << 3) | MODE.SERVER;
  out[1] = state.stratum;
  out[2] = msg[2] ?? 0; // poll echoed, as chrony and ntpd-rs do
  out.writeInt8(state.precision, 3);
  out.writeUInt32BE(secondsToShort(state.rootDelayS), 4);
  const sinceUpdate = Math.max(0, nowMs - state.updatedAtMs) / 1000;
  out.writeUInt32BE(secondsToShort(state.rootDispersionS + (state.dispersionRateS ?? PHI) * sinceUpdate), 8);
  out.writeUInt32BE(state.referenceId >>> 0, 12);
  out.writeUInt32BE(state.referenceTimestamp.seconds >>> 0, 16);
  out.writeUInt32BE(state.referenceTimestamp.fraction >>> 0, 20);
  // Origin = the client's transmit timestamp, copied as bytes: clients use it as a nonce (RFC 5905 §8, the origin check).
  out.set(msg.subarray(40, 48), 24);
  out.writeUInt32BE(rx.seconds >>> 0, 32);
  out.writeUInt32BE(rx.fraction >>> 0, 36);
  out.fill(0, 40, 48);
  return { kind: 'reply', packet: out };
}

/** RFC 5905 §7.4 kiss: mode 4, LI 3, stratum 0, refid = code, origin = client transmit, rest zero. */
function kiss(msg: Uint8Array, version: number, code: number): Buffer {
  const out = Buffer.alloc(NTP_HEADER_LENGTH);
  out[0] = (LEAP.UNSYNCHRONISED << 6) | (version << 3) | MODE.SERVER;
  out[1] = 0;
  out[2] = msg[2] ?? 0;
  out.writeUInt32BE(code >>> 0, 12);
  out.set(msg.subarray(40, 48), 24);
  return out;
}
