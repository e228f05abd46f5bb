import { createSocket, type RemoteInfo, type Socket, type SocketOptions } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@broadcast-ops/core';
import { fail } from '../errors.ts';
import {
  DROP_REASONS,
  OUTCOME,
  respond,
  respondInto,
  type DropReason,
  type ResponderPolicy,
  type ServerSystemState,
} from '../domain/ntp-responder.ts';
import { type ClientLogRecord, reportClients } from '../domain/client-log.ts';
import type { NtsResponder } from '../domain/nts-responder.ts';
import { NTP_HEADER_LENGTH } from '../protocol/ntp-packet.ts';
import { ADDR_BYTES, BatchSocket, MAX_CLIENT_REPORT, TX_STAMP } from './batch-socket.ts';
import {
  arrivalTime,
  checkedKernelStamp,
  kernelMappingFresh,
  type ArrivalTime,
} from './kernel-rx-timestamp.ts';
import type { ServedClock } from './served-clock.ts';
import { NativeResponders } from './native-responder.ts';
import type { Ticker } from './service-tick.ts';

/**
 * NTP server sockets (UDP, IPv4 and IPv6 as two sockets). Thin: the receive timestamp is the kernel's (or
 * taken first thing on arrival), the domain decides, and the transmit timestamp is written into the reply
 * immediately before it is handed to the kernel (RFC 5905 §8: T3 as late as possible). Counters are plain
 * numbers read by the metrics collector, so the hot path does no label hashing.
 *
 * Two socket paths (docs/performance.md "Batched socket path"): batched (native/mmsg.c: recvmmsg with each
 * datagram's kernel receive timestamp, one call into JavaScript per batch, replies by sendmmsg) wherever
 * the addon is built and `batchedIo` is not false; otherwise Node's dgram, one receive and one send per
 * request, with the receive timestamp from the SIOCGSTAMPNS ioctl (kernel-rx-timestamp.ts).
 *
 * On the batched path with the host's clock, the addon's own thread reads the socket and answers plain
 * requests itself (docs/performance.md "Native responder"): it is handed the served clock as one linear
 * piece at a time (refreshed on every change of the correction and at the piece's end), the reply fields
 * of the clock state, and the policy. Requests with extension fields (NTS) and any it has no piece for
 * come here, already counted and with the policy applied.
 */

/** Batches handled per readiness callback before yielding to the event loop (it calls again if more wait). */
const MAX_BATCHES_PER_WAKE = 4;

export interface NtpServerCounters {
  requests: number;
  responses: number;
  kodRate: number;
  kodDeny: number;
  sendErrors: number;
  dropped: Record<DropReason | 'overload', number>;
}

function zeroCounters(): NtpServerCounters {
  return {
    requests: 0,
    responses: 0,
    kodRate: 0,
    kodDeny: 0,
    sendErrors: 0,
    dropped: {
      short: 0,
      not_client: 0,
      bad_version: 0,
      malformed: 0,
      authenticated: 0,
      rate_limited: 0,
      overload: 0,
    },
  };
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
  /** Use the batched socket path where the addon is built (default true). */
  batchedIo?: boolean;
  /** Datagrams per batch on the batched path (default 64, at most 256). */
  batchSize?: number;
  /** Answer plain requests on the addon's thread where possible (default true). */
  nativeResponder?: boolean;
  /** The service's once-a-second tick (service-tick.ts), for the native threads' state check. */
  tick?: Ticker | undefined;
}

export class NtpServer {
  /** What this thread counted; the native thread's counts are added on reading (counters). */
  readonly #c: NtpServerCounters = zeroCounters();
  readonly #batchStats = { batches: 0, datagrams: 0, largest: 0 };
  /** The native responder threads of the batched sockets (native-responder.ts). */
  readonly #natives: NativeResponders;
  readonly #o: NtpServerOptions;
  readonly #sockets: Socket[] = [];
  readonly #batched: BatchSocket[] = [];
  /** Sockets with kernel receive timestamps. */
  #kernelRx = 0;
  readonly #onSent = (err: Error | null): void => {
    if (err) this.#c.sendErrors++;
  };

  constructor(options: NtpServerOptions) {
    this.#o = options;
    this.#natives = new NativeResponders(options);
  }

  /** Requests, replies and drops so far, of this thread and the native one (read at scrape time). */
  get counters(): NtpServerCounters {
    const c = this.#c;
    if (!this.#natives.active) return c;
    const n = this.#natives.stats();
    const d = c.dropped;
    return {
      requests: c.requests + n.requests,
      responses: c.responses + n.responses,
      kodRate: c.kodRate + n.kodRate,
      kodDeny: c.kodDeny + n.kodDeny,
      sendErrors: c.sendErrors + n.sendErrors,
      dropped: {
        short: d.short + n.short,
        not_client: d.not_client + n.not_client,
        bad_version: d.bad_version + n.bad_version,
        malformed: d.malformed + n.malformed,
        authenticated: d.authenticated + n.authenticated,
        rate_limited: d.rate_limited + n.rate_limited,
        overload: d.overload + n.overload,
      },
    };
  }

  /**
   * Batched path: batches taken, datagrams in them, the largest batch (bounded by batchSize); with the
   * native responder, its batches (the datagrams it passed on are counted in `forwarded`).
   */
  get batchStats(): { batches: number; datagrams: number; largest: number; forwarded: number } {
    const s = this.#batchStats;
    if (!this.#natives.active) return { ...s, forwarded: 0 };
    const n = this.#natives.stats();
    return { batches: n.batches, datagrams: n.datagrams, largest: n.largest, forwarded: n.forwarded };
  }

  /** Kernel receive timestamps the native thread did not use (outside their window, or missing). */
  get nativeKernelStampsReplaced(): number {
    return this.#natives.active ? this.#natives.stats().kernelReplaced : 0;
  }

  /**
   * The client log (chronyc `clients`, docs/cli.md "clients"): the native threads' and this thread's
   * rate-limiter tables merged, most recently seen first, at most `max` (≤ MAX_CLIENT_REPORT).
   */
  clients(max: number): ClientLogRecord[] {
    const m = Math.max(0, Math.min(MAX_CLIENT_REPORT, Math.floor(max)));
    const js = this.#o.policy.rateLimiter?.clients(m) ?? [];
    const logs = this.#natives.active ? [...this.#natives.clients(m), ...js] : js;
    return reportClients(logs, performance.now(), m);
  }

  /** 'native' when plain requests are answered on the addon's thread (docs/performance.md). */
  get responder(): 'native' | 'javascript' {
    return this.#natives.active ? 'native' : 'javascript';
  }

  /** 'kernel' when every socket has kernel receive timestamps, else 'userspace'. */
  get rxTimestamps(): 'kernel' | 'userspace' {
    const n = this.#sockets.length + this.#batched.length;
    return n > 0 && this.#kernelRx === n ? 'kernel' : 'userspace';
  }

  /** 'batched' when every socket uses the batched path (native/mmsg.c), else 'dgram'. */
  get socketPath(): 'batched' | 'dgram' {
    return this.#batched.length > 0 && this.#sockets.length === 0 ? 'batched' : 'dgram';
  }

  /** Bound addresses, e.g. for tests using port 0. */
  get addresses(): { family: 'IPv4' | 'IPv6'; address: string; port: number }[] {
    return [
      ...this.#batched.map((b) => ({
        family: b.family === 6 ? ('IPv6' as const) : ('IPv4' as const),
        address: b.address,
        port: b.port,
      })),
      ...this.#sockets.map((s) => {
        const a = s.address();
        return {
          family: a.family === 'IPv6' ? ('IPv6' as const) : ('IPv4' as const),
          address: a.address,
          port: a.port,
        };
      }),
    ];
  }

  async start(): Promise<void> {
    const { udp4, udp6 } = this.#o.bind;
    let port = this.#o.port;
    if (udp4 !== undefined) {
      port = await this.#bind('udp4', udp4, port); // with port 0, IPv6 listens on the same port as IPv4
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

  /** Bind one socket, batched where possible; resolves with the bound port. */
  async #bind(type: 'udp4' | 'udp6', address: string, port: number): Promise<number> {
    if (this.#o.batchedIo ?? true) {
      const kernel = this.#o.kernelRxTimestamps ?? true;
      let b: BatchSocket | undefined;
      try {
        b = BatchSocket.bind(
          {
            family: type === 'udp6' ? 6 : 4,
            address,
            port,
            recvBufferSize: this.#o.recvBufferSize ?? 4 * 1024 * 1024,
            timestamps: kernel,
            ...(this.#o.batchSize !== undefined ? { batch: this.#o.batchSize } : {}),
          },
          (count) => {
            if (b) this.#onBatches(b, count);
          },
        );
      } catch (err) {
        throw fail(
          'NTP_BIND_FAILED',
          `cannot bind NTP ${type} ${address}:${port}: ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
      if (b) {
        if (kernel) this.#kernelRx++;
        this.#batched.push(b);
        if (this.#o.nativeResponder ?? true) this.#natives.start(b, kernel);
        return b.port;
      }
    }
    return (await this.#bindDgram(type, address, port)).address().port;
  }

  #bindDgram(type: 'udp4' | 'udp6', address: string, port: number): Promise<Socket> {
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
    const c = this.#c;
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

  /**
   * The batched path, called with the first batch already taken: answer it, and take another only while
   * the previous one was full (a short batch means the queue was empty a moment ago, and the next wake-up
   * costs less than a recvmmsg that finds nothing), at most MAX_BATCHES_PER_WAKE, so timers and the web
   * app still get their turn. Per batch: one reading of the clocks, then per datagram the decision written
   * straight into its send slot (nothing allocated for a plain request), then one sendmmsg for the
   * replies, the addon writing their transmit timestamps just before it.
   */
  #onBatches(b: BatchSocket, first: number): void {
    let n = first;
    if (n < 0) {
      this.#o.logger.error({ errno: -n }, 'NTP socket receive error');
      return;
    }
    for (let round = 1; ; round++) {
      try {
        this.#handleBatch(b, n);
      } catch (err) {
        // A bug must not stop the server; the batch's remaining requests are lost.
        this.#o.logger.error({ err: (err as Error).message }, 'NTP batch handler failed');
      }
      if (n < b.batch || round >= MAX_BATCHES_PER_WAKE || b.closed) return;
      n = b.recv();
      if (n <= 0) {
        if (n < 0) this.#o.logger.error({ errno: -n }, 'NTP socket receive error');
        return;
      }
    }
  }

  #handleBatch(b: BatchSocket, n: number): void {
    const o = this.#o;
    const c = this.#c;
    const clock = o.clock;
    const stats = this.#batchStats;
    stats.batches++;
    stats.datagrams += n;
    if (n > stats.largest) stats.largest = n;
    const perf = performance.now();
    const state = o.state();
    // From the native thread: counted there, the policy applied there.
    const native = b.native;
    const policy = native ? NO_POLICY : o.policy;
    if (native && this.#natives.stale(state, perf)) this.#natives.refresh();
    // Address text only for an access list; the rate limiter keys clients from the raw address bytes.
    const needAddress = policy.access !== undefined;
    const correctionMs = o.rxCorrectionMs ?? 0;
    // Kernel receive timestamps are CLOCK_REALTIME: carried onto the served clock's time base by the same
    // rules as the dgram path (kernel-rx-timestamp.ts): the mapping checked once per batch against the
    // realtime clock read directly, each timestamp within [read − window, read]; a timestamp that fails
    // (the host clock stepped, a leap second too) gives way to the handler's own reading, counted.
    const kernel = b.timestamps;
    const fresh = kernel && kernelMappingFresh(clock);
    const rx = b.rxBuf;
    const tx = b.txBuf;
    const slot = b.slot;
    let out = 0;
    for (let i = 0; i < n; i++) {
      if (!native) c.requests++;
      const len = b.rxLen[i] ?? 0;
      if (len < 0) {
        c.dropped.malformed++; // longer than a slot (bounded, native/mmsg.c)
        continue;
      }
      let at = perf - correctionMs;
      if (kernel) {
        const stamped = fresh ? checkedKernelStamp(clock, b.rxStamp[i] ?? 0, perf) : undefined;
        if (stamped === undefined) clock.kernelStampsReplaced++;
        else at = stamped;
      }
      const off = i * slot;
      const txOff = out * slot;
      const code = respondInto(
        rx,
        off,
        len,
        needAddress ? b.sourceAddress(i) : '',
        at,
        state,
        policy,
        tx,
        txOff,
        b.rxAddr,
        i * ADDR_BYTES,
      );
      if (code >= OUTCOME.DROP_SHORT) {
        c.dropped[DROP_REASONS[code - OUTCOME.DROP_SHORT] ?? 'malformed']++;
        continue;
      }
      b.txFrom[out] = i;
      b.txLen[out] = NTP_HEADER_LENGTH;
      if (code !== OUTCOME.REPLY) {
        if (code === OUTCOME.KOD_RATE) c.kodRate++;
        else c.kodDeny++;
        b.txFlags[out] = 0;
        out++;
        continue;
      }
      clock.write(tx, txOff + 32, true, at);
      if (o.nts !== undefined && len > NTP_HEADER_LENGTH) {
        const nts = o.nts.check(rx.subarray(off, off + len));
        if (nts.kind === 'drop') continue;
        if (nts.kind === 'nak') {
          out = this.#queue(b, out, i, nts.packet);
          continue;
        }
        if (nts.kind === 'authentic') {
          c.responses++;
          // The transmit timestamp is inside the authenticated data, so it is written just before sealing;
          // the sealed reply is then sent at once (with what is queued before it), so the time between
          // its T3 and the kernel is one seal, as on the dgram path.
          if (nts.length > slot) {
            c.sendErrors++; // cannot happen: a reply is never longer than its request (nts-responder.ts)
            continue;
          }
          clock.write(tx, txOff + 40, true);
          b.txLen[out] = nts.sealInto(tx, txOff);
          b.txFrom[out] = i;
          b.txFlags[out] = 0;
          out = this.#flush(b, out + 1);
          continue;
        }
      }
      c.responses++;
      b.txFlags[out] = TX_STAMP;
      out++;
    }
    this.#flush(b, out);
  }

  /** Put a finished reply (NTS) into send slot `out`; returns the next free slot. */
  #queue(b: BatchSocket, out: number, from: number, packet: Uint8Array): number {
    if (packet.length > b.slot) {
      this.#c.sendErrors++;
      return out;
    }
    b.txBuf.set(packet, out * b.slot);
    b.txLen[out] = packet.length;
    b.txFrom[out] = from;
    b.txFlags[out] = 0;
    return out + 1;
  }

  /** Send slots 0..count-1; the served time read here is the transmit timestamp of the TX_STAMP ones. */
  #flush(b: BatchSocket, count: number): number {
    if (count === 0) return 0;
    const t3 = this.#o.clock.read(true);
    this.#c.sendErrors += b.send(count, t3.seconds, t3.fraction);
    return 0;
  }

  async close(): Promise<void> {
    // The native counts stay readable after close (a last scrape): keep them in this thread's counters.
    const last = this.counters;
    Object.assign(this.#c, last, { dropped: { ...last.dropped } });
    this.#natives.close();
    for (const b of this.#batched.splice(0)) b.close();
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

const NO_POLICY: ResponderPolicy = Object.freeze({});

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
