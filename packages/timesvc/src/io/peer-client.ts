import { createSocket, type Socket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@broadcast-ops/core';
import type { ClockManager, ReferenceSource, ReferenceStatus } from '../domain/clock-manager.ts';
import { addressRefId } from '../domain/clock-manager.ts';
import { NtpPeer, type PeerConfig, type PeerStatus } from '../domain/ntp-peer.ts';
import { arrivalTime, type ArrivalTime } from './kernel-rx-timestamp.ts';
import { transmitTime, type TransmitTime } from './kernel-tx-timestamp.ts';
import type { NtsPeerSecurity, NtsPeerStatus } from './nts-peer.ts';
import type { ServedClock } from './served-clock.ts';

/**
 * The client side for one upstream peer: resolves the host, owns a connected UDP socket (so only the
 * peer's replies arrive), sends the domain's requests when due and feeds replies and samples to the
 * clock manager. Timestamps T1/T4 come from the raw (uncorrected) clock; the manager relates them to the
 * served clock.
 */
export class PeerClient implements ReferenceSource {
  readonly id: string;
  readonly kind = 'ntp' as const;
  readonly prefer: boolean;
  readonly peer: NtpPeer;
  readonly #host: string;
  readonly #port: number;
  readonly #clock: ServedClock;
  readonly #manager: ClockManager;
  readonly #logger: Logger;
  #socket: Socket | undefined;
  #resolved: string | undefined;
  #refId = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #resolving = false;
  #lastKod: string | undefined;
  readonly #rxOptions: { kernel: boolean; correctionMs: number };
  /** Receive timestamps of the connected socket (kernel-rx-timestamp.ts). */
  #arrival: ArrivalTime | undefined;
  /** Kernel transmit timestamps of the connected socket (kernel-tx-timestamp.ts), where available. */
  #transmit: TransmitTime | undefined;
  /** The outstanding request's send() started at this monotonic ms; its kernel stamp is still to be read. */
  #txPendingFromMs: number | undefined;
  /** NTS for this peer (nts-peer.ts): requests wrapped, only authentic replies reach the peer logic. */
  readonly #nts: NtsPeerSecurity | undefined;

  constructor(options: {
    config: PeerConfig;
    host: string;
    port: number;
    clock: ServedClock;
    manager: ClockManager;
    logger: Logger;
    precision: number;
    /** Receive-timestamp correction, ms (see NtpServerOptions.rxCorrectionMs). */
    rxCorrectionMs?: number;
    /** Use kernel receive timestamps where available (default true). */
    kernelRxTimestamps?: boolean;
    /** NTS (RFC 8915) for a peer with nts_enabled. */
    nts?: NtsPeerSecurity | undefined;
  }) {
    this.#rxOptions = {
      kernel: options.kernelRxTimestamps ?? true,
      correctionMs: options.rxCorrectionMs ?? 0,
    };
    this.#host = options.host;
    this.#port = options.port;
    this.#nts = options.nts;
    this.id = options.host.includes(':')
      ? `NTP:[${options.host}]:${options.port}`
      : `NTP:${options.host}:${options.port}`;
    this.prefer = options.config.prefer;
    this.peer = new NtpPeer(options.config, performance.now(), options.precision);
    this.#clock = options.clock;
    this.#manager = options.manager;
    this.#logger = options.logger.child({ peer: this.id });
  }

  /** NTS state of this peer, undefined for a plain NTP peer. */
  /** The link as chronyc ntpdata shows it: remote and local address, and where the timestamps come from. */
  get link(): {
    remotePort: number;
    localAddress: string | undefined;
    rxTimestamps: 'kernel' | 'daemon' | undefined;
    txTimestamps: 'kernel' | 'daemon' | undefined;
  } {
    let localAddress: string | undefined;
    try {
      localAddress = this.#socket?.address().address;
    } catch {
      localAddress = undefined;
    }
    const mode = (t: { kernel: boolean } | undefined): 'kernel' | 'daemon' | undefined =>
      this.#socket === undefined ? undefined : t?.kernel ? 'kernel' : 'daemon';
    return {
      remotePort: this.#nts?.target?.port ?? this.#port,
      localAddress,
      rxTimestamps: mode(this.#arrival),
      txTimestamps: mode(this.#transmit),
    };
  }

  get ntsStatus(): NtsPeerStatus | undefined {
    return this.#nts?.status();
  }

  get resolvedAddress(): string | undefined {
    return this.#resolved;
  }

  status(): ReferenceStatus {
    const s = this.peer.status();
    return {
      usable: s.usable,
      stratum: s.stratum,
      referenceId: this.#refId,
      leap: s.leap,
      rootDelayS: s.rootDelayS,
      rootDispersionS: s.rootDispersionS,
      pollLog2: s.poll,
      // Only authentic replies reach the peer logic when NTS is on (the selection treats all sources alike).
      authenticated: this.#nts !== undefined,
    };
  }

  peerStatus(): PeerStatus & { id: string; resolved: string | undefined; lastKod: string | undefined } {
    return { ...this.peer.status(), id: this.id, resolved: this.#resolved, lastKod: this.#lastKod };
  }

  start(): void {
    this.#schedule(0);
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        // A rejection here would be unhandled and end the process; log it and keep polling.
        this.#due().catch((err: unknown) => {
          this.#logger.error({ err: (err as Error).message }, 'peer poll failed');
          this.#schedule(Math.max(1000, 2 ** this.peer.poll * 1000));
        });
      },
      Math.max(0, delayMs),
    );
    this.#timer.unref();
  }

  async #ensureSocket(): Promise<Socket | undefined> {
    if (this.#socket) return this.#socket;
    if (this.#resolving) return undefined;
    this.#resolving = true;
    let socket: Socket | undefined;
    try {
      // With NTS the NTP server and port come from NTS-KE (Server/Port records, RFC 8915 §4.1.7-8).
      const host = this.#nts?.target?.host ?? this.#host;
      const address = isIP(host) ? host : (await lookup(host)).address;
      const s = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4');
      socket = s;
      s.on('error', (err) => {
        this.#logger.warn({ err: err.message }, 'peer socket error');
      });
      s.on('message', (msg) => {
        this.#onMessage(msg);
      });
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.connect(this.#nts?.target?.port ?? this.#port, address, () => {
          s.removeListener('error', reject);
          resolve();
        });
      });
      if (this.#closed) {
        s.close();
        return undefined;
      }
      this.#socket = s;
      this.#arrival = arrivalTime(s, this.#clock, this.#rxOptions);
      this.#transmit = this.#rxOptions.kernel ? transmitTime(s, this.#clock) : undefined;
      this.#resolved = address;
      this.#refId = addressRefId(address);
      this.#logger.info({ address }, 'peer resolved');
      return s;
    } catch (err) {
      // A socket that failed to connect is closed here, or every retry would leak one.
      try {
        socket?.close();
      } catch {
        /* already closed */
      }
      this.#logger.warn({ err: (err as Error).message }, 'cannot resolve or connect peer; retrying');
      return undefined;
    } finally {
      this.#resolving = false;
    }
  }

  async #due(): Promise<void> {
    if (this.#closed) return;
    if (this.#nts && !(await this.#nts.ready())) {
      this.#schedule(Math.max(1000, 2 ** this.peer.poll * 1000));
      return;
    }
    const socket = await this.#ensureSocket();
    if (this.#closed) return;
    const now = performance.now();
    if (!socket) {
      this.#schedule(Math.max(1000, 2 ** this.peer.poll * 1000));
      return;
    }
    if (this.peer.denied !== undefined) return;
    // Minpoll until LOCKED (ntp-peer.ts holdPoll).
    this.peer.holdPoll = this.#manager.state !== 'LOCKED';
    // A longer poll only once the estimate would hold over it (docs/clock-discipline.md "Acquisition").
    this.peer.freezePoll = !this.#manager.pollMayRise(this.id, 2 ** (this.peer.poll + 1));
    // T1 as late as possible: taken while building the request, sent right away; then replaced by the
    // kernel's transmit timestamp where there is one (kernel-tx-timestamp.ts).
    const t1Ms = performance.now();
    const plain = this.peer.request(now, this.#clock.read(false, t1Ms));
    const req = plain && this.#nts ? this.#nts.wrap(plain) : plain;
    if (req) {
      const tx = this.#transmit;
      tx?.beforeSend();
      // A connected socket sends synchronously: the datagram has reached the kernel when send() returns.
      socket.send(req, (err) => {
        if (err) this.#logger.debug({ err: err.message }, 'peer send failed');
      });
      this.#txPendingFromMs = undefined;
      if (tx) {
        const sentMs = tx.sent(t1Ms);
        if (sentMs === undefined) {
          // Queued later (a busy device queue): read soon, since a queued stamp keeps the socket
          // reporting an error condition to the event loop until it is read, and at the latest with
          // the reply.
          this.#txPendingFromMs = t1Ms;
          for (const ms of [1, 20, 200]) setTimeout(() => this.#lateTransmitStamp(), ms).unref();
        } else this.peer.transmitted(this.#clock.read(false, sentMs), sentMs);
      }
    }
    this.#schedule(this.peer.nextPollMs - performance.now());
  }

  #lateTransmitStamp(): void {
    const from = this.#txPendingFromMs;
    if (from === undefined || !this.#transmit) return;
    const sentMs = this.#transmit.sent(from);
    if (sentMs === undefined) return;
    this.#txPendingFromMs = undefined;
    this.peer.transmitted(this.#clock.read(false, sentMs), sentMs);
  }

  #onMessage(msg: Buffer): void {
    const perf = performance.now();
    // T4 first thing (kernel-rx-timestamp.ts); 'message' only fires once the socket, and so #arrival, is set.
    const t4 = this.#clock.read(false, this.#arrival?.at(perf) ?? perf);
    // A transmit stamp the kernel queued only after send() returned is read now, before the reply counts.
    this.#lateTransmitStamp();
    this.#txPendingFromMs = undefined;
    const inner = this.#nts ? this.#nts.unwrap(msg) : msg;
    if (inner === undefined) return;
    const result = this.peer.receive(inner, t4, perf);
    if (result.kind === 'sample') {
      // Every sample goes to the manager: this exchange's offset and delay, the filter's dispersion and
      // jitter (clock-filter.ts).
      this.#manager.addSample(this.id, {
        offsetS: result.offsetS,
        delayS: result.delayS,
        dispersionS: result.output.dispersionS,
        sampleDispersionS: result.sampleDispersionS,
        jitterS: result.output.jitterS,
        atMs: result.atMs,
      });
      if (this.#manager.heldBack(this.id)) this.peer.sampleHeldBack();
    } else if (result.kind === 'kod') {
      this.#lastKod = result.code;
      this.#logger.warn({ code: result.code, poll: this.peer.poll }, 'kiss-o-death from peer');
      this.#schedule(this.peer.nextPollMs - perf);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    const s = this.#socket;
    this.#socket = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
