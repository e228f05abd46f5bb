import { createSocket, type Socket } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { expectDecoded } from '@broadcast-ops/core/testing';
import { stepTo } from '../../src/domain/correction.ts';
import { arrivalTime, type ArrivalTime } from '../../src/io/kernel-rx-timestamp.ts';
import { transmitTime, type TransmitTime } from '../../src/io/kernel-tx-timestamp.ts';
import { ServedClock } from '../../src/io/served-clock.ts';
import {
  MODE,
  asciiRefId,
  decodeNtpPacket,
  secondsToShort,
  shortToSeconds,
  timestampDiffSeconds,
  type NtpTimestamp,
} from '../../src/protocol/ntp-packet.ts';
import type { ProbeRecord } from './probe-check.ts';

export { checkProbe, type ProbeCheck, type ProbeRecord } from './probe-check.ts';

/**
 * A test upstream NTP server on 127.0.0.1 that serves the host clock plus a controllable offset and
 * frequency: truth(t) = raw(t) + x0 + f·(t − tf), where raw is this process's monotonic-anchored clock
 * (the same base the timesvc under test uses in-process). The offset can move (a reference change), the
 * frequency can change, and the server can go silent (an outage). Receive timestamps are the kernel's.
 *
 * The same truth is what `Probe` measures the server under test against.
 */
export class OffsetUpstream {
  readonly clock = new ServedClock();
  /** One or more server sockets (one per server under test, so each has its own "knowable" window). */
  readonly #sockets: { socket: Socket; arrival: ArrivalTime; firstReplyAfterChangeMs: number | undefined }[] =
    [];
  #x0 = 0;
  #freq = 0;
  #tf = 0;
  silent = false;
  stratum = 1;
  refId = asciiRefId('TEST');
  rootDelayS = 0;
  rootDispersionS = 0.0001;
  /**
   * Simulated path noise, seconds: each reply's T2 and T3 are shifted by the same uniform random amount in
   * [−noiseS, +noiseS] — the offset error an asymmetric path delay of up to 2·noiseS would cause (RFC 5905
   * §8: θ is exact only for a symmetric path), with the measured round trip unchanged.
   */
  noiseS = 0;
  /** Monotonic ms of the last change that a downstream cannot know before it hears from us again. */
  #changedAtMs = Number.NEGATIVE_INFINITY;
  replies = 0;

  constructor(offsetS = 0, freq = 0) {
    this.#x0 = offsetS;
    this.#freq = freq;
    this.#tf = performance.now();
    this.#apply();
  }

  static async start(offsetS = 0, freq = 0): Promise<OffsetUpstream> {
    const u = new OffsetUpstream(offsetS, freq);
    // Keeps the kernel-timestamp mapping of its clock precise (served-clock.ts checkHostClock).
    u.clock.start();
    await u.listen();
    return u;
  }

  get port(): number {
    return this.portOf(0);
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** The UDP port of server socket `i`. */
  portOf(i: number): number {
    return this.#sockets[i]?.socket.address().port ?? 0;
  }

  /** truth − raw at monotonic ms `perf`, seconds. */
  offsetAt(perf = performance.now()): number {
    return this.#x0 + (this.#freq * (perf - this.#tf)) / 1000;
  }

  /** Truth at monotonic `perf` as an NTP timestamp. */
  truth(perf = performance.now()): NtpTimestamp {
    return this.clock.read(true, perf);
  }

  /** Move the reference by `deltaS` now (a step of the upstream's time). */
  move(deltaS: number): void {
    const now = performance.now();
    this.#x0 = this.offsetAt(now) + deltaS;
    this.#tf = now;
    this.#changed(now);
    this.#apply();
  }

  /** Change the frequency (continuous in phase). */
  setFrequency(freq: number): void {
    const now = performance.now();
    this.#x0 = this.offsetAt(now);
    this.#tf = now;
    this.#freq = freq;
    this.#apply();
  }

  /** Stop answering (an outage). */
  pause(): void {
    this.silent = true;
  }

  /** Answer again; a downstream learns what happened meanwhile only from the next reply. */
  resume(): void {
    this.silent = false;
    this.#changed(performance.now());
  }

  /**
   * Whether the downstream of socket `i` could know the current truth at monotonic `perf`: false from a
   * change (move, resume) until shortly after the first reply from that socket that carries it.
   */
  knowable(perf: number, i = 0, marginMs = 20): boolean {
    if (perf < this.#changedAtMs) return true;
    const first = this.#sockets[i]?.firstReplyAfterChangeMs;
    return first !== undefined && perf >= first + marginMs;
  }

  /** Whether the truth changed between monotonic `a` and `b` (a probe exchange spanning it is void). */
  changedBetween(a: number, b: number): boolean {
    const leap = this.#leap?.atMs;
    return (this.#changedAtMs > a && this.#changedAtMs <= b) || (leap !== undefined && leap > a && leap <= b);
  }

  /** The window [change, first reply after it + margin] in which truth was not knowable downstream. */
  get unknowableSince(): number {
    return this.#changedAtMs;
  }

  #changed(now: number): void {
    this.#changedAtMs = now;
    for (const x of this.#sockets) x.firstReplyAfterChangeMs = undefined;
  }

  #apply(): void {
    const c = stepTo(this.#tf, this.#x0, this.#freq, 0);
    this.clock.setCorrection(this.#leap ? { ...c, leap: { ...this.#leap, smearMs: 0 } } : c);
  }

  #leap: { atMs: number; deltaS: number } | undefined;

  /**
   * Announce a leap second (LI 1 for an insertion, `deltaS` −1; LI 2 for a deletion, +1) until the truth
   * reaches `epochUnixS`, and apply it there exactly: the truth repeats (or skips) a second as the NTP
   * timescale does (RFC 5905 §7.3). Returns the monotonic ms of the leap. The leap is knowable downstream
   * (it was announced), so it does not count as a change of the truth.
   */
  scheduleLeap(epochUnixS: number, deltaS: -1 | 1): number {
    this.#leap = undefined;
    this.#apply();
    let t = performance.now();
    for (let i = 0; i < 3; i++) t += epochUnixS * 1000 - this.clock.servedUnixMs(t);
    this.#leap = { atMs: t, deltaS };
    this.#apply();
    return t;
  }

  /** Monotonic ms of the scheduled leap, if any. */
  get leapAtMs(): number | undefined {
    return this.#leap?.atMs;
  }

  /** The leap indicator this server sends at monotonic `perf`. */
  leapIndicator(perf: number): number {
    const l = this.#leap;
    if (!l || perf >= l.atMs) return 0;
    return l.deltaS < 0 ? 1 : 2;
  }

  /** Open one more server socket (index = the order of calls, from 0); returns its index. */
  async listen(): Promise<number> {
    // Replies go to IP literals: a synchronous lookup lets send() reach the kernel before it returns, right
    // after T3 is read (dgram's default lookup defers the send to a later tick), as a real server's would.
    const s = createSocket({ type: 'udp4', lookup: syncLookup4 });
    const entry = {
      socket: s,
      arrival: { kernel: false, at: (p: number) => p } as ArrivalTime,
      firstReplyAfterChangeMs: undefined as number | undefined,
    };
    s.on('message', (msg, rinfo) => {
      const perf = performance.now();
      const noiseMs = this.noiseS > 0 ? (Math.random() * 2 - 1) * this.noiseS * 1000 : 0;
      const t2 = this.truth(entry.arrival.at(perf) + noiseMs);
      if (this.silent || msg.length < 48 || ((msg[0] ?? 0) & 7) !== MODE.CLIENT) return;
      const out = Buffer.alloc(48);
      out[0] = (this.leapIndicator(perf) << 6) | ((((msg[0] ?? 0) >> 3) & 7) << 3) | MODE.SERVER;
      out[1] = this.stratum;
      out[2] = msg[2] ?? 0;
      out.writeInt8(-20, 3);
      out.writeUInt32BE(secondsToShort(this.rootDelayS), 4);
      out.writeUInt32BE(secondsToShort(this.rootDispersionS), 8);
      out.writeUInt32BE(this.refId >>> 0, 12);
      out.writeUInt32BE(t2.seconds, 16);
      out.set(msg.subarray(40, 48), 24);
      out.writeUInt32BE(t2.seconds, 32);
      out.writeUInt32BE(t2.fraction, 36);
      this.clock.write(out, 40, true, performance.now() + noiseMs);
      s.send(out, rinfo.port, rinfo.address);
      this.replies++;
      if (entry.firstReplyAfterChangeMs === undefined && perf >= this.#changedAtMs) {
        entry.firstReplyAfterChangeMs = performance.now();
      }
    });
    await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
    entry.arrival = arrivalTime(s, this.clock, { kernel: true, correctionMs: 0 });
    this.#sockets.push(entry);
    return this.#sockets.length - 1;
  }

  async close(): Promise<void> {
    this.clock.stop();
    const all = this.#sockets.splice(0);
    await Promise.all(all.map((x) => new Promise<void>((r) => x.socket.close(() => r()))));
  }
}

/** dgram lookup answering the IPv4 literal synchronously. */
function syncLookup4(
  address: string,
  optionsOrCb: unknown,
  maybeCb?: (err: Error | null, address: string, family: number) => void,
): void {
  const cb = (typeof optionsOrCb === 'function' ? optionsOrCb : maybeCb) as (
    err: Error | null,
    address: string,
    family: number,
  ) => void;
  cb(null, address, 4);
}

/**
 * A client that polls a server under test every `intervalMs` and measures it against an upstream's truth
 * (RFC 5905 §8 offset and delay, T1/T4 from the truth clock, T4 from the kernel receive timestamp).
 */
export class Probe {
  readonly records: ProbeRecord[] = [];
  #socket: Socket | undefined;
  #arrival: ArrivalTime | undefined;
  #timer: NodeJS.Timeout | undefined;
  #pending: { t1: NtpTimestamp; atMs: number; nonce: Buffer; txFromMs?: number } | undefined;
  #transmit: TransmitTime | undefined;

  constructor(
    readonly port: number,
    readonly truth: OffsetUpstream,
    readonly intervalMs = 200,
    /** Which of the upstream's sockets the server under test follows (for `knowable`). */
    readonly upstreamSocket = 0,
  ) {}

  async start(): Promise<void> {
    const s = createSocket('udp4');
    this.#socket = s;
    // Connected: an ICMP "port unreachable" (the server under test restarting) surfaces as a socket error.
    s.on('error', () => undefined);
    s.on('message', (msg) => {
      const perf = performance.now();
      const t4 = this.truth.truth(this.#arrival?.at(perf) ?? perf);
      const p = this.#pending;
      if (!p || msg.length < 48 || !msg.subarray(24, 32).equals(p.nonce)) return;
      this.#pending = undefined;
      if (p.txFromMs !== undefined) {
        const sent = this.#transmit?.sent(p.txFromMs);
        if (sent !== undefined) p.t1 = this.truth.truth(sent);
      }
      const pkt = expectDecoded(decodeNtpPacket(msg));
      const t21 = timestampDiffSeconds(pkt.receiveTimestamp, p.t1);
      const t34 = timestampDiffSeconds(pkt.transmitTimestamp, t4);
      this.records.push({
        atMs: p.atMs,
        recvMs: perf,
        leap: pkt.leap,
        stratum: pkt.stratum,
        t3: (BigInt(pkt.transmitTimestamp.seconds) << 32n) | BigInt(pkt.transmitTimestamp.fraction),
        rootDelayS: shortToSeconds(pkt.rootDelay),
        rootDispersionS: shortToSeconds(pkt.rootDispersion),
        errorS: (t21 + t34) / 2,
        delayS: t21 - t34,
        t21S: t21,
        t32S: timestampDiffSeconds(pkt.transmitTimestamp, pkt.receiveTimestamp),
        // An exchange during which the truth changed measures nothing (its T1 and T4 disagree).
        knowable:
          this.truth.knowable(p.atMs, this.upstreamSocket) && !this.truth.changedBetween(p.atMs, perf),
      });
    });
    await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
    // Connected: send() reaches the kernel before it returns, and T1 is the kernel's transmit timestamp
    // (kernel-tx-timestamp.ts), so the probe's own error is only the server's send path.
    await new Promise<void>((resolve) => s.connect(this.port, '127.0.0.1', resolve));
    this.#arrival = arrivalTime(s, this.truth.clock, { kernel: true, correctionMs: 0 });
    this.#transmit = transmitTime(s, this.truth.clock);
    this.#timer = setInterval(() => {
      this.#send();
    }, this.intervalMs);
  }

  #send(): void {
    const s = this.#socket;
    if (!s) return;
    const req = Buffer.alloc(48);
    req[0] = (4 << 3) | MODE.CLIENT;
    const atMs = performance.now();
    const t1 = this.truth.truth(atMs);
    req.writeUInt32BE(t1.seconds, 40);
    req.writeUInt32BE(t1.fraction, 44);
    const pending: { t1: NtpTimestamp; atMs: number; nonce: Buffer; txFromMs?: number } = {
      t1,
      atMs,
      nonce: req.subarray(40, 48),
    };
    this.#pending = pending;
    const tx = this.#transmit;
    tx?.beforeSend();
    s.send(req);
    const sent = tx?.sent(atMs);
    if (sent !== undefined) pending.t1 = this.truth.truth(sent);
    else if (tx) pending.txFromMs = atMs;
  }

  /** The latest record. */
  get last(): ProbeRecord | undefined {
    return this.records[this.records.length - 1];
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    const s = this.#socket;
    this.#socket = undefined;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }
}
