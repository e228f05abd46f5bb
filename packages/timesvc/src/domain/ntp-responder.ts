import {
  LEAP,
  MODE,
  NTP_HEADER_LENGTH,
  PHI,
  TRAILER,
  asciiRefId,
  scanTrailer,
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
  const out = Buffer.allocUnsafe(NTP_HEADER_LENGTH);
  const code = respondInto(msg, 0, msg.length, address, nowMs, state, policy, out, 0);
  switch (code) {
    case OUTCOME.REPLY:
      writeU32(out, 32, rx.seconds);
      writeU32(out, 36, rx.fraction);
      return { kind: 'reply', packet: out };
    case OUTCOME.KOD_RATE:
      return { kind: 'kod', code: 'RATE', packet: out };
    case OUTCOME.KOD_DENY:
      return { kind: 'kod', code: 'DENY', packet: out };
    default:
      return { kind: 'drop', reason: DROP_REASONS[code - OUTCOME.DROP_SHORT] ?? 'malformed' };
  }
}

/** respondInto's outcome codes; a drop's reason is DROP_REASONS[code - OUTCOME.DROP_SHORT]. */
export const OUTCOME = {
  REPLY: 0,
  KOD_RATE: 1,
  KOD_DENY: 2,
  DROP_SHORT: 3,
  DROP_NOT_CLIENT: 4,
  DROP_BAD_VERSION: 5,
  DROP_MALFORMED: 6,
  DROP_AUTHENTICATED: 7,
  DROP_RATE_LIMITED: 8,
} as const;

export const DROP_REASONS: readonly DropReason[] = [
  'short',
  'not_client',
  'bad_version',
  'malformed',
  'authenticated',
  'rate_limited',
];

/**
 * The allocation-free form of `respond` for the batched socket path: decides about the request at
 * `msg[offset, offset + length)` and, for a reply or a kiss, writes the 48-byte packet into
 * `out[outOffset, outOffset + 48)`. A reply has every field set except the receive timestamp (bytes
 * 32–39) and the transmit timestamp (40–47, zero), which the caller writes; a kiss is complete. Returns an
 * OUTCOME code. `address` is read only when `policy` has an access list, or a rate limiter and no
 * `addressRecord`; with `addressRecord` (the batched socket's raw source address at `recordOffset`) the
 * rate limiter keys the client from its bytes (RateLimiter.checkBytes).
 */
export function respondInto(
  msg: Uint8Array,
  offset: number,
  length: number,
  address: string,
  nowMs: number,
  state: ServerSystemState,
  policy: ResponderPolicy,
  out: Uint8Array,
  outOffset: number,
  addressRecord?: Uint8Array,
  recordOffset = 0,
): number {
  if (length < NTP_HEADER_LENGTH) return OUTCOME.DROP_SHORT;
  const b0 = msg[offset] ?? 0;
  const version = (b0 >>> 3) & 0x07;
  // Only client requests are answered: modes 6/7 are amplification vectors, symmetric and broadcast
  // modes are not served (README "NTP server").
  if ((b0 & 0x07) !== MODE.CLIENT) return OUTCOME.DROP_NOT_CLIENT;
  if (version < 1 || version > 4) return OUTCOME.DROP_BAD_VERSION;
  if (length > NTP_HEADER_LENGTH) {
    // Extension fields are allowed (and ignored: RFC 7822 §3, unknown fields are skipped); a legacy MAC
    // asks for symmetric-key authentication, which we do not offer, so it is dropped rather than answered
    // with an unauthenticated reply the client would discard anyway.
    const trailer = scanTrailer(msg, offset, length);
    if (trailer === TRAILER.MAC) return OUTCOME.DROP_AUTHENTICATED;
    if (trailer === TRAILER.MALFORMED) return OUTCOME.DROP_MALFORMED;
  }
  const denied = policy.access !== undefined && !policy.access.allows(address);
  if (policy.rateLimiter !== undefined) {
    const decision =
      addressRecord !== undefined
        ? policy.rateLimiter.checkBytes(addressRecord, recordOffset, nowMs, denied)
        : policy.rateLimiter.check(address, nowMs, denied);
    if (decision === 'drop') return OUTCOME.DROP_RATE_LIMITED;
    if (decision === 'kod') {
      kissInto(msg, offset, version, RATE, out, outOffset);
      return OUTCOME.KOD_RATE;
    }
  }
  if (denied) {
    kissInto(msg, offset, version, DENY, out, outOffset);
    return OUTCOME.KOD_DENY;
  }
  const o = outOffset;
  out[o] = ((state.leap & 3) << 6) | (version << 3) | MODE.SERVER;
  out[o + 1] = state.stratum;
  out[o + 2] = msg[offset + 2] ?? 0; // poll echoed, as chrony and ntpd-rs do
  out[o + 3] = state.precision & 0xff;
  writeU32(out, o + 4, secondsToShort(state.rootDelayS));
  writeU32(out, o + 8, secondsToShort(rootDispersionAt(state, nowMs)));
  writeU32(out, o + 12, state.referenceId);
  writeU32(out, o + 16, state.referenceTimestamp.seconds);
  writeU32(out, o + 20, state.referenceTimestamp.fraction);
  // Origin = the client's transmit timestamp, copied as bytes: clients use it as a nonce (RFC 5905 §8, the origin check).
  for (let i = 0; i < 8; i++) out[o + 24 + i] = msg[offset + 40 + i] ?? 0;
  for (let i = 32; i < 48; i++) out[o + i] = 0;
  return OUTCOME.REPLY;
}

function writeU32(buf: Uint8Array, at: number, v: number): void {
  buf[at] = v >>> 24;
  buf[at + 1] = v >>> 16;
  buf[at + 2] = v >>> 8;
  buf[at + 3] = v;
}

/** RFC 5905 §7.4 kiss: mode 4, LI 3, stratum 0, refid = code, origin = client transmit, rest zero. */
function kissInto(
  msg: Uint8Array,
  offset: number,
  version: number,
  code: number,
  out: Uint8Array,
  o: number,
): void {
  for (let i = 0; i < NTP_HEADER_LENGTH; i++) out[o + i] = 0;
  out[o] = (LEAP.UNSYNCHRONISED << 6) | (version << 3) | MODE.SERVER;
  out[o + 2] = msg[offset + 2] ?? 0;
  writeU32(out, o + 12, code);
  for (let i = 0; i < 8; i++) out[o + 24 + i] = msg[offset + 40 + i] ?? 0;
}

/**
 * The root dispersion a reply sent at monotonic `nowMs` carries: the fields' value at `updatedAtMs` grown at
 * `dispersionRateS` since (the fields are replaced only when more than time changed them, advertiser.ts).
 */
export function rootDispersionAt(state: ServerSystemState, nowMs: number): number {
  return (
    state.rootDispersionS + ((state.dispersionRateS ?? PHI) * Math.max(0, nowMs - state.updatedAtMs)) / 1000
  );
}
