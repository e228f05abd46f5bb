/**
 * Client WebSocket transport (docs/protocol.md "Transport"): `ws://<host>:<port>/`, no compression
 * (permessage-deflate costs latency and memory per socket), bounded frames, protocol-level ping to find
 * half-open sockets, a connection cap. The protocol itself lives in ClientSession; this file only owns
 * sockets and timers.
 */
import type { AddressInfo } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { bearerToken, type Clock, type Logger } from '@broadcast-ops/core';
import type { Hub } from '../domain/hub.ts';
import { ClientSession, type SessionOptions } from './client-session.ts';
import { CloseCode, reasonOfCode } from './close-codes.ts';

export interface WsTransportOptions extends SessionOptions {
  host: string;
  port: number;
  maxClients: number;
  maxMessageSize: number;
  heartbeatIntervalMs: number;
}

export interface TransportEvents {
  opened(): void;
  closed(reason: string): void;
  authFailed(): void;
}

/** How long a closing socket may take to say goodbye before it is destroyed (a slow consumer never reads it). */
const CLOSE_GRACE_MS = 2000;

export class WsTransport {
  readonly #hub: Hub;
  readonly #opts: WsTransportOptions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #events: TransportEvents;
  #wss: WebSocketServer | undefined;
  readonly #sockets = new Map<WebSocket, { session: ClientSession; alive: boolean }>();
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(hub: Hub, options: WsTransportOptions, clock: Clock, logger: Logger, events: TransportEvents) {
    this.#hub = hub;
    this.#opts = options;
    this.#clock = clock;
    this.#logger = logger.child({ component: 'client-transport' });
    this.#events = events;
  }

  get connections(): number {
    return this.#sockets.size;
  }

  get listening(): boolean {
    return this.#wss !== undefined;
  }

  async listen(): Promise<number> {
    const wss = new WebSocketServer({
      host: this.#opts.host,
      port: this.#opts.port,
      perMessageDeflate: false,
      maxPayload: this.#opts.maxMessageSize,
      clientTracking: false,
    });
    await new Promise<void>((resolve, reject) => {
      wss.once('listening', resolve);
      wss.once('error', reject);
    });
    // Set only once listening: a failed listen (port in use) leaves nothing for close() to wait on.
    this.#wss = wss;
    wss.on('error', (err) => this.#logger.error({ err }, 'websocket server error'));
    wss.on('connection', (ws, req) => this.#accept(ws, req));
    this.#heartbeat = setInterval(() => this.#beat(), this.#opts.heartbeatIntervalMs);
    this.#heartbeat.unref();
    return (wss.address() as AddressInfo).port;
  }

  #accept(ws: WebSocket, req: IncomingMessage): void {
    if (this.#sockets.size >= this.#opts.maxClients) {
      ws.close(CloseCode.MAX_CLIENTS, 'Maximum clients reached');
      this.#events.closed('max_clients');
      return;
    }
    let grace: NodeJS.Timeout | undefined;
    let serverCode: number | undefined;
    const session = new ClientSession(
      this.#hub,
      {
        bufferedAmount: () => ws.bufferedAmount,
        send: (data) => ws.send(data),
        close: (code, reason) => {
          serverCode = code;
          ws.close(code, reason);
          grace ??= setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
        },
        remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}`,
      },
      this.#clock,
      this.#logger,
      this.#opts,
      bearerToken(req.headers.authorization),
      { opened: () => this.#events.opened(), authFailed: () => this.#events.authFailed() },
    );
    const entry = { session, alive: true };
    this.#sockets.set(ws, entry);
    ws.on('pong', () => {
      entry.alive = true;
    });
    ws.on('message', (data) => {
      // Text frames are the protocol; a binary frame is decoded as UTF-8 and gets PARSE_ERROR if it is not JSON.
      // (binaryType is the default 'nodebuffer': data is a Buffer, or Buffer[] for fragmented messages.)
      const buf = Array.isArray(data)
        ? Buffer.concat(data)
        : Buffer.isBuffer(data)
          ? data
          : Buffer.from(data);
      const text = buf.toString('utf8');
      try {
        session.receive(text);
      } catch (err) {
        // A bug in handling one frame must not take the process (or other clients) down.
        this.#logger.error({ err, namespace: session.namespace }, 'error while handling a client frame');
      }
      // Reading is a good moment to continue paged snapshots and replays of this client.
      if (session.connId !== undefined) this.#hub.flushClient(session.connId);
    });
    let errored = false;
    ws.on('error', (err) => {
      errored = true;
      this.#logger.debug({ err, namespace: session.namespace }, 'client socket error');
    });
    ws.on('close', (code) => {
      clearTimeout(grace);
      this.#sockets.delete(ws);
      session.closed(code);
      if (session.connId !== undefined) {
        this.#events.closed(errored && serverCode === undefined ? 'error' : reasonOfCode(serverCode ?? code));
      }
    });
  }

  #beat(): void {
    for (const [ws, entry] of this.#sockets) {
      if (!entry.alive) {
        ws.terminate();
        continue;
      }
      entry.alive = false;
      ws.ping();
    }
  }

  async close(): Promise<void> {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    const wss = this.#wss;
    this.#wss = undefined;
    if (!wss) return;
    for (const [ws, entry] of this.#sockets) {
      entry.session.close(CloseCode.SERVER_SHUTDOWN, 'Server shutdown');
      ws.close(CloseCode.SERVER_SHUTDOWN, 'Server shutdown');
    }
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    const deadline = Date.now() + 1000;
    while (this.#sockets.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const ws of this.#sockets.keys()) ws.terminate();
  }
}
