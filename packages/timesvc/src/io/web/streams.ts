import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { hostAllowed, isAppError, rejectUpgrade, type AppError, type Logger } from '@broadcast-ops/core';
import { fail } from '../../errors.ts';
import type { ClockManager } from '../../domain/clock-manager.ts';
import type { ClockSnapshot } from '../../domain/reference-source.ts';
import { allowedHostsOf, authorise, originAllowed, requestToken, type WebApiContext } from './api.ts';
import { LOG_LEVELS, levelAtLeast, type LogEntry, type LogLevel, type LogRing } from './log-ring.ts';
import type { ReferenceEvent, ReferenceEventWatcher } from './reference-events.ts';
import { chartClock, fullStatus, type StatusSources } from './status.ts';
import { historyPoint, StatusHistory } from './status-history.ts';

/**
 * The WebSocket streams (README "Web API: streams"), on the web port, token by `Authorization: Bearer`
 * or `?token=`, read permission, same-origin browsers only:
 *
 * `/api/ws/status` → `{type:"history", data:[…]}` (the chart's last five minutes, one point per second,
 * kept here whether or not anyone watches) then `{type:"status", data:<GET /api/status>}` on connect,
 * every second and at once on a clock-state change; `{type:"event", data:<reference-health event>}` when one happens.
 *
 * `/api/ws/logs[?level=L]` → `{type:"logs", entries:[…]}`: the last 50 entries (at or above L) on
 * connect, then each new entry exactly once, batched every 100 ms (or per 100 entries in a burst);
 * reference-health events are log
 * entries too (component `reference`).
 *
 * A client that cannot keep up is dropped (close 1013 "too slow"), never buffered without end: at most
 * `maxQueue` log entries wait for it and at most `maxBufferedBytes` sit in its socket buffer. Frames from
 * clients are ignored (maxPayload 1 KiB); ping every 30 s, a client without pong is terminated.
 */
export const STREAM_PATHS = ['/api/ws/status', '/api/ws/logs'] as const;
const FLUSH_BATCH = 100;

export interface StreamOptions {
  ctx: WebApiContext & StatusSources;
  manager: ClockManager;
  logs: LogRing;
  events: ReferenceEventWatcher;
  logger: Logger;
  statusIntervalMs?: number;
  maxQueue?: number;
  maxBufferedBytes?: number;
  maxClients?: number;
  pingMs?: number;
}

interface LogClient {
  ws: WebSocket;
  minLevel: LogLevel | undefined;
  queue: LogEntry[];
  alive: boolean;
}

export class Streams {
  readonly #o: Required<Omit<StreamOptions, 'ctx' | 'manager' | 'logs' | 'events' | 'logger'>> &
    Pick<StreamOptions, 'ctx' | 'manager' | 'logs' | 'events' | 'logger'>;
  /** Made on the first upgrade: `ws` is loaded when a client first connects, not at start (docs/performance.md). */
  #wss: Promise<WebSocketServer> | undefined;
  readonly #status = new Map<WebSocket, { alive: boolean }>();
  readonly #logs = new Set<LogClient>();
  readonly history = new StatusHistory();
  readonly #timers: NodeJS.Timeout[] = [];
  /** The log flush, armed only while entries wait (no wake-ups of an idle server: docs/performance.md). */
  #flushTimer: NodeJS.Timeout | undefined;
  readonly #off: (() => void)[] = [];
  #server: Server | undefined;
  /** Clients dropped for being too slow (for tests and the log). */
  dropped = 0;
  readonly #onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    void this.#upgrade(req, socket, head);
  };

  constructor(options: StreamOptions) {
    this.#o = {
      statusIntervalMs: 1000,
      maxQueue: 1000,
      maxBufferedBytes: 1 << 20,
      maxClients: 64,
      pingMs: 30_000,
      ...options,
    };
  }

  get clients(): { status: number; logs: number } {
    return { status: this.#status.size, logs: this.#logs.size };
  }

  /**
   * Serve the streams on `server`. The status push (and the chart point) runs every `statusIntervalMs` on
   * its own timer, or, with `ownTimer` false, when the owner calls `statusTick` (web-layer.ts, once a
   * second on the service's tick).
   */
  attach(server: Server, ownTimer = true): void {
    this.#server = server;
    server.on('upgrade', this.#onUpgrade);
    if (ownTimer) this.#timers.push(setInterval(() => this.#pushStatus(), this.#o.statusIntervalMs));
    this.#timers.push(setInterval(() => this.#ping(), this.#o.pingMs));
    for (const t of this.#timers) t.unref();
    this.#off.push(
      this.#o.manager.on((e) => {
        if (e.type === 'state') this.#pushStatus();
      }),
      this.#o.events.on((e) => this.#pushEvent(e)),
      this.#o.logs.subscribe((e) => this.#queueLog(e)),
    );
  }

  close(): void {
    this.#server?.off('upgrade', this.#onUpgrade);
    for (const t of this.#timers) clearInterval(t);
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    for (const off of this.#off) off();
    for (const ws of this.#status.keys()) ws.terminate();
    for (const c of this.#logs) c.ws.terminate();
    void this.#wss?.then((wss) => wss.close());
  }

  async #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = req.url ?? '';
    const path = url.split('?')[0] ?? '';
    const reject = (err: AppError): void => rejectUpgrade(socket, err);
    if (!(STREAM_PATHS as readonly string[]).includes(path)) {
      reject(fail('NOT_FOUND', `no stream ${path}`));
      return;
    }
    const allowedOrigins = this.#o.ctx.config().web.allowed_origins;
    if (!hostAllowed(req.headers.host, allowedHostsOf(allowedOrigins))) {
      reject(
        fail(
          'HOST_NOT_ALLOWED',
          `Host ${JSON.stringify(req.headers.host ?? '')} is not a name this server answers to`,
        ),
      );
      return;
    }
    if (!originAllowed(req.headers.host, req.headers.origin, allowedOrigins)) {
      reject(fail('FORBIDDEN', 'cross-origin WebSocket refused'));
      return;
    }
    try {
      await authorise(this.#o.ctx, 'read', requestToken(req.headers, url));
    } catch (err) {
      if (isAppError(err)) {
        reject(err);
        return;
      }
      throw err;
    }
    const query = new URLSearchParams(url.includes('?') ? url.slice(url.indexOf('?') + 1) : '');
    const level = query.get('level') ?? undefined;
    if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level)) {
      reject(fail('INVALID_REQUEST', `level must be one of ${LOG_LEVELS.join(', ')}`));
      return;
    }
    if (this.#status.size + this.#logs.size >= this.#o.maxClients) {
      reject(fail('STREAMS_FULL'));
      return;
    }
    this.#wss ??= import('ws').then(
      ({ WebSocketServer }) =>
        new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 1024 }),
    );
    const wss = await this.#wss;
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('error', () => ws.terminate());
      if (path === '/api/ws/status') this.#addStatus(ws);
      else this.#addLogs(ws, level as LogLevel | undefined);
    });
  }

  #addStatus(ws: WebSocket): void {
    const entry = { alive: true };
    this.#status.set(ws, entry);
    ws.on('pong', () => (entry.alive = true));
    ws.on('close', () => this.#status.delete(ws));
    this.#send(ws, { type: 'history', data: this.history.points(this.#o.ctx.servedNowMs()) });
    this.#send(ws, { type: 'status', data: fullStatus(this.#o.ctx) });
  }

  #addLogs(ws: WebSocket, minLevel: LogLevel | undefined): void {
    const client: LogClient = { ws, minLevel, queue: [], alive: true };
    this.#logs.add(client);
    ws.on('pong', () => (client.alive = true));
    ws.on('close', () => this.#logs.delete(client));
    const backlog = this.#o.logs.query({ limit: 50, ...(minLevel ? { minLevel } : {}) });
    this.#send(ws, { type: 'logs', entries: backlog });
  }

  #send(ws: WebSocket, msg: unknown): void {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(JSON.stringify(msg));
  }

  #tooSlow(ws: WebSocket, why: string): void {
    // Forget the client first: the warning below is itself a log entry for the log clients.
    this.#status.delete(ws);
    for (const c of this.#logs) if (c.ws === ws) this.#logs.delete(c);
    this.dropped++;
    ws.close(1013, 'too slow');
    // A reader that does not read will not complete the closing handshake either.
    setTimeout(() => ws.terminate(), 1000).unref();
    this.#o.logger.warn({ why, buffered: ws.bufferedAmount }, 'stream client too slow; dropped');
  }

  /** The periodic status push and chart point; `snap` is the clock manager's snapshot taken now. */
  statusTick(snap?: ClockSnapshot): void {
    this.#pushStatus(snap);
  }

  /**
   * The tick on a second the clock manager found quiet: with nobody watching, the chart's point from
   * `chart` (the last snapshot's fields, the estimated error read now) without a snapshot; else as
   * `statusTick`.
   */
  chartTick(chart: ReturnType<typeof chartClock>): void {
    if (this.#status.size === 0) this.history.add(historyPoint(this.#o.ctx.servedNowMs(), chart));
    else this.#pushStatus();
  }

  #pushStatus(snap?: ClockSnapshot): void {
    if (this.#status.size === 0) {
      // Nobody watching: only the chart's point (the clock fields it draws), so a page opened later still
      // starts with the last five minutes.
      const clock = chartClock(snap ?? this.#o.manager.snapshot());
      this.history.add(historyPoint(this.#o.ctx.servedNowMs(), clock));
      return;
    }
    const status = fullStatus(this.#o.ctx);
    this.history.add(historyPoint(Date.parse(status.time), status.clock));
    const text = JSON.stringify({ type: 'status', data: status });
    for (const ws of [...this.#status.keys()]) {
      if (ws.bufferedAmount > this.#o.maxBufferedBytes) this.#tooSlow(ws, 'status buffer full');
      else if (ws.readyState === ws.OPEN) ws.send(text);
    }
  }

  #pushEvent(e: ReferenceEvent): void {
    const text = JSON.stringify({ type: 'event', data: e });
    for (const ws of this.#status.keys()) if (ws.readyState === ws.OPEN) ws.send(text);
  }

  #queueLog(e: LogEntry): void {
    for (const c of [...this.#logs]) {
      if (c.minLevel && !levelAtLeast(e.level, c.minLevel)) continue;
      if (c.queue.length >= this.#o.maxQueue) {
        this.#tooSlow(c.ws, 'log queue full');
        continue;
      }
      c.queue.push(e);
      // A burst goes out in batches at once rather than waiting for the timer.
      if (c.queue.length >= FLUSH_BATCH && c.ws.bufferedAmount <= this.#o.maxBufferedBytes) this.#flush(c);
      this.#armFlush();
    }
  }

  /** Flush waiting log entries within 100 ms; re-armed while some are still held back. */
  #armFlush(): void {
    if (this.#flushTimer !== undefined) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      this.#flushLogs();
      for (const c of this.#logs) {
        if (c.queue.length > 0) {
          this.#armFlush();
          break;
        }
      }
    }, 100);
    this.#flushTimer.unref();
  }

  #flush(c: LogClient): void {
    const entries = c.queue;
    c.queue = [];
    this.#send(c.ws, { type: 'logs', entries });
  }

  #flushLogs(): void {
    for (const c of [...this.#logs]) {
      if (c.queue.length === 0) continue;
      if (c.ws.bufferedAmount > this.#o.maxBufferedBytes) continue; // the queue bound decides
      this.#flush(c);
    }
  }

  #ping(): void {
    for (const [ws, e] of this.#status) {
      if (!e.alive) ws.terminate();
      else {
        e.alive = false;
        ws.ping();
      }
    }
    for (const c of this.#logs) {
      if (!c.alive) c.ws.terminate();
      else {
        c.alive = false;
        c.ws.ping();
      }
    }
  }
}
