import type { Logger } from '@broadcast-ops/core';
import { NtsClientSession } from '../domain/nts-client-session.ts';
import { ntsKeyExchange, type KeClientResult } from './nts-ke-client.ts';

/**
 * NTS for one upstream peer (RFC 8915 §5.7), the narrow seam PeerClient uses: `ready()` before a poll
 * (runs NTS-KE when there is no session, the cookies ran out or an NTSN arrived; attempts are spaced
 * by a doubling back-off), `wrap()` on the 48-byte request and `unwrap()` on each datagram, which hands
 * back the 48-byte header only when the reply is authentic. Unauthenticated replies never reach the clock
 * filter, so an NTS peer feeds the same selection as a plain one with only authentic samples.
 */

export interface NtsPeerStatus {
  keExchanges: number;
  keFailures: number;
  authenticated: number;
  rejected: number;
  naks: number;
  cookies: number;
  ntpTarget: { host: string; port: number } | undefined;
  lastError: string | undefined;
}

export interface NtsPeerOptions {
  host: string;
  kePort: number;
  caFile?: string | undefined;
  logger: Logger;
  /** Monotonic ms. */
  now: () => number;
  /** First and largest spacing of NTS-KE retries, ms (defaults 2 s and 1 h). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Injected for tests; defaults to the real NTS-KE client. */
  exchange?: typeof ntsKeyExchange;
}

export class NtsPeerSecurity {
  readonly #o: NtsPeerOptions;
  #session: NtsClientSession | undefined;
  #target: { host: string; port: number } | undefined;
  #needKe = true;
  #nextAttemptMs = 0;
  #backoffMs: number;
  #inFlight: Promise<boolean> | undefined;
  readonly counters = { keExchanges: 0, keFailures: 0, authenticated: 0, rejected: 0, naks: 0 };
  #lastError: string | undefined;

  constructor(options: NtsPeerOptions) {
    this.#o = options;
    this.#backoffMs = options.minBackoffMs ?? 2000;
  }

  /** Where NTP goes (Server/Port records of the last NTS-KE); undefined before the first one. */
  get target(): { host: string; port: number } | undefined {
    return this.#target;
  }

  status(): NtsPeerStatus {
    return {
      ...this.counters,
      cookies: this.#session?.cookieCount ?? 0,
      ntpTarget: this.#target,
      lastError: this.#lastError,
    };
  }

  /** True when a session with cookies exists; runs NTS-KE first when needed and allowed. */
  ready(): Promise<boolean> {
    if (!this.#needKe && this.#session && this.#session.cookieCount > 0) return Promise.resolve(true);
    if (this.#o.now() < this.#nextAttemptMs) return Promise.resolve(false);
    this.#inFlight ??= this.#keyExchange().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #keyExchange(): Promise<boolean> {
    let ke: KeClientResult;
    try {
      ke = await (this.#o.exchange ?? ntsKeyExchange)({
        host: this.#o.host,
        port: this.#o.kePort,
        caFile: this.#o.caFile,
      });
    } catch (err) {
      this.counters.keFailures++;
      this.#lastError = (err as Error).message;
      this.#nextAttemptMs = this.#o.now() + this.#backoffMs;
      this.#o.logger.warn({ err: this.#lastError, retryMs: this.#backoffMs }, 'NTS-KE failed');
      this.#backoffMs = Math.min(this.#backoffMs * 2, this.#o.maxBackoffMs ?? 3_600_000);
      return false;
    }
    this.counters.keExchanges++;
    this.#session = new NtsClientSession(ke, ke.cookies);
    this.#target = { host: ke.ntpHost, port: ke.ntpPort };
    this.#needKe = false;
    this.#lastError = undefined;
    this.#backoffMs = this.#o.minBackoffMs ?? 2000;
    // Spacing between successive exchanges also when they succeed (a server answering NTSN every time).
    this.#nextAttemptMs = this.#o.now() + this.#backoffMs;
    this.#o.logger.info({ cookies: ke.cookies.length, ntp: this.#target }, 'NTS-KE complete');
    return true;
  }

  /** The request with NTS fields, or undefined when no cookie is left (the next ready() re-keys). */
  wrap(request: Uint8Array): Buffer | undefined {
    const out = this.#session?.wrap(request);
    if (out === undefined) this.#needKe = true;
    return out;
  }

  /** The authentic reply's 48-byte header, or undefined (dropped: not authentic, or an NTSN). */
  unwrap(datagram: Uint8Array): Buffer | undefined {
    const check = this.#session?.unwrap(datagram);
    if (check === undefined) return undefined;
    if (check.kind === 'authentic') {
      this.counters.authenticated++;
      if ((this.#session?.cookieCount ?? 0) === 0) this.#needKe = true;
      return check.header;
    }
    if (check.kind === 'nak') {
      this.counters.naks++;
      this.#needKe = true;
      this.#o.logger.warn('NTSN from server: cookies refused, re-running NTS-KE');
      return undefined;
    }
    this.counters.rejected++;
    this.#o.logger.debug({ reason: check.reason }, 'NTS reply rejected');
    return undefined;
  }
}
