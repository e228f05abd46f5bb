import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { networkInterfaces } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@broadcast-ops/core';
import type { ClockQuality } from '../domain/clock-quality.ts';
import { setSocketDscp } from './socket-dscp.ts';
import type { TransmitTime } from './kernel-tx-timestamp.ts';
import { Bmca, type BmcaDecision, type BmcaState } from '../domain/ptp-bmca.ts';
import { PROFILE_TABLE, type PtpProfileName } from '../domain/ptp-profiles.ts';
import { SYNC_METADATA_INTERVAL_MS, sendsSyncMetadata, syncMetadata } from '../domain/ptp-sync-metadata.ts';
import {
  EVENT_PORT,
  FLAG0,
  GENERAL_PORT,
  LOG_INTERVAL_NONE,
  PTP_PDELAY_GROUP,
  PTP_PRIMARY_GROUP,
  clockIdentityFromMac,
  clockIdentityText,
  decodePtp,
  encodePtp,
  syncMetadataMessage,
  toPtpTimestamp,
  type PortIdentity,
  type PtpMessage,
  type PtpMessageInput,
} from '../protocol/ptp.ts';

/**
 * Experimental PTP announcer (docs/ptp.md): an IEEE 1588-2008 master on UDP/IPv4 multicast with software
 * timestamps. Announce, two-step Sync + Follow_Up, Delay_Resp to Delay_Req (E2E) and Pdelay_Resp +
 * Pdelay_Resp_Follow_Up to Pdelay_Req (P2P). The BMCA (domain/ptp-bmca.ts) decides whether the port is
 * MASTER: it listens first, and steps aside (PASSIVE: no Announce, Sync or Delay_Resp) while a better
 * grandmaster announces. No servo, no hardware timestamps. Event messages are stamped by the kernel on
 * receive and on transmit where the addons are built (docs/ptp-timestamps.md).
 * Timestamps are the served clock in the PTP timescale (TAI = UTC + currentUtcOffset).
 */

export interface PtpConfig {
  interface: string;
  domain: number;
  priority1: number;
  priority2: number;
  clock_class: number;
  clock_accuracy: number;
  log_announce_interval: number;
  log_sync_interval: number;
  log_min_delay_req_interval: number;
  transport_mode: 'multicast' | 'unicast';
  delay_mechanism: 'E2E' | 'P2P';
  profile: PtpProfileName;
  two_step_flag: boolean;
  /** DiffServ code points (docs/ptp.md "Profiles"). */
  dscp_event: number;
  dscp_general: number;
  /** Announce intervals without an Announce from the best master before it is forgotten (§7.7.3.1). */
  announce_receipt_timeout: number;
  /** Never master: only listen and report the best master (monitoring a plant's grandmaster). */
  listen_only: boolean;
}

export interface PtpAnnouncerOptions {
  config: PtpConfig;
  /** Served clock, Unix ms (float) at a performance.now() instant. */
  servedUnixMs: (perf?: number) => number;
  /** The kernel's CLOCK_REALTIME, Unix ms, at a performance.now() instant (the served clock's mapping). */
  kernelRealtimeMs?: (perf: number) => number;
  /** The clock-quality model (domain/clock-quality.ts), read for every Announce. */
  quality: () => ClockQuality;
  logger: Logger;
  /**
   * Receive timestamps for the event socket (io/kernel-rx-timestamp.ts `arrivalTime`): the kernel's, carried
   * onto the monotonic clock, where the addon is built; else the handler's own reading.
   */
  arrival?: (socket: Socket) => { kernel: boolean; at: (perf: number) => number };
  /**
   * Transmit timestamps for the event socket (io/kernel-tx-timestamp.ts `transmitTime`): the kernel's, carried
   * onto the monotonic clock, for Follow_Up's preciseOriginTimestamp and Pdelay_Resp_Follow_Up's t3; where
   * absent (no addon) or undefined, the reading taken right before send() (docs/ptp-timestamps.md).
   */
  transmit?: (socket: Socket) => TransmitTime | undefined;
  /** Monotonic ms (the BMCA's timeouts); default performance.now. */
  monotonicMs?: () => number;
  /** Ports (tests in a namespace use the real 319/320). */
  eventPort?: number;
  generalPort?: number;
}

export interface PtpCounters {
  announce: number;
  sync: number;
  followUp: number;
  delayReq: number;
  delayResp: number;
  pdelayReq: number;
  pdelayResp: number;
  rxErrors: number;
  txErrors: number;
  /** Announces received from other clocks (the BMCA's input). */
  announceRx: number;
  /** BMCA state changes (LISTENING, MASTER, PASSIVE). */
  stateChanges: number;
  /** Sync / Pdelay_Resp whose follow-up carries the kernel's transmit timestamp. */
  txKernelStamps: number;
  /** Sync / Pdelay_Resp whose follow-up carries the reading before send(): no usable kernel stamp in time. */
  txStampFallbacks: number;
}

export interface PtpStatus {
  running: boolean;
  experimental: true;
  port_state: 'INITIALIZING' | 'FAULTY' | 'DISABLED' | BmcaState;
  /** Why the port is in that state (the BMCA's decision, or the error). */
  state_reason: string;
  listen_only: boolean;
  /** The grandmaster this port's network follows: ours while MASTER, else the best foreign master heard. */
  grandmaster?: PtpGrandmaster;
  /** RFC 7273 §4.8 `ts-refclk` for an SDP naming that grandmaster and domain. */
  ts_refclk?: string;
  /**
   * The time this port announces (UTC, before the TAI offset) minus the kernel's CLOCK_REALTIME, ns: what a
   * host tool reading the system clock (ptp4l -S, an SDP generator) sees differently from the grandmaster.
   */
  offset_from_kernel_ns?: number;
  clock_id: string;
  domain: number;
  priority1: number;
  priority2: number;
  clock_class: number;
  clock_accuracy: number;
  time_source: number;
  current_utc_offset: number;
  ptp_timescale: true;
  profile: PtpProfileName;
  profile_title: string;
  log_announce_interval: number;
  log_sync_interval: number;
  log_min_delay_req_interval: number;
  announce_receipt_timeout: number;
  /** DiffServ code points and whether the sockets carry them. */
  dscp: { event: number; general: number; marked: boolean };
  interface: string;
  delay_mechanism: 'E2E' | 'P2P';
  two_step: true;
  timestamping: 'software';
  /** Event-message receive timestamps: the kernel's (software, SO_TIMESTAMP) or the handler's. */
  rx_timestamps: 'kernel' | 'userspace';
  /**
   * Event-message transmit timestamps (Follow_Up, Pdelay_Resp_Follow_Up): the kernel's (software,
   * SO_TIMESTAMPING) or the reading before send(); fallbacks counts follow-ups that carried the latter while
   * kernel stamps were on (docs/ptp-timestamps.md "Fallback").
   */
  tx_timestamps: 'kernel' | 'userspace';
  tx_timestamp_fallbacks: number;
  bmca: true;
  servo: false;
  sync_count: number;
  announce_count: number;
  delay_req_count: number;
  pdelay_req_count: number;
  error?: string;
}

export interface PtpGrandmaster {
  identity: string;
  priority1: number;
  priority2: number;
  clock_class: number;
  clock_accuracy: number;
  offset_scaled_log_variance: number;
  time_source: number;
  steps_removed: number;
  /** The port whose Announces name it (ours when we are the grandmaster). */
  parent_port: string;
  ours: boolean;
}

/** Not computed (linuxptp's default 0xFFFF, "not computed" in IEEE 1588-2008 §7.6.3.3). */
const OFFSET_SCALED_LOG_VARIANCE = 0xffff;

/**
 * RFC 7273 §4.8: `ptp=IEEE1588-2008:<EUI-64 as dash-separated upper-case hex>:<domain>`, e.g.
 * `ptp=IEEE1588-2008:39-A7-94-FF-FE-07-CB-D0:0` (the value of an SDP `a=ts-refclk:` line).
 */
export function tsRefclk(identityText: string, domain: number): string {
  const hex = identityText.replace(/\./g, '').toUpperCase();
  return `ptp=IEEE1588-2008:${hex.match(/../g)?.join('-') ?? hex}:${domain}`;
}

function ifaceInfo(name: string): { address: string; mac: string } | undefined {
  const list = networkInterfaces()[name] ?? [];
  const v4 = list.find((a) => a.family === 'IPv4');
  if (!v4) return undefined;
  return { address: v4.address, mac: v4.mac };
}

/**
 * How long a transmit stamp is awaited after send() returned before the follow-up falls back, ms. Software
 * stamps are taken in the driver's transmit routine (Documentation/networking/timestamping.rst), which on an
 * idle queue runs inside sendmsg(); a queued qdisc delays it by the queue, never by a Sync interval.
 */
const TX_STAMP_WAIT_MS = 2;
/** After a fallback, when a stamp that came late is read off the error queue, ms. */
const TX_DRAIN_MS = 20;

/** dgram's `lookup` for numeric addresses, answering at once (the groups and ports here are numeric). */
function numericLookup(address: string, _family: unknown, cb: (e: null, a: string, f: number) => void): void {
  cb(null, address, 4);
}

export class PtpAnnouncer {
  readonly #o: PtpAnnouncerOptions;
  readonly #c: PtpConfig;
  readonly #log: Logger;
  #event: Socket | undefined;
  #general: Socket | undefined;
  #timers: NodeJS.Timeout[] = [];
  #portIdentity: PortIdentity = { clockIdentity: '0000000000000000', portNumber: 1 };
  #running = false;
  #error: string | undefined;
  /** One sequenceId counter per message type sent on our own initiative (IEEE 1588-2008 §7.3.7). */
  #seq = { announce: 0, sync: 0, management: 0 };
  #smAt = -Infinity;
  #ifaceAddress = '';
  #kernelRx = false;
  #tx: TransmitTime | undefined;
  /** The event message whose transmit stamp is awaited (at most one: stamps carry no message identity). */
  #txWait: { give: () => void } | undefined;
  #drainTimer: NodeJS.Timeout | undefined;
  #bmca: Bmca | undefined;
  #deadline: NodeJS.Timeout | undefined;
  #dscpMarked = false;
  #decision: BmcaDecision | undefined;
  readonly counters: PtpCounters = {
    announce: 0,
    sync: 0,
    followUp: 0,
    delayReq: 0,
    delayResp: 0,
    pdelayReq: 0,
    pdelayResp: 0,
    rxErrors: 0,
    txErrors: 0,
    announceRx: 0,
    stateChanges: 0,
    txKernelStamps: 0,
    txStampFallbacks: 0,
  };

  constructor(options: PtpAnnouncerOptions) {
    this.#o = options;
    this.#c = options.config;
    this.#log = options.logger;
  }

  get clockIdentity(): string {
    return this.#portIdentity.clockIdentity;
  }

  /** Served time in the PTP timescale (TAI), ns since 1970. */
  #nowNs(perf = performance.now()): bigint {
    const ms = this.#o.servedUnixMs(perf);
    const whole = Math.floor(ms);
    const frac = Math.round((ms - whole) * 1e6);
    return (
      BigInt(whole) * 1_000_000n + BigInt(frac) + BigInt(this.#o.quality().currentUtcOffset) * 1_000_000_000n
    );
  }

  async start(): Promise<void> {
    if (this.#c.transport_mode !== 'multicast') {
      this.#error = 'transport_mode unicast is not supported (multicast only)';
      this.#log.error({ ptp: this.#c.interface }, this.#error);
      return;
    }
    const info = ifaceInfo(this.#c.interface);
    if (!info) {
      this.#error = `interface ${this.#c.interface} has no IPv4 address`;
      this.#log.error({}, `ptp: ${this.#error}`);
      return;
    }
    this.#ifaceAddress = info.address;
    this.#portIdentity = { clockIdentity: clockIdentityFromMac(info.mac), portNumber: 1 };
    try {
      this.#event = await this.#bind(this.#o.eventPort ?? EVENT_PORT);
      this.#general = await this.#bind(this.#o.generalPort ?? GENERAL_PORT);
    } catch (err) {
      this.#error = `cannot bind PTP ports: ${(err as Error).message}`;
      this.#log.error({}, `ptp: ${this.#error}`);
      this.#event?.close();
      this.#general?.close();
      this.#event = this.#general = undefined;
      return;
    }
    // DiffServ marks (docs/ptp.md "Profiles"); 0 is the default marking, nothing to set.
    const marks = [
      [this.#event, this.#c.dscp_event],
      [this.#general, this.#c.dscp_general],
    ] as const;
    this.#dscpMarked = marks.every(([sock, dscp]) => dscp === 0 || setSocketDscp(sock, dscp));
    if (!this.#dscpMarked)
      this.#log.warn(
        { dscpEvent: this.#c.dscp_event, dscpGeneral: this.#c.dscp_general },
        'ptp: DSCP marking could not be set (native addon missing?): datagrams go unmarked',
      );
    this.#running = true;
    const arrival = this.#o.arrival?.(this.#event);
    this.#kernelRx = arrival?.kernel ?? false;
    this.#tx = this.#o.transmit?.(this.#event);
    this.#event.on('message', (msg, rinfo) => {
      const perf = performance.now();
      this.#receive(msg, rinfo, arrival ? arrival.at(perf) : perf);
    });
    this.#general.on('message', (msg, rinfo) => {
      this.#receive(msg, rinfo, performance.now());
    });
    const every = (log2: number, fn: () => void): void => {
      const t = setInterval(fn, Math.max(10, 1000 * 2 ** log2));
      t.unref();
      this.#timers.push(t);
    };
    this.#bmca = new Bmca({
      announceReceiptTimeout: this.#c.announce_receipt_timeout,
      logAnnounceInterval: this.#c.log_announce_interval,
      listenOnly: this.#c.listen_only,
      startMs: this.#mono(),
    });
    every(this.#c.log_announce_interval, () => this.#announce());
    every(this.#c.log_sync_interval, () => this.#sync());
    this.#log.info(
      {
        interface: this.#c.interface,
        address: info.address,
        clockIdentity: clockIdentityText(this.#portIdentity.clockIdentity),
        domain: this.#c.domain,
        delay: this.#c.delay_mechanism,
        listenOnly: this.#c.listen_only,
        txTimestamps: this.#tx ? 'kernel' : 'userspace',
      },
      'PTP announcer (experimental: software timestamps, no servo) started, LISTENING before it may be master',
    );
    this.#decide();
  }

  #mono(): number {
    return this.#o.monotonicMs ? this.#o.monotonicMs() : performance.now();
  }

  /** The BMCA's state decision (§9.3.3); a change is logged. */
  #decide(): BmcaState {
    if (!this.#bmca) return 'LISTENING';
    const q = this.#o.quality();
    const d = this.#bmca.decide(
      {
        identity: this.#portIdentity.clockIdentity,
        priority1: this.#c.priority1,
        clockClass: q.clockClass,
        clockAccuracy: q.clockAccuracy,
        offsetScaledLogVariance: OFFSET_SCALED_LOG_VARIANCE,
        priority2: this.#c.priority2,
      },
      this.#mono(),
    );
    this.#decision = d;
    this.#armDeadline();
    if (d.changed) {
      this.counters.stateChanges++;
      const best = d.best;
      this.#log.info(
        {
          state: d.state,
          reason: d.reason,
          ...(best
            ? {
                bestMaster: clockIdentityText(best.grandmasterIdentity),
                bestPriority1: best.priority1,
                bestClockClass: best.clockClass,
              }
            : {}),
        },
        `PTP port ${d.state}: ${d.reason}`,
      );
      // A port that becomes master announces at once (its Announce timer keeps its own phase).
      if (d.state === 'MASTER') this.#sendAnnounce();
    }
    return d.state;
  }

  /** Decide again when the listening period ends or a foreign record expires (Bmca.nextDeadlineMs). */
  #armDeadline(): void {
    if (this.#deadline) clearTimeout(this.#deadline);
    this.#deadline = undefined;
    const at = this.#bmca?.nextDeadlineMs();
    if (at === undefined || !this.#running) return;
    this.#deadline = setTimeout(
      () => {
        this.#deadline = undefined;
        this.#decide();
      },
      Math.max(0, at - this.#mono()) + 1,
    );
    this.#deadline.unref();
  }

  async #bind(port: number): Promise<Socket> {
    // The groups are numeric: resolved at once, so send() hands the datagram to the kernel before it returns
    // (dgram's default lookup defers it to the next tick), and the transmit stamp is queued by then.
    const s = createSocket({ type: 'udp4', reuseAddr: true, lookup: numericLookup });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(port, () => {
        s.removeListener('error', reject);
        resolve();
      });
    });
    s.on('error', (err) => {
      this.counters.txErrors++;
      this.#log.warn({ err: err.message }, 'ptp socket error');
    });
    s.addMembership(PTP_PRIMARY_GROUP, this.#ifaceAddress);
    if (this.#c.delay_mechanism === 'P2P') s.addMembership(PTP_PDELAY_GROUP, this.#ifaceAddress);
    s.setMulticastInterface(this.#ifaceAddress);
    s.setMulticastLoopback(false);
    // Peer-delay messages must not leave the link (Annex D: TTL 1); 1 is also right for the primary group.
    s.setMulticastTTL(1);
    return s;
  }

  async close(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    if (this.#deadline) clearTimeout(this.#deadline);
    this.#deadline = undefined;
    const wasRunning = this.#running;
    this.#txWait?.give();
    if (this.#drainTimer) clearTimeout(this.#drainTimer);
    this.#drainTimer = undefined;
    this.#running = false;
    if (wasRunning)
      this.#log.info(
        {
          sync: this.counters.sync,
          pdelayResp: this.counters.pdelayResp,
          txKernelStamps: this.counters.txKernelStamps,
          txStampFallbacks: this.counters.txStampFallbacks,
        },
        'PTP announcer stopped',
      );
    const close = (s: Socket | undefined): Promise<void> =>
      new Promise((r) => {
        if (!s) return r();
        s.close(() => r());
      });
    await Promise.all([close(this.#event), close(this.#general)]);
    this.#event = this.#general = undefined;
  }

  #header(
    flags0: number,
    sequenceId: number,
    logMessageInterval: number,
    correction = 0n,
  ): PtpMessageInput['header'] {
    return {
      domainNumber: this.#c.domain,
      flags: [flags0, this.#o.quality().flags1],
      correction,
      sourcePortIdentity: this.#portIdentity,
      sequenceId,
      logMessageInterval,
    };
  }

  #send(sock: Socket | undefined, m: PtpMessageInput, group: string, port: number): number {
    const buf = encodePtp(m);
    // The userspace timestamp of an event message, taken immediately before send(): with numericLookup the
    // datagram reaches the kernel synchronously.
    const t = performance.now();
    try {
      sock?.send(buf, port, group);
    } catch {
      this.counters.txErrors++;
    }
    return t;
  }

  /**
   * Sends an event message (Sync, Pdelay_Resp) and calls `sent` with the monotonic ms it left: the kernel's
   * transmit stamp (docs/ptp-timestamps.md), read at once (on veth and loopback it is queued before send()
   * returns) or on the next turns of the event loop for at most TX_STAMP_WAIT_MS; else the reading before
   * send(), counted as a fallback. Never blocks, and never pairs a stamp with the wrong message: stamps carry
   * no identity, so a second event message sent while one is awaited gives the first its fallback.
   */
  #sendEvent(m: PtpMessageInput, group: string, sent: (perf: number) => void): void {
    const tx = this.#tx;
    this.#txWait?.give();
    tx?.beforeSend();
    const t = this.#send(this.#event, m, group, this.#o.eventPort ?? EVENT_PORT);
    if (!tx) return sent(t);
    const at = tx.sent(t);
    if (at !== undefined) {
      this.counters.txKernelStamps++;
      return sent(at);
    }
    let done = false;
    const finish = (perf: number | undefined): void => {
      if (done) return;
      done = true;
      this.#txWait = undefined;
      if (perf !== undefined) this.counters.txKernelStamps++;
      else {
        this.counters.txStampFallbacks++;
        this.#drainLater();
      }
      sent(perf ?? t);
    };
    this.#txWait = { give: () => finish(undefined) };
    const poll = (): void => {
      if (done) return;
      const late = tx.sent(t);
      if (late !== undefined) finish(late);
      else if (performance.now() - t >= TX_STAMP_WAIT_MS || !this.#running) finish(undefined);
      else setImmediate(poll);
    };
    setImmediate(poll);
  }

  /**
   * A stamp that comes after its fallback would stay queued, and a queued stamp makes the socket report
   * POLLERR to libuv on every turn (native/tx-timestamp.c): read it off a little later.
   */
  #drainLater(): void {
    if (this.#drainTimer) return;
    this.#drainTimer = setTimeout(() => {
      this.#drainTimer = undefined;
      if (!this.#txWait) this.#tx?.beforeSend();
    }, TX_DRAIN_MS);
    this.#drainTimer.unref();
  }

  /** The Announce timer: at least one state decision per announce interval (§9.2.6.8), then Announce. */
  #announce(): void {
    if (!this.#running) return;
    const before = this.#decision?.state;
    // A port that has just become master announced in #decide.
    if (this.#decide() !== 'MASTER' || before !== 'MASTER') return;
    this.#sendAnnounce();
  }

  #sendAnnounce(): void {
    if (!this.#running) return;
    const q = this.#o.quality();
    const seq = this.#seq.announce;
    this.#seq.announce = (seq + 1) & 0xffff;
    this.#send(
      this.#general,
      {
        type: 'announce',
        header: this.#header(0, seq, this.#c.log_announce_interval),
        announce: {
          originTimestamp: toPtpTimestamp(this.#nowNs()),
          currentUtcOffset: q.currentUtcOffset,
          grandmasterPriority1: this.#c.priority1,
          clockClass: q.clockClass,
          clockAccuracy: q.clockAccuracy,
          offsetScaledLogVariance: OFFSET_SCALED_LOG_VARIANCE,
          grandmasterPriority2: this.#c.priority2,
          grandmasterIdentity: this.#portIdentity.clockIdentity,
          stepsRemoved: 0,
          timeSource: q.timeSource,
        },
      },
      PTP_PRIMARY_GROUP,
      this.#o.generalPort ?? GENERAL_PORT,
    );
    this.counters.announce++;
    // SMPTE ST 2059-2 synchronization metadata, once a second beside the Announce (docs/ptp-profiles.md).
    if (sendsSyncMetadata(this.#c.profile) && this.#mono() - this.#smAt >= SYNC_METADATA_INTERVAL_MS - 50) {
      this.#smAt = this.#mono();
      const smSeq = this.#seq.management;
      this.#seq.management = (smSeq + 1) & 0xffff;
      const message = syncMetadataMessage(
        this.#header(0, smSeq, LOG_INTERVAL_NONE),
        syncMetadata(q, Number(this.#nowNs() / 1_000_000_000n)),
      );
      this.#send(this.#general, message, PTP_PRIMARY_GROUP, this.#o.generalPort ?? GENERAL_PORT);
    }
  }

  /**
   * Two-step Sync (§9.5.9, §11.3): approximate originTimestamp, then Follow_Up with the same sequenceId and
   * t1, when the Sync left (§11.3.2 preciseOriginTimestamp).
   */
  #sync(): void {
    if (!this.#running || this.#decision?.state !== 'MASTER') return;
    const seq = this.#seq.sync;
    this.#seq.sync = (seq + 1) & 0xffff;
    const approx = toPtpTimestamp(this.#nowNs());
    this.counters.sync++;
    this.#sendEvent(
      {
        type: 'sync',
        header: this.#header(FLAG0.TWO_STEP, seq, this.#c.log_sync_interval),
        timestamp: approx,
      },
      PTP_PRIMARY_GROUP,
      (t1) => {
        if (!this.#running) return;
        this.#send(
          this.#general,
          {
            type: 'follow_up',
            header: this.#header(0, seq, this.#c.log_sync_interval),
            timestamp: toPtpTimestamp(this.#nowNs(t1)),
          },
          PTP_PRIMARY_GROUP,
          this.#o.generalPort ?? GENERAL_PORT,
        );
        this.counters.followUp++;
      },
    );
  }

  #receive(buf: Buffer, _rinfo: RemoteInfo, rxPerf: number): void {
    const d = decodePtp(buf);
    if (!d.ok) {
      this.counters.rxErrors++;
      return;
    }
    const m: PtpMessage = d.value;
    if (m.header.domainNumber !== this.#c.domain) return;
    if (m.header.sourcePortIdentity.clockIdentity === this.#portIdentity.clockIdentity) return;
    if (m.type === 'announce') {
      this.counters.announceRx++;
      this.#bmca?.receive(m.header.sourcePortIdentity, m.header.logMessageInterval, m.announce, this.#mono());
      this.#decide();
      return;
    }
    // Only a master answers Delay_Req (§9.2.5, Table 9); peer delay is per link and answered in any state.
    if (m.type === 'delay_req' && this.#c.delay_mechanism === 'E2E' && this.#decision?.state === 'MASTER') {
      this.counters.delayReq++;
      // Delay_Resp: t4, the request's sequenceId, correctionField and sourcePortIdentity (§11.3.2).
      this.#send(
        this.#general,
        {
          type: 'delay_resp',
          header: this.#header(
            0,
            m.header.sequenceId,
            this.#c.log_min_delay_req_interval,
            m.header.correction,
          ),
          timestamp: toPtpTimestamp(this.#nowNs(rxPerf)),
          requestingPortIdentity: m.header.sourcePortIdentity,
        },
        PTP_PRIMARY_GROUP,
        this.#o.generalPort ?? GENERAL_PORT,
      );
      this.counters.delayResp++;
    } else if (m.type === 'pdelay_req' && this.#c.delay_mechanism === 'P2P') {
      this.counters.pdelayReq++;
      // Two-step peer delay (§11.4.3 c): Pdelay_Resp with t2 and correction 0, then Pdelay_Resp_Follow_Up
      // with t3 and the request's correctionField; both copy its sequenceId and sourcePortIdentity.
      this.#sendEvent(
        {
          type: 'pdelay_resp',
          header: this.#header(FLAG0.TWO_STEP, m.header.sequenceId, LOG_INTERVAL_NONE),
          timestamp: toPtpTimestamp(this.#nowNs(rxPerf)),
          requestingPortIdentity: m.header.sourcePortIdentity,
        },
        PTP_PDELAY_GROUP,
        (t3) => {
          if (!this.#running) return;
          this.#send(
            this.#general,
            {
              type: 'pdelay_resp_follow_up',
              header: this.#header(0, m.header.sequenceId, LOG_INTERVAL_NONE, m.header.correction),
              timestamp: toPtpTimestamp(this.#nowNs(t3)),
              requestingPortIdentity: m.header.sourcePortIdentity,
            },
            PTP_PDELAY_GROUP,
            this.#o.generalPort ?? GENERAL_PORT,
          );
        },
      );
      this.counters.pdelayResp++;
    }
  }

  /** The grandmaster as this port sees it: ours while MASTER, else the best foreign master (if any). */
  #grandmaster(q: ClockQuality): PtpGrandmaster | undefined {
    const d = this.#decision;
    if (!this.#running || !d) return undefined;
    if (d.state === 'MASTER')
      return {
        identity: clockIdentityText(this.#portIdentity.clockIdentity),
        priority1: this.#c.priority1,
        priority2: this.#c.priority2,
        clock_class: q.clockClass,
        clock_accuracy: q.clockAccuracy,
        offset_scaled_log_variance: OFFSET_SCALED_LOG_VARIANCE,
        time_source: q.timeSource,
        steps_removed: 0,
        parent_port: `${clockIdentityText(this.#portIdentity.clockIdentity)}-${this.#portIdentity.portNumber}`,
        ours: true,
      };
    const b = d.best;
    if (!b) return undefined;
    return {
      identity: clockIdentityText(b.grandmasterIdentity),
      priority1: b.priority1,
      priority2: b.priority2,
      clock_class: b.clockClass,
      clock_accuracy: b.clockAccuracy,
      offset_scaled_log_variance: b.offsetScaledLogVariance,
      time_source: b.timeSource,
      steps_removed: b.stepsRemoved,
      parent_port: `${clockIdentityText(b.sender.clockIdentity)}-${b.sender.portNumber}`,
      ours: false,
    };
  }

  /** Served (announced) time minus the kernel's realtime clock at one instant, ns. */
  #offsetFromKernelNs(kernelRealtimeMs: (perf: number) => number): number {
    const perf = performance.now();
    return Math.round((this.#o.servedUnixMs(perf) - kernelRealtimeMs(perf)) * 1e6);
  }

  status(): PtpStatus {
    const q = this.#o.quality();
    if (this.#running) this.#decide();
    const gm = this.#grandmaster(q);
    return {
      running: this.#running,
      experimental: true,
      port_state: this.#running
        ? (this.#decision?.state ?? 'LISTENING')
        : this.#error
          ? 'FAULTY'
          : 'INITIALIZING',
      state_reason: this.#running ? (this.#decision?.reason ?? '') : (this.#error ?? 'not started'),
      listen_only: this.#c.listen_only,
      ...(gm ? { grandmaster: gm, ts_refclk: tsRefclk(gm.identity, this.#c.domain) } : {}),
      ...(this.#o.kernelRealtimeMs
        ? { offset_from_kernel_ns: this.#offsetFromKernelNs(this.#o.kernelRealtimeMs) }
        : {}),
      clock_id: clockIdentityText(this.#portIdentity.clockIdentity),
      domain: this.#c.domain,
      priority1: this.#c.priority1,
      priority2: this.#c.priority2,
      clock_class: q.clockClass,
      clock_accuracy: q.clockAccuracy,
      time_source: q.timeSource,
      current_utc_offset: q.currentUtcOffset,
      ptp_timescale: true,
      profile: this.#c.profile,
      profile_title: PROFILE_TABLE[this.#c.profile].title,
      log_announce_interval: this.#c.log_announce_interval,
      log_sync_interval: this.#c.log_sync_interval,
      log_min_delay_req_interval: this.#c.log_min_delay_req_interval,
      announce_receipt_timeout: this.#c.announce_receipt_timeout,
      dscp: { event: this.#c.dscp_event, general: this.#c.dscp_general, marked: this.#dscpMarked },
      interface: this.#c.interface,
      delay_mechanism: this.#c.delay_mechanism,
      two_step: true,
      timestamping: 'software',
      rx_timestamps: this.#kernelRx ? 'kernel' : 'userspace',
      tx_timestamps: this.#tx ? 'kernel' : 'userspace',
      tx_timestamp_fallbacks: this.counters.txStampFallbacks,
      bmca: true,
      servo: false,
      sync_count: this.counters.sync,
      announce_count: this.counters.announce,
      delay_req_count: this.counters.delayReq,
      pdelay_req_count: this.counters.pdelayReq,
      ...(this.#error ? { error: this.#error } : {}),
    };
  }
}
