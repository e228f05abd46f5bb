import { createHash } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@broadcast-ops/core';
import type { ClockManager, ReferenceSource, ReferenceStatus } from '../domain/clock-manager.ts';
import { ipv4RefId } from '../domain/clock-manager.ts';
import { expandIpv6 } from '../domain/rate-limiter.ts';
import { NtpPeer, type PeerConfig, type PeerStatus } from '../domain/ntp-peer.ts';
import { kernelRxDelay } from './kernel-rx-timestamp.ts';
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
  readonly #rxCorrectionMs: number;
  /** Kernel receive delay of the reply being handled (kernel-rx-timestamp.ts); undefined: userspace. */
  #rxDelay: ((nowUnixMs: number) => number | undefined) | undefined;
  readonly #kernelRx: boolean;

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
  }) {
    this.#rxCorrectionMs = options.rxCorrectionMs ?? 0;
    this.#kernelRx = options.kernelRxTimestamps ?? true;
    this.#host = options.host;
    this.#port = options.port;
    this.id = options.host.includes(':')
      ? `NTP:[${options.host}]:${options.port}`
      : `NTP:${options.host}:${options.port}`;
    this.prefer = options.config.prefer;
    this.peer = new NtpPeer(options.config, performance.now(), options.precision);
    this.#clock = options.clock;
    this.#manager = options.manager;
    this.#logger = options.logger.child({ peer: this.id });
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
    this.#timer = setTimeout(() => void this.#due(), Math.max(0, delayMs));
    this.#timer.unref();
  }

  async #ensureSocket(): Promise<Socket | undefined> {
    if (this.#socket) return this.#socket;
    if (this.#resolving) return undefined;
    this.#resolving = true;
    try {
      const address = isIP(this.#host) ? this.#host : (await lookup(this.#host)).address;
      const family = isIP(address);
      const socket = createSocket(family === 6 ? 'udp6' : 'udp4');
      socket.on('error', (err) => {
        this.#logger.warn({ err: err.message }, 'peer socket error');
      });
      socket.on('message', (msg) => {
        this.#onMessage(msg);
      });
      await new Promise<void>((resolve, reject) => {
        socket.once('error', reject);
        socket.connect(this.#port, address, () => {
          socket.removeListener('error', reject);
          resolve();
        });
      });
      if (this.#closed) {
        socket.close();
        return undefined;
      }
      this.#socket = socket;
      this.#rxDelay = this.#kernelRx ? kernelRxDelay(socket) : undefined;
      this.#resolved = address;
      // RFC 5905 §7.3: refid = the IPv4 address, or the first 4 octets of the MD5 of the IPv6 address.
      this.#refId =
        family === 4
          ? ipv4RefId(address)
          : createHash('md5').update(ipv6Bytes(address)).digest().readUInt32BE(0);
      this.#logger.info({ address }, 'peer resolved');
      return socket;
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'cannot resolve or connect peer; retrying');
      return undefined;
    } finally {
      this.#resolving = false;
    }
  }

  async #due(): Promise<void> {
    if (this.#closed) return;
    const socket = await this.#ensureSocket();
    const now = performance.now();
    if (!socket) {
      this.#schedule(Math.max(1000, 2 ** this.peer.poll * 1000));
      return;
    }
    if (this.peer.denied !== undefined) return;
    // T1 as late as possible: taken while building the request, sent right away.
    const req = this.peer.request(now, this.#clock.read(false));
    if (req) {
      socket.send(req, (err) => {
        if (err) this.#logger.debug({ err: err.message }, 'peer send failed');
      });
    }
    this.#schedule(this.peer.nextPollMs - performance.now());
  }

  #onMessage(msg: Buffer): void {
    const perf = performance.now();
    // T4: the kernel's arrival time where available (RFC 5905 §8), else this handler's reading.
    const delay = this.#rxDelay?.(this.#clock.rawUnixMs(perf));
    const t4 = this.#clock.read(false, perf - (delay ?? this.#rxCorrectionMs));
    const result = this.peer.receive(msg, t4, perf);
    if (result.kind === 'sample') {
      if (result.output.fresh) {
        this.#manager.addSample(this.id, {
          offsetS: result.output.offsetS,
          delayS: result.output.delayS,
          dispersionS: result.output.dispersionS,
          jitterS: result.output.jitterS,
          atMs: result.output.atMs,
        });
      }
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

function ipv6Bytes(address: string): Buffer {
  const buf = Buffer.alloc(16);
  (expandIpv6(address) ?? []).forEach((g, i) => buf.writeUInt16BE(g & 0xffff, i * 2));
  return buf;
}
