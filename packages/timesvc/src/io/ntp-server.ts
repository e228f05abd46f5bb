import { createSocket, type RemoteInfo, type Socket, type SocketOptions } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@broadcast-ops/core';
import { fail } from '../errors.ts';
import {
  respond,
  type DropReason,
  type ResponderPolicy,
  type ServerSystemState,
} from '../domain/ntp-responder.ts';
import type { NtsResponder } from '../domain/nts-responder.ts';
import { arrivalTime, type ArrivalTime } from './kernel-rx-timestamp.ts';
import type { ServedClock } from './served-clock.ts';

/**
 * NTP server sockets (UDP, IPv4 and IPv6 as two sockets). Thin: the receive timestamp is taken first thing
 * in the 'message' handler, the domain decides, and the transmit timestamp is written into the reply
 * immediately before send() (RFC 5905 §8: T3 as late as possible). Counters are plain numbers read by the metrics collector,
 * so the hot path does no label hashing.
 */

export interface NtpServerCounters {
  requests: number;
  responses: number;
  kodRate: number;
  kodDeny: number;
  sendErrors: number;
  dropped: Record<DropReason, number>;
}

export interface NtpServerOptions {
  port: number;
  bind: { udp4?: string; udp6?: string };
  clock: ServedClock;
  state: () => ServerSystemState;
  policy: ResponderPolicy;
  logger: Logger;
  /** Kernel receive buffer; larger absorbs bursts (capped by net.core.rmem_max). */
  recvBufferSize?: number;
  /**
   * Subtracted from receive timestamps, ms, only where kernel receive timestamps are unavailable: the event
   * loop's typical wake-up latency (README "Accuracy"), by which the handler's own reading is late.
   */
  rxCorrectionMs?: number;
  /** Use kernel receive timestamps where available (default true). */
  kernelRxTimestamps?: boolean;
  /** NTS (RFC 8915 §5.7): requests with NTS fields are authenticated and answered sealed (nts-responder.ts). */
  nts?: NtsResponder | undefined;
}

export class NtpServer {
  readonly counters: NtpServerCounters = {
    requests: 0,
    responses: 0,
    kodRate: 0,
    kodDeny: 0,
    sendErrors: 0,
    dropped: { short: 0, not_client: 0, bad_version: 0, malformed: 0, authenticated: 0, rate_limited: 0 },
  };
  readonly #o: NtpServerOptions;
  readonly #sockets: Socket[] = [];
  /** Sockets with kernel receive timestamps. */
  #kernelRx = 0;
  readonly #onSent = (err: Error | null): void => {
    if (err) this.counters.sendErrors++;
  };

  constructor(options: NtpServerOptions) {
    this.#o = options;
  }

  /** 'kernel' when every socket has kernel receive timestamps, else 'userspace'. */
  get rxTimestamps(): 'kernel' | 'userspace' {
    return this.#sockets.length > 0 && this.#kernelRx === this.#sockets.length ? 'kernel' : 'userspace';
  }

  /** Bound addresses, e.g. for tests using port 0. */
  get addresses(): { family: 'IPv4' | 'IPv6'; address: string; port: number }[] {
    return this.#sockets.map((s) => {
      const a = s.address();
      return { family: a.family === 'IPv6' ? 'IPv6' : 'IPv4', address: a.address, port: a.port };
    });
  }

  async start(): Promise<void> {
    const { udp4, udp6 } = this.#o.bind;
    let port = this.#o.port;
    if (udp4 !== undefined) {
      const s = await this.#bind('udp4', udp4, port);
      port = s.address().port; // with port 0, IPv6 listens on the same port as IPv4
    }
    if (udp6 !== undefined) {
      try {
        await this.#bind('udp6', udp6, port);
      } catch (err) {
        if (udp4 === undefined) throw err;
        // A host without IPv6 still serves IPv4.
        this.#o.logger.warn({ err: (err as Error).message }, 'IPv6 NTP socket not available; IPv4 only');
      }
    }
  }

  #bind(type: 'udp4' | 'udp6', address: string, port: number): Promise<Socket> {
    // A synchronous lookup: replies go to IP literals, and without the default dns.lookup (which defers
    // to nextTick) send() reaches the kernel before it returns, right after the transmit timestamp.
    const lookup = syncLookup(type === 'udp6' ? 6 : 4) as unknown as SocketOptions['lookup'];
    const socket = createSocket(type === 'udp6' ? { type, ipv6Only: true, lookup } : { type, lookup });
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => {
        socket.close();
        reject(
          fail('NTP_BIND_FAILED', `cannot bind NTP ${type} ${address}:${port}: ${err.message}`, {
            cause: err,
          }),
        );
      };
      socket.once('error', onError);
      socket.bind(port, address, () => {
        socket.removeListener('error', onError);
        socket.on('error', (err) => {
          this.#o.logger.error({ err: err.message }, 'NTP socket error');
        });
        try {
          socket.setRecvBufferSize(this.#o.recvBufferSize ?? 4 * 1024 * 1024);
        } catch {
          /* the kernel caps it; keep the default */
        }
        const arrival = arrivalTime(socket, this.#o.clock, {
          kernel: this.#o.kernelRxTimestamps ?? true,
          correctionMs: this.#o.rxCorrectionMs ?? 0,
        });
        if (arrival.kernel) this.#kernelRx++;
        socket.on('message', (msg, rinfo) => {
          this.#onMessage(socket, arrival, msg, rinfo);
        });
        this.#sockets.push(socket);
        resolve(socket);
      });
    });
  }

  #onMessage(socket: Socket, arrival: ArrivalTime, msg: Buffer, rinfo: RemoteInfo): void {
    // Receive timestamp first, before anything else touches the packet (kernel-rx-timestamp.ts).
    const perf = performance.now();
    const clock = this.#o.clock;
    const rx = clock.read(true, arrival.at(perf));
    const c = this.counters;
    c.requests++;
    const out = respond(msg, rinfo.address, rx, perf, this.#o.state(), this.#o.policy);
    if (out.kind === 'drop') {
      c.dropped[out.reason]++;
      return;
    }
    if (out.kind === 'kod') {
      if (out.code === 'RATE') c.kodRate++;
      else c.kodDeny++;
    } else {
      const nts = this.#o.nts?.check(msg);
      if (nts !== undefined && nts.kind !== 'plain') {
        if (nts.kind === 'drop') return;
        if (nts.kind === 'nak') {
          socket.send(nts.packet, rinfo.port, rinfo.address, this.#onSent);
          return;
        }
        c.responses++;
        // The transmit timestamp is inside the authenticated data, so it is written just before sealing.
        clock.write(out.packet, 40, true);
        socket.send(nts.seal(out.packet), rinfo.port, rinfo.address, this.#onSent);
        return;
      }
      c.responses++;
      // Transmit timestamp as late as possible: immediately before the packet is handed to the kernel.
      clock.write(out.packet, 40, true);
    }
    socket.send(out.packet, rinfo.port, rinfo.address, this.#onSent);
  }

  async close(): Promise<void> {
    const sockets = this.#sockets.splice(0);
    this.#kernelRx = 0;
    await Promise.all(
      sockets.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => resolve());
          }),
      ),
    );
  }
}

/** dgram lookup that answers an IP literal synchronously, so send() reaches the kernel before it returns. */
function syncLookup(family: 4 | 6) {
  return (
    address: string,
    optionsOrCb: unknown,
    maybeCb?: (err: Error | null, address: string, family: number) => void,
  ): void => {
    const cb = (typeof optionsOrCb === 'function' ? optionsOrCb : maybeCb) as (
      err: Error | null,
      address: string,
      family: number,
    ) => void;
    cb(null, address, family);
  };
}
