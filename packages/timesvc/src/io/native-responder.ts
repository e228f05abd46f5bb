import { performance } from 'node:perf_hooks';
import type { Logger } from '@broadcast-ops/core';
import type { ResponderPolicy, ServerSystemState } from '../domain/ntp-responder.ts';
import type { NtsResponder } from '../domain/nts-responder.ts';
import type { LoggedClient } from '../domain/client-log.ts';
import type { BatchSocket } from './batch-socket.ts';
import {
  NATIVE_STATS,
  SERVED_FIELDS,
  networksArray,
  perfOriginNs,
  policyArray,
  servedArray,
} from './native-served.ts';
import type { ServedClock } from './served-clock.ts';
import type { Ticker } from './service-tick.ts';

/** How often the native threads' reply fields are checked against the clock state (a backstop). */
const STATE_CHECK_MS = 1000;

export type NativeStats = Record<(typeof NATIVE_STATS)[number], number>;

export interface NativeRespondersOptions {
  clock: ServedClock;
  state: () => ServerSystemState;
  policy: ResponderPolicy;
  nts?: NtsResponder | undefined;
  /** Subtracted from the thread's own arrival reading where kernel timestamps are off, ms. */
  rxCorrectionMs?: number | undefined;
  logger: Logger;
  /** The service's once-a-second tick for the state check (service-tick.ts); its own timer without. */
  tick?: Ticker | undefined;
}

/**
 * The native responder threads of one NTP server's batched sockets (native/mmsg.c startNative;
 * docs/performance.md "Native responder"): starts them where the served clock can be handed over, keeps
 * them supplied with the served clock's current linear piece, the reply fields and the NTS cookie master
 * keys, and reads their counters.
 */
export class NativeResponders {
  readonly #o: NativeRespondersOptions;
  readonly #sockets: BatchSocket[] = [];
  readonly #served = new Float64Array(SERVED_FIELDS);
  readonly #stats = new Float64Array(NATIVE_STATS.length);
  /** The reply fields last handed over, and where the piece handed over ends (monotonic ms). */
  #stateSent: ServerSystemState | undefined;
  #pieceEnd = Number.POSITIVE_INFINITY;
  readonly #timers: {
    piece?: NodeJS.Timeout | undefined;
    state?: NodeJS.Timeout | undefined;
    keys: Map<BatchSocket, NodeJS.Timeout>;
  } = {
    keys: new Map(),
  };
  /** Unsubscribes from the served clock's corrections (set by the first start). */
  #unsubscribe: (() => void) | undefined;
  /** The threads' authentic NTS count when they stopped (counters never go back). */
  #ntsAuthenticClosed = 0;
  #offTick: (() => void) | undefined;

  constructor(options: NativeRespondersOptions) {
    this.#o = options;
  }

  /** Whether any socket is served by a native thread. */
  get active(): boolean {
    return this.#sockets.length > 0;
  }

  /**
   * Hand `b` to a native thread, if the served clock can be handed over (the host's clock); false
   * otherwise (the socket stays with JavaScript).
   */
  start(b: BatchSocket, kernel: boolean): boolean {
    const o = this.#o;
    const piece = o.clock.linearPiece();
    if (piece === undefined) return false;
    b.startNative(
      perfOriginNs(),
      Float64Array.of(kernel ? 1 : 0, kernel ? 0 : (o.rxCorrectionMs ?? 0), o.nts ? 1 : 0),
      policyArray(o.policy),
      networksArray(o.policy),
      servedArray(this.#served, piece, o.state()),
    );
    this.#sockets.push(b);
    if (o.nts) this.#pushNtsKeys(b);
    if (this.#unsubscribe === undefined) {
      this.#unsubscribe = o.clock.onCorrection(() => this.refresh());
      // Kept after close: the NTS responder's counts include what the threads answered, for good.
      o.nts?.addElsewhere({
        authenticated: () => (this.active ? this.stats().ntsAuthentic : this.#ntsAuthenticClosed),
        activeSessions: (cutoffMs) => this.#sockets.reduce((n, s) => n + s.ntsActive(cutoffMs), 0),
      });
      const check = (): void => {
        if (o.state() !== this.#stateSent) this.refresh();
      };
      if (o.tick) this.#offTick = o.tick.every(check);
      else {
        this.#timers.state = setInterval(check, STATE_CHECK_MS);
        this.#timers.state.unref();
      }
    }
    this.refresh();
    return true;
  }

  /**
   * Hand the threads a new piece of the served clock and the current reply fields; called on every change
   * of the correction (the service sets it on every clock-manager event, new reply fields included), at the
   * end of each piece, and when the once-a-second check finds the clock state changed.
   */
  refresh(): void {
    if (!this.active) return;
    const now = performance.now();
    const piece = this.#o.clock.linearPiece(now);
    const state = this.#o.state();
    servedArray(this.#served, piece, state);
    for (const b of this.#sockets) b.setServed(this.#served);
    this.#stateSent = state;
    this.#pieceEnd = piece?.p1 ?? Number.POSITIVE_INFINITY;
    if (this.#timers.piece) clearTimeout(this.#timers.piece);
    this.#timers.piece = undefined;
    if (Number.isFinite(this.#pieceEnd)) {
      // At the break itself (setTimeout rounds down to whole ms; the native side stops 1 ms before).
      this.#timers.piece = setTimeout(() => this.refresh(), Math.max(0, Math.ceil(this.#pieceEnd - now)));
      this.#timers.piece.unref();
    }
  }

  /** Whether what the threads hold is out of date at `perf` for `state` (JavaScript then refreshes first). */
  stale(state: ServerSystemState, perf: number): boolean {
    return state !== this.#stateSent || perf >= this.#pieceEnd - 1;
  }

  /**
   * Hand a thread the cookie master keys, again when the current one changes (daily): until then a cookie
   * under the new key is opened by JavaScript, as is everything the native thread cannot.
   */
  #pushNtsKeys(b: BatchSocket): void {
    const jar = this.#o.nts?.cookies;
    if (!jar || b.closed) return;
    const k = jar.masterKeys();
    if (!b.setNtsKeys(k.current, k.ids, k.keys)) {
      this.#o.logger.warn('NTS keys not handed to the native responder');
    }
    k.keys.fill(0);
    const timer = setTimeout(
      () => this.#pushNtsKeys(b),
      Math.max(1000, Math.min(k.rotatesInMs + 10, 3_600_000)),
    );
    timer.unref();
    this.#timers.keys.set(b, timer);
  }

  /** The threads' counters summed over the sockets (the largest batch: the largest of them). */
  stats(): NativeStats {
    const sum = Object.fromEntries(NATIVE_STATS.map((k) => [k, 0])) as NativeStats;
    for (const b of this.#sockets) {
      b.stats(this.#stats);
      NATIVE_STATS.forEach((k, i) => {
        const v = this.#stats[i] ?? 0;
        sum[k] = k === 'largest' ? Math.max(sum[k], v) : sum[k] + v;
      });
    }
    return sum;
  }

  /** The threads' client logs (each most recently seen first, at most `max`); merged by the caller. */
  clients(max: number): LoggedClient[] {
    const bits = this.#o.policy.rateLimiter?.options.ipv6PrefixBits ?? 64;
    return this.#sockets.flatMap((b) => b.clients(max, bits));
  }

  /** Stop supplying the threads (their sockets are closed by the server); the NTS count stays readable. */
  close(): void {
    if (this.active) this.#ntsAuthenticClosed = this.stats().ntsAuthentic;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    if (this.#timers.piece) clearTimeout(this.#timers.piece);
    if (this.#timers.state) clearInterval(this.#timers.state);
    this.#offTick?.();
    this.#offTick = undefined;
    for (const t of this.#timers.keys.values()) clearTimeout(t);
    this.#timers.keys.clear();
    this.#sockets.length = 0;
  }
}
