import { DEFAULT_RELAY_LIMITS } from './relay-allocations.ts';

/**
 * The byte-rate cap a relayed stream's allocation is asked for (docs/relay.md "Bounds": "The cap per
 * session"): the stream's bitrate with headroom, bounded by the relay's maximum; the relay's own default
 * when the bitrate is unknown.
 *
 * Headroom ×1.5 over the media bitrate: libsrt's default recovery overhead is 25 % of the input rate
 * (`SRTO_OHEADBW`, `iOverheadBW(25)` in srtcore/socketconfig.h), what SRT itself budgets for
 * retransmissions; the SRT, UDP and IP headers add about 3 % at 1316-byte payloads (16 + 8 + 20 bytes);
 * the rest covers a variable-bitrate encoder's peaks above its nominal rate and a measured rate that is an
 * average over the stats interval. The token bucket's burst (250 ms of the rate) takes the short bursts.
 * The cap is per direction, so the receiver's ACKs and NAKs pass as before.
 */
export const RELAY_CAP_HEADROOM = 1.5;

/** The lowest cap asked for (100 kbit/s, the lowest `PUNCH_RELAY_BYTES_PER_SECOND`): a bogus tiny rate cannot strangle a link. */
export const RELAY_CAP_MIN_BYTES_PER_SECOND = 12_500;

export interface RelayCapInput {
  /** Bits/s the stream declared (a peer's `meta.bitrate` in `register`). */
  declaredBps?: number | undefined;
  /** Bits/s measured on the link being moved (the peers' latest fresh health reports). */
  measuredBps?: number | undefined;
  /** The relay's largest byte rate per allocation. */
  maxBytesPerSecond?: number;
}

export interface RelayCap {
  /** Undefined: ask for nothing, the relay applies its default (`PUNCH_RELAY_BYTES_PER_SECOND`). */
  bytesPerSecond: number | undefined;
  source: 'declared' | 'measured' | 'default';
}

const usable = (bps: number | undefined): bps is number =>
  bps !== undefined && Number.isFinite(bps) && bps > 0;

/** Declared first (the operator's word), then measured, else the relay's default. */
export function relayByteCap(input: RelayCapInput): RelayCap {
  const max = input.maxBytesPerSecond ?? DEFAULT_RELAY_LIMITS.maxBytesPerSecond;
  const pick = usable(input.declaredBps)
    ? { bps: input.declaredBps, source: 'declared' as const }
    : usable(input.measuredBps)
      ? { bps: input.measuredBps, source: 'measured' as const }
      : undefined;
  if (!pick) return { bytesPerSecond: undefined, source: 'default' };
  const bytes = Math.ceil((pick.bps * RELAY_CAP_HEADROOM) / 8);
  return {
    bytesPerSecond: Math.min(max, Math.max(RELAY_CAP_MIN_BYTES_PER_SECOND, bytes)),
    source: pick.source,
  };
}

/** A peer's declared bitrate: `meta.bitrate` in bits/s, a positive finite number, else undefined. */
export function declaredBitrate(meta: Record<string, unknown> | undefined): number | undefined {
  const v = meta?.['bitrate'];
  return typeof v === 'number' && usable(v) ? v : undefined;
}
