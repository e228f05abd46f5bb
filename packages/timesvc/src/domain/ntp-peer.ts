import {
  LEAP,
  MAXDISP,
  MAXPOLL,
  MAXSTRAT,
  MODE,
  NTP_HEADER_LENGTH,
  PHI,
  decodeNtpPacket,
  isZeroTimestamp,
  kissCode,
  shortToSeconds,
  timestampDiffSeconds,
  timestampsEqual,
  writeHeader,
  type NtpPacket,
  type NtpTimestamp,
} from '../protocol/ntp-packet.ts';
import { ClockFilter, type FilterOutput } from './clock-filter.ts';

/**
 * One upstream NTP server as seen by our client side (RFC 5905 §8–§10, §13): request building, reply
 * validation, offset/delay/dispersion per sample, the clock filter, the reach register, poll adaptation and
 * Kiss-o'-Death handling. No sockets: the io runner sends what `request()` returns and feeds replies to
 * `receive()`, with timestamps of the raw (uncorrected) local clock and monotonic milliseconds.
 */

export interface PeerConfig {
  /** `host:port` as configured (also the peer's name `NTP:<host>:<port>`). */
  address: string;
  prefer: boolean;
  iburst: boolean;
  /** log2 seconds. */
  minpoll: number;
  /** log2 seconds. */
  maxpoll: number;
}

/**
 * Interval between iburst packets: 1 s. chrony's is "2 seconds or less" (chrony.conf(5), iburst), ntpd's 2 s;
 * with four samples needed before selection, 1 s keeps acquisition within chrony's time (README
 * "Upstream peers").
 */
export const IBURST_INTERVAL_S = 1;
/** Packets in an initial burst (chrony sends 4, ntpd 8). */
export const IBURST_COUNT = 4;
/** Consecutive good samples after which the poll interval doubles. */
export const POLL_UP_AFTER = 4;

export type PeerReceiveResult =
  | {
      kind: 'sample';
      output: FilterOutput;
      /** This exchange's offset and delay (RFC 5905 §8), at monotonic ms atMs (mid-exchange). */
      offsetS: number;
      /** This exchange's own dispersion (both precisions + PHI × round trip, RFC 5905 §8). */
      sampleDispersionS: number;
      delayS: number;
      atMs: number;
      stratum: number;
      packet: NtpPacket;
    }
  | { kind: 'kod'; code: string }
  | { kind: 'unsynchronised'; packet: NtpPacket }
  | { kind: 'ignored'; reason: 'malformed' | 'not_server' | 'bogus' | 'duplicate' | 'bad_header' };

export interface PeerStatus {
  address: string;
  prefer: boolean;
  reach: number;
  reachable: boolean;
  /** Usable for selection: reachable, synchronised, not denied, with at least one sample. */
  usable: boolean;
  denied: string | undefined;
  poll: number;
  stratum: number;
  leap: number;
  referenceId: number;
  rootDelayS: number;
  rootDispersionS: number;
  /** Samples in the clock filter. */
  samples: number;
  offsetS: number | undefined;
  delayS: number | undefined;
  dispersionS: number;
  jitterS: number | undefined;
  /** Monotonic ms of the clock filter's chosen sample (the one selection uses). */
  lastSampleMs: number | undefined;
  /** Monotonic ms when the last good reply was received: chronyc's LastRx (`chronyc(1)` `sources`). */
  lastRxMs: number | undefined;
  nextPollMs: number;
  pollCount: number;
  errorCount: number;
}

/**
 * What `chronyc ntpdata` shows of a source (doc/chronyc.adoc "ntpdata"): the last valid reply's header,
 * the last measurement, and the packet totals. Valid: passed the origin and header checks (chrony's
 * first two test groups); good: its sample went to the clock filter.
 */
export interface PeerNtpData {
  version: number | undefined;
  mode: number | undefined;
  precision: number | undefined;
  /** Reference timestamp of the last valid reply, undefined if zero. */
  referenceTimestamp: NtpTimestamp | undefined;
  /** T3 − T2 of the last good reply: the server's processing and waiting time, seconds. */
  responseTimeS: number | undefined;
  /** The last good measurement (not the filter's choice), seconds. */
  lastOffsetS: number | undefined;
  lastDelayS: number | undefined;
  lastDispersionS: number | undefined;
  totalTx: number;
  totalRx: number;
  totalValidRx: number;
  totalGoodRx: number;
}

interface Outstanding {
  transmit: NtpTimestamp;
  t1: NtpTimestamp;
  sentMs: number;
}

export class NtpPeer {
  readonly config: PeerConfig;
  readonly #filter: ClockFilter;
  readonly #precisionS: number;
  #poll: number;
  #minpoll: number;
  #reach = 0;
  #burstLeft: number;
  #nextPollMs: number;
  #outstanding: Outstanding | undefined;
  #goodStreak = 0;
  #denied: string | undefined;
  /** The last reply was a RATE kiss (no time in it); cleared by the next valid reply. */
  #rateKissed = false;
  #last: FilterOutput | undefined;
  #lastRxMs: number | undefined;
  #lastPacket: NtpPacket | undefined;
  #lastSynchronised = false;
  #pollCount = 0;
  #errorCount = 0;
  readonly #totals = { rx: 0, validRx: 0, goodRx: 0 };
  #lastMeasurement: { offsetS: number; delayS: number; dispersionS: number; responseS: number } | undefined;
  /**
   * Keep the poll interval at minpoll (set by the io layer while the clock is not LOCKED): acquisition
   * needs samples, and a longer poll only delays it (chrony likewise stays at minpoll until synchronised).
   */
  holdPoll = false;
  /**
   * Do not raise the poll now (set by the io layer while the clock's estimate is not stable enough for a
   * longer interval): good samples still count, the raise waits (docs/clock-discipline.md "Acquisition").
   */
  freezePoll = false;

  constructor(config: PeerConfig, nowMs: number, precisionLog2 = -20) {
    if (config.minpoll > config.maxpoll) throw new RangeError('minpoll must not exceed maxpoll');
    this.config = config;
    this.#precisionS = 2 ** precisionLog2;
    this.#filter = new ClockFilter(this.#precisionS);
    this.#poll = config.minpoll;
    this.#minpoll = config.minpoll;
    this.#burstLeft = config.iburst ? IBURST_COUNT : 0;
    this.#nextPollMs = nowMs;
  }

  get nextPollMs(): number {
    return this.#nextPollMs;
  }

  get poll(): number {
    return this.#poll;
  }

  get denied(): string | undefined {
    return this.#denied;
  }

  /**
   * Build the next request if it is due. `t1` is the raw local clock now; it goes into the transmit field
   * and is what the reply's origin must match bit for bit (RFC 5905 §8, the "bogus" test).
   */
  request(nowMs: number, t1: NtpTimestamp): Buffer | undefined {
    if (this.#denied !== undefined || nowMs < this.#nextPollMs) return undefined;
    if (this.#outstanding !== undefined) {
      // The previous request got no valid answer: a miss slows nothing down but may trigger a burst.
      this.#errorCount++;
      this.#goodStreak = 0;
      if (this.#poll > this.#minpoll) this.#poll--;
    }
    if (this.holdPoll) this.#poll = this.#minpoll;
    else if (this.#goodStreak >= POLL_UP_AFTER && this.#burstLeft === 0 && !this.freezePoll) {
      this.#goodStreak = 0;
      if (this.#poll < this.config.maxpoll) this.#poll++;
    }
    this.#reach = (this.#reach << 1) & 0xff;
    if (this.#reach === 0 && this.config.iburst && this.#burstLeft === 0 && this.#pollCount > 0) {
      this.#burstLeft = IBURST_COUNT; // unreachable again: re-burst as ntpd does for iburst peers
    }
    const buf = Buffer.alloc(NTP_HEADER_LENGTH);
    writeHeader(buf, {
      leap: LEAP.NONE,
      version: 4,
      mode: MODE.CLIENT,
      stratum: 0,
      poll: Math.max(-128, Math.min(127, this.#poll)),
      precision: Math.round(Math.log2(this.#precisionS)),
      rootDelay: 0,
      rootDispersion: 0,
      referenceId: 0,
      referenceTimestamp: { seconds: 0, fraction: 0 },
      originTimestamp: { seconds: 0, fraction: 0 },
      receiveTimestamp: { seconds: 0, fraction: 0 },
      transmitTimestamp: t1,
      extensions: [],
    });
    this.#outstanding = { transmit: t1, t1, sentMs: nowMs };
    this.#pollCount++;
    let intervalS = 2 ** this.#poll;
    if (this.#burstLeft > 0) {
      this.#burstLeft--;
      intervalS = Math.min(intervalS, IBURST_INTERVAL_S);
    }
    this.#nextPollMs = nowMs + intervalS * 1000;
    return buf;
  }

  /**
   * The outstanding request left at `sentMs` (monotonic) with raw time `t1`: the kernel's transmit
   * timestamp, later and more exact than the reading written into the request before send(). The reply
   * is still matched against the transmit field as sent; offset and delay use this T1 (RFC 5905 §8).
   */
  transmitted(t1: NtpTimestamp, sentMs: number): void {
    const o = this.#outstanding;
    if (o === undefined) return;
    this.#outstanding = { ...o, t1, sentMs };
  }

  /** Feed one datagram from the peer; `t4` is the raw local clock taken on arrival. */
  receive(msg: Uint8Array, t4: NtpTimestamp, nowMs: number): PeerReceiveResult {
    this.#totals.rx++;
    const decoded = decodeNtpPacket(msg);
    if (!decoded.ok) return { kind: 'ignored', reason: 'malformed' };
    const packet: NtpPacket = decoded.value;
    if (packet.mode !== MODE.SERVER || packet.version < 1 || packet.version > 4) {
      return { kind: 'ignored', reason: 'not_server' };
    }
    const pending = this.#outstanding;
    if (pending === undefined) return { kind: 'ignored', reason: 'duplicate' };
    if (!timestampsEqual(packet.originTimestamp, pending.transmit)) {
      return { kind: 'ignored', reason: 'bogus' };
    }
    this.#outstanding = undefined;
    this.#totals.validRx++;
    const kiss = kissCode(packet);
    if (kiss !== undefined) {
      this.#handleKiss(kiss, packet, pending.sentMs);
      return { kind: 'kod', code: kiss };
    }
    this.#reach |= 1;
    this.#rateKissed = false;
    this.#lastPacket = packet;
    if (packet.leap === LEAP.UNSYNCHRONISED || packet.stratum >= MAXSTRAT) {
      this.#lastSynchronised = false;
      return { kind: 'unsynchronised', packet };
    }
    const rootDelay = shortToSeconds(packet.rootDelay);
    const rootDisp = shortToSeconds(packet.rootDispersion);
    if (
      rootDelay / 2 + rootDisp >= MAXDISP ||
      isZeroTimestamp(packet.receiveTimestamp) ||
      isZeroTimestamp(packet.transmitTimestamp) ||
      timestampDiffSeconds(packet.transmitTimestamp, packet.receiveTimestamp) < 0
    ) {
      this.#errorCount++;
      return { kind: 'ignored', reason: 'bad_header' };
    }
    this.#lastSynchronised = true;
    // RFC 5905 §8: θ = ((T2 − T1) + (T3 − T4)) / 2, δ = (T4 − T1) − (T3 − T2).
    const t21 = timestampDiffSeconds(packet.receiveTimestamp, pending.t1);
    const t34 = timestampDiffSeconds(packet.transmitTimestamp, t4);
    const offsetS = (t21 + t34) / 2;
    const delayS = Math.max(this.#precisionS, t21 - t34);
    const roundTripS = Math.max(0, timestampDiffSeconds(t4, pending.t1));
    const dispersionS = 2 ** packet.precision + this.#precisionS + PHI * roundTripS;
    // The offset applies to the middle of the exchange.
    const atMs = (pending.sentMs + nowMs) / 2;
    const output = this.#filter.add({ offsetS, delayS, dispersionS, atMs });
    this.#last = output;
    this.#lastRxMs = nowMs;
    this.#totals.goodRx++;
    this.#lastMeasurement = {
      offsetS,
      delayS,
      dispersionS,
      responseS: timestampDiffSeconds(packet.transmitTimestamp, packet.receiveTimestamp),
    };
    // While the poll is held, good samples do not count towards raising it: that starts once LOCKED.
    // The raise itself happens with the next request (the one already scheduled keeps its time).
    this.#goodStreak = this.holdPoll ? 0 : this.#goodStreak + 1;
    return {
      kind: 'sample',
      output,
      offsetS,
      delayS,
      sampleDispersionS: dispersionS,
      atMs,
      stratum: packet.stratum,
      packet,
    };
  }

  /** The clock held the last sample back as a possible spike: it does not count towards a longer poll. */
  sampleHeldBack(): void {
    this.#goodStreak = 0;
  }

  /** RFC 5905 §7.4: DENY/RSTR demobilise the association; RATE asks us to poll less often. */
  #handleKiss(code: string, packet: NtpPacket, sentMs: number): void {
    if (code === 'DENY' || code === 'RSTR') {
      this.#denied = code;
      this.#burstLeft = 0;
      return;
    }
    if (code === 'RATE') {
      this.#rateKissed = true;
      this.#burstLeft = 0;
      const next = Math.min(MAXPOLL, Math.max(this.#poll + 1, packet.poll, this.config.minpoll));
      // Stay at least this slow from now on; the server told us our rate was too high.
      this.#minpoll = Math.min(Math.max(next, this.#minpoll), MAXPOLL);
      this.#poll = Math.max(this.#poll, this.#minpoll);
      this.#nextPollMs = Math.max(this.#nextPollMs, sentMs + 2 ** this.#poll * 1000);
    }
  }

  ntpData(): PeerNtpData {
    const p = this.#lastPacket;
    const ref = p?.referenceTimestamp;
    const m = this.#lastMeasurement;
    return {
      version: p?.version,
      mode: p?.mode,
      precision: p?.precision,
      referenceTimestamp: ref && !isZeroTimestamp(ref) ? ref : undefined,
      responseTimeS: m?.responseS,
      lastOffsetS: m?.offsetS,
      lastDelayS: m?.delayS,
      lastDispersionS: m?.dispersionS,
      totalTx: this.#pollCount,
      totalRx: this.#totals.rx,
      totalValidRx: this.#totals.validRx,
      totalGoodRx: this.#totals.goodRx,
    };
  }

  status(): PeerStatus {
    const p = this.#lastPacket;
    // A peer answering with kisses (DENY/RSTR, RATE) gives no time: not reachable (RFC 5905 §7.4).
    const reachable = this.#reach !== 0 && this.#denied === undefined && !this.#rateKissed;
    return {
      address: this.config.address,
      prefer: this.config.prefer,
      reach: this.#reach,
      reachable,
      usable: reachable && this.#denied === undefined && this.#lastSynchronised && this.#last !== undefined,
      denied: this.#denied,
      poll: this.#poll,
      stratum: p?.stratum ?? MAXSTRAT,
      leap: p?.leap ?? LEAP.UNSYNCHRONISED,
      referenceId: p?.referenceId ?? 0,
      rootDelayS: p ? shortToSeconds(p.rootDelay) : 0,
      rootDispersionS: p ? shortToSeconds(p.rootDispersion) : 0,
      samples: this.#filter.size,
      offsetS: this.#last?.offsetS,
      delayS: this.#last?.delayS,
      dispersionS: this.#last?.dispersionS ?? MAXDISP,
      jitterS: this.#last?.jitterS,
      lastSampleMs: this.#last?.atMs,
      lastRxMs: this.#lastRxMs,
      nextPollMs: this.#nextPollMs,
      pollCount: this.#pollCount,
      errorCount: this.#errorCount,
    };
  }
}
