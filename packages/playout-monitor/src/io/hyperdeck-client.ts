/**
 * HyperDeck client for one `tcp_recorder` server (docs/PROTOCOLS.md, "HyperDeck"): a persistent TCP
 * connection that waits for the `500 connection info` banner, enables transport and slot notifications
 * (and display-timecode notifications from protocol 1.11 on), sets a watchdog, asks `transport info` (and
 * polls it, since decks push 508 on changes but not the running timecode), gets the clip list with
 * `clips get` when the clip or slot changes (a clip id missing from the list is looked up again at most
 * every `clipsRefreshMinMs`), pings to keep the link alive, and reconnects with capped exponential backoff
 * (1 s × 2ⁿ up to 30 s, ±20 % jitter).
 * One command is in flight at a time and each must be answered within `replyTimeoutMs`: replies carry no
 * command id, so after a lost reply every later reply would be matched to the wrong command; the
 * connection is dropped and reopened instead (the device shows `offline` with the reason until then).
 * `120 connection rejected` (another client holds the deck) is reported as the offline reason.
 */
import { Socket } from 'node:net';
import type { Logger, TimerHandle } from '@broadcast-ops/core';
import type { TcpServerConfig } from '../config.ts';
import { reconnectDelayMs } from '../domain/backoff.ts';
import type { DeviceStore } from '../domain/device-store.ts';
import { HyperdeckReducer } from '../domain/hyperdeck-reducer.ts';
import {
  encodeCommand,
  HD,
  HyperdeckReader,
  isAsync,
  clipsInfoFrom,
  connectionInfoFrom,
  displayTimecodeFrom,
  protocolVersionFrom,
  transportInfoFrom,
  versionAtLeast,
  type HyperdeckResponse,
} from '../protocol/hyperdeck.ts';
import { deadlineUnlessSettled } from './deadline.ts';
import type { InputContext } from './input-context.ts';
import { scheduleRetry } from './retry-grid.ts';

export interface HyperdeckClientOptions extends InputContext {
  server: TcpServerConfig;
  port: number;
  /** Jitter source (tests pass a constant). */
  random?: () => number;
}

interface Pending {
  command: string;
  name: string;
  onResponse: (r: HyperdeckResponse) => void;
  /** Monotonic ms when it was written (in flight only). */
  sentAt?: number;
}

const MAX_QUEUE = 16;

export class HyperdeckClient {
  readonly #o: HyperdeckClientOptions;
  readonly #reducer: HyperdeckReducer;
  readonly #logger: Logger;
  #socket: Socket | undefined;
  #reader = new HyperdeckReader();
  #queue: Pending[] = [];
  #inFlight: Pending | undefined;
  /** Armed timers of the current connection; each removes itself when it fires, so the set stays small. */
  readonly #timers = new Set<TimerHandle>();
  #reconnectTimer: TimerHandle | undefined;
  #attempt = 0;
  #closed = false;
  #session = false;
  #lastRxAt = 0;
  #lastTxAt = 0;
  #closeReason: string | undefined;
  #wasConnected = false;
  #rejectionLogged = false;
  /** Slot and clip id the clip list was last fetched for, and when. */
  #clipsFetchedFor: string | undefined;
  #clipsFetchedAt = -Infinity;
  #displayTimecodeNotify = false;

  constructor(options: HyperdeckClientOptions) {
    this.#o = options;
    this.#logger = options.logger.child({ device: options.server.id });
    this.#reducer = new HyperdeckReducer({
      framerate: options.server.framerate,
      defaultFramerate: options.defaultFramerate,
    });
  }

  start(): void {
    this.#connect();
  }

  #apply(patch: Parameters<DeviceStore['apply']>[1], fromDevice: boolean): void {
    this.#o.store.apply(this.#o.server.id, patch, fromDevice);
  }

  #connect(): void {
    if (this.#closed) return;
    this.#queue = [];
    this.#inFlight = undefined;
    this.#session = false;
    this.#closeReason = undefined;
    this.#clipsFetchedFor = undefined;
    this.#clipsFetchedAt = -Infinity;
    this.#displayTimecodeNotify = false;
    // While connecting, the socket has only what a refusal needs, and at most one timer: the banner's
    // deadline (`timeoutMs`). An absent deck is tried every 5 s all day, and each attempt is refused within
    // the same turn of the event loop: the 250 ms watchdog, the UTF-8 decoder and the data listener are set
    // up once the connection is open (docs/performance.md "At rest"). A 250 ms timer armed and cancelled per
    // attempt also cost an empty wake of the process 250 ms later (io/deadline.ts).
    const socket = new Socket();
    this.#socket = socket;
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A deck that goes away with our request unread resets the connection rather than closing it.
      this.#closeReason ??=
        err.code === 'ECONNREFUSED'
          ? 'connection refused'
          : err.code === 'ECONNRESET'
            ? 'connection reset'
            : `socket error: ${err.message}`;
    });
    socket.on('close', () => this.#onClose(socket));
    socket.once('connect', () => {
      if (this.#socket !== socket) return;
      this.#cancelTimers();
      this.#reader = new HyperdeckReader();
      socket.setNoDelay(true);
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => this.#onData(chunk));
      this.#armWatchdog();
    });
    this.#lastRxAt = this.#o.clock.monotonicMs();
    socket.connect({ host: this.#o.server.ip, port: this.#o.port });
    // The banner's deadline while connecting; none when the attempt is refused within this turn (io/deadline.ts).
    const deadline = deadlineUnlessSettled(
      this.#o.clock,
      this.#o.server.timeoutMs,
      () => this.#socket !== socket || !socket.connecting,
      () => {
        this.#timers.delete(deadline);
        if (!this.#closed && this.#socket === socket) this.#drop('no connection banner');
      },
    );
    this.#timers.add(deadline);
  }

  #armWatchdog(): void {
    // Silence for longer than timeoutMs (no banner, no reply to polls or pings) ends the connection.
    // A command unanswered for replyTimeoutMs is a lost reply, even while 508s keep arriving.
    this.#every(250, () => {
      const now = this.#o.clock.monotonicMs();
      const pending = this.#inFlight;
      if (pending?.sentAt !== undefined && now - pending.sentAt > this.#o.server.replyTimeoutMs) {
        this.#logger.warn({ command: pending.name }, 'HyperDeck reply lost: reconnecting to resynchronise');
        this.#drop(`no reply to "${pending.name}" within ${this.#o.server.replyTimeoutMs} ms`);
      } else if (now - this.#lastRxAt > this.#o.server.timeoutMs) {
        this.#drop(this.#session ? `no reply for ${this.#o.server.timeoutMs} ms` : 'no connection banner');
      }
    });
  }

  #cancelTimers(): void {
    for (const t of this.#timers) t.cancel();
    this.#timers.clear();
  }

  #drop(reason: string): void {
    this.#closeReason ??= reason;
    this.#socket?.destroy();
  }

  #onClose(socket: Socket): void {
    if (socket !== this.#socket) return;
    this.#socket = undefined;
    this.#cancelTimers();
    const reason = this.#closeReason ?? 'connection closed';
    if (this.#wasConnected || this.#attempt === 0) this.#logger.warn({ reason }, 'HyperDeck offline');
    this.#wasConnected = false;
    this.#apply(this.#reducer.onDisconnected(reason), false);
    if (this.#closed) return;
    const s = this.#o.server;
    const delay = reconnectDelayMs(
      this.#attempt,
      s.reconnectMinMs,
      s.reconnectMaxMs,
      this.#o.random ?? Math.random,
    );
    this.#attempt++;
    this.#reconnectTimer = scheduleRetry(this.#o, delay, () => this.#connect());
  }

  #onData(chunk: string): void {
    this.#lastRxAt = this.#o.clock.monotonicMs();
    const { responses, problems } = this.#reader.push(chunk);
    for (const p of problems)
      this.#o.malformed.report(`hyperdeck-${p.kind}`, { device: this.#o.server.id, ...p });
    for (const r of responses) {
      try {
        this.#onResponse(r);
      } catch (err) {
        this.#o.malformed.report('hyperdeck-bad-response', {
          device: this.#o.server.id,
          code: r.code,
          error: String(err),
        });
      }
    }
  }

  #onResponse(r: HyperdeckResponse): void {
    if (r.code === HD.CONNECTION_INFO) {
      this.#onBanner(r);
      return;
    }
    if (r.code === HD.CONNECTION_REJECTED) {
      // Logged once until the monitor gets in: the retries keep meeting the same 120.
      if (!this.#rejectionLogged)
        this.#logger.warn('HyperDeck rejected the connection (120): another client holds it');
      this.#rejectionLogged = true;
      this.#drop('connection rejected (120)');
      return;
    }
    if (isAsync(r.code)) {
      if (r.code === HD.ASYNC_TRANSPORT_INFO) this.#onTransport(r, true);
      else if (r.code === HD.ASYNC_SLOT_INFO) this.#requestClips(true);
      else if (r.code === HD.ASYNC_DISPLAY_TIMECODE) {
        const tc = displayTimecodeFrom(r.params);
        if (tc !== undefined) this.#apply(this.#reducer.onDisplayTimecode(tc), true);
      }
      return;
    }
    const pending = this.#inFlight;
    if (!pending) {
      this.#o.malformed.report('hyperdeck-unexpected-response', { device: this.#o.server.id, code: r.code });
      return;
    }
    this.#inFlight = undefined;
    // 107 answers whatever needed a timeline (clips get, goto, play): the media is gone or was swapped.
    if (r.code === HD.TIMELINE_EMPTY) this.#apply(this.#reducer.onTimelineEmpty(), true);
    pending.onResponse(r);
    this.#sendNext();
  }

  #onBanner(r: HyperdeckResponse): void {
    if (this.#session) {
      // The banner comes once per connection; a repeat must not arm a second set of poll and ping timers.
      this.#o.malformed.report('hyperdeck-unexpected-response', { device: this.#o.server.id, code: r.code });
      return;
    }
    const info = connectionInfoFrom(r.params);
    this.#session = true;
    this.#attempt = 0;
    this.#rejectionLogged = false;
    this.#wasConnected = true;
    this.#logger.info({ model: info.model, protocolVersion: info.protocolVersion }, 'HyperDeck connected');
    this.#apply(this.#reducer.onConnected(), true);
    const s = this.#o.server;
    // Separate commands: a deck that refuses one key (1xx) must still enable the other.
    this.#enqueue('notify', encodeCommand('notify', [['transport', true]]));
    this.#enqueue('notify', encodeCommand('notify', [['slot', true]]));
    // 513 display timecode notifications exist from protocol 1.11 on; older decks are polled only.
    if (versionAtLeast(protocolVersionFrom(info.protocolVersion), 1, 11)) {
      this.#enqueue('notify', encodeCommand('notify', [['display timecode', true]]), (resp) => {
        this.#displayTimecodeNotify = resp.code === HD.OK;
      });
    }
    this.#enqueue('watchdog', encodeCommand('watchdog', [['period', Math.ceil(s.timeoutMs / 1000) + 1]]));
    this.#enqueue('transport info', encodeCommand('transport info'), (resp) =>
      this.#onTransport(resp, false),
    );
    this.#requestClips(true);
    if (s.pollIntervalMs > 0) this.#every(s.pollIntervalMs, () => this.#poll());
    this.#every(s.pingIntervalMs, () => {
      if (this.#o.clock.monotonicMs() - this.#lastTxAt >= s.pingIntervalMs - 1)
        this.#enqueue('ping', encodeCommand('ping'));
    });
  }

  /** Run `fn` every `ms` while the connection lasts (the timers end with it, see #onClose). */
  #every(ms: number, fn: () => void): void {
    const arm = (): void => {
      const handle = this.#o.clock.setTimer(ms, () => {
        this.#timers.delete(handle);
        if (this.#closed || !this.#socket) return;
        fn();
        arm();
      });
      this.#timers.add(handle);
    };
    arm();
  }

  #poll(): void {
    if (this.#queue.some((p) => p.name === 'transport info') || this.#inFlight?.name === 'transport info')
      return;
    this.#enqueue('transport info', encodeCommand('transport info'), (resp) =>
      this.#onTransport(resp, false),
    );
  }

  /**
   * Fetch the clip list when the slot or clip changed, or (bounded) when the clip id under the play head is
   * missing from it (a clip being recorded joins the list); `force` for a new connection or a slot change.
   */
  #requestClips(force = false): void {
    if (this.#queue.some((p) => p.name === 'clips get') || this.#inFlight?.name === 'clips get') return;
    const now = this.#o.clock.monotonicMs();
    const { slotId, clipId, known } = this.#reducer.clipKey;
    const key = `${slotId ?? ''}/${clipId ?? ''}`;
    const due =
      force ||
      key !== this.#clipsFetchedFor ||
      (!known && now - this.#clipsFetchedAt >= this.#o.server.clipsRefreshMinMs);
    if (!due) return;
    this.#clipsFetchedFor = key;
    this.#clipsFetchedAt = now;
    this.#enqueue('clips get', encodeCommand('clips get'), (resp) => {
      if (resp.code === HD.CLIPS_INFO) this.#apply(this.#reducer.onClips(clipsInfoFrom(resp.params)), true);
    });
  }

  /** Whether the deck pushes its display timecode (513) on this connection. */
  get displayTimecodeNotifications(): boolean {
    return this.#displayTimecodeNotify;
  }

  #onTransport(r: HyperdeckResponse, merge: boolean): void {
    if (r.code !== HD.TRANSPORT_INFO && r.code !== HD.ASYNC_TRANSPORT_INFO) return;
    this.#apply(this.#reducer.onTransport(transportInfoFrom(r.params), merge), true);
    this.#requestClips();
  }

  #enqueue(
    name: string,
    command: string,
    onResponse: (r: HyperdeckResponse) => void = () => undefined,
  ): void {
    if (!this.#socket || this.#queue.length >= MAX_QUEUE) return;
    this.#queue.push({ name, command, onResponse });
    if (!this.#inFlight) this.#sendNext();
  }

  #sendNext(): void {
    const next = this.#queue.shift();
    if (!next || !this.#socket) return;
    this.#lastTxAt = this.#o.clock.monotonicMs();
    next.sentAt = this.#lastTxAt;
    this.#inFlight = next;
    this.#socket.write(next.command);
  }

  close(): void {
    this.#closed = true;
    this.#reconnectTimer?.cancel();
    this.#cancelTimers();
    if (this.#socket) {
      // Polite goodbye (the deck frees its single client slot at once), then close.
      this.#socket.end(encodeCommand('quit'));
      this.#socket.destroySoon();
      const s = this.#socket;
      setTimeout(() => s.destroy(), 200).unref();
    }
  }
}
