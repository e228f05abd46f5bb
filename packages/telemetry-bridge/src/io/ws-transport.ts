/**
 * Client WebSocket transport (docs/protocol.md "Transport"): `ws://<host>:<port>/`, no compression
 * (permessage-deflate costs latency and memory per socket), bounded frames, protocol-level ping to find
 * half-open sockets, a connection cap. The protocol itself lives in ClientSession; this file only owns
 * sockets and timers.
 */
import type { AddressInfo, Socket } from 'node:net';
import type { IncomingMessage, Server } from 'node:http';
import { WebSocket, WebSocketServer } from 'ws';
import { bearerToken, type Clock, type Logger } from '@broadcast-ops/core';
import type { Hub } from '../domain/hub.ts';
import { ClientSession, type SessionOptions } from './client-session.ts';
import { CloseCode, reasonOfCode } from '../protocol/close-codes.ts';
import { upgradeAllowed } from './request-origin.ts';

export interface WsTransportOptions extends SessionOptions {
  host: string;
  port: number;
  maxClients: number;
  maxMessageSize: number;
  heartbeatIntervalMs: number;
  /**
   * An HTTP server (not yet listening) that also serves plain requests on this port (the console and the
   * state API, docs/console.md); the WebSocket server takes its upgrades, and listen() starts it.
   */
  server?: Server;
  /** Names the Host header may carry besides IP literals, localhost and this machine's hostname. */
  allowedHosts?: readonly string[];
  /** Origins (`scheme://host[:port]`) besides this host's own whose pages may open a WebSocket. */
  allowedOrigins?: readonly string[];
  /**
   * Runs before any frame is written to a socket: the event log writes the records it holds for the
   * current job (io/event-log.ts `writePending`), so no message leaves before its record is written.
   */
  beforeWrite?: () => void;
}

export interface TransportEvents {
  opened(): void;
  closed(reason: string): void;
  authFailed(): void;
  /** An upgrade refused for its Host or Origin header (request-origin.ts). */
  upgradeRefused(reason: string): void;
}

/** How long a closing socket may take to say goodbye before it is destroyed (a slow consumer never reads it). */
const CLOSE_GRACE_MS = 2000;

/**
 * Bytes one socket may hold within a tick before they are written at once (a large burst still reaches
 * the kernel in pieces of about this size, so the batching never holds much memory).
 */
const MAX_CORKED_BYTES = 64 * 1024;

/**
 * One unmasked final text frame (RFC 6455 §5.2: server frames are never masked, no extension is negotiated
 * here since permessage-deflate is off): FIN + opcode 1, the payload length in 7, 7+16 or 7+64 bits, then
 * the UTF-8 payload. Built once per broadcast and written as is to every recipient.
 */
export function textFrame(text: string): Buffer {
  const n = Buffer.byteLength(text, 'utf8');
  const head = n < 126 ? 2 : n < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(head + n);
  frame[0] = 0x81;
  if (n < 126) frame[1] = n;
  else if (n < 65_536) {
    frame[1] = 126;
    frame.writeUInt16BE(n, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    frame.writeUInt32BE(n >>> 0, 6);
  }
  frame.write(text, head, 'utf8');
  return frame;
}

/**
 * Write batching for the fan-out (docs/performance.md): the frames a socket is given in one tick are kept in
 * a list of their own (not in the socket: a Node stream costs about a microsecond per `write`, corked or
 * not), and every socket with frames is written once the current job is done (process.nextTick), with a
 * single `write` of all its frames: one system call per client per tick, whatever the number of messages.
 * A broadcast is framed once and the same bytes go to every recipient: the hub pushes the identical string
 * to each subscriber in a row, so a one-entry cache catches it. Subscribers of the same traffic get the same
 * frames in a tick; their joined bytes are built once and shared too (compared frame by frame, by identity,
 * with the previous socket's list).
 */
class SendBatcher {
  readonly #pending: (() => void)[] = [];
  #scheduled = false;
  #lastText: string | undefined;
  #lastFrame: Buffer = Buffer.alloc(0);
  #lastList: readonly Buffer[] = [];
  #lastJoined: Buffer = Buffer.alloc(0);
  readonly #flush = (): void => {
    this.#scheduled = false;
    const list = this.#pending.splice(0);
    for (const write of list) write();
    this.#lastList = [];
    this.#lastJoined = Buffer.alloc(0);
  };

  frame(text: string): Buffer {
    if (text !== this.#lastText) {
      this.#lastFrame = textFrame(text);
      this.#lastText = text;
    }
    return this.#lastFrame;
  }

  /** The frames of `list` as one buffer, shared with the previous caller when it had the same frames. */
  joined(list: readonly Buffer[], bytes: number): Buffer {
    const last = this.#lastList;
    let same = last.length === list.length;
    for (let k = 0; same && k < list.length; k++) same = last[k] === list[k];
    if (!same) {
      this.#lastJoined = Buffer.concat(list, bytes);
      this.#lastList = list;
    }
    return this.#lastJoined;
  }

  later(write: () => void): void {
    this.#pending.push(write);
    if (!this.#scheduled) {
      this.#scheduled = true;
      process.nextTick(this.#flush);
    }
  }
}

export class WsTransport {
  readonly #hub: Hub;
  readonly #opts: WsTransportOptions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #events: TransportEvents;
  #wss: WebSocketServer | undefined;
  readonly #sockets = new Map<WebSocket, { session: ClientSession; alive: boolean }>();
  #heartbeat: NodeJS.Timeout | undefined;
  readonly #batch = new SendBatcher();

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
    const server = this.#opts.server;
    const common = {
      perMessageDeflate: false,
      maxPayload: this.#opts.maxMessageSize,
      clientTracking: false,
      verifyClient: (
        info: { req: IncomingMessage },
        done: (ok: boolean, code?: number, message?: string) => void,
      ): void => {
        const verdict = upgradeAllowed(
          info.req.headers,
          this.#opts.allowedHosts ?? [],
          this.#opts.allowedOrigins ?? [],
        );
        if (verdict.ok) return done(true);
        this.#logger.warn(
          {
            remote: info.req.socket.remoteAddress,
            host: info.req.headers.host,
            origin: info.req.headers.origin,
            reason: verdict.reason,
          },
          'websocket upgrade refused',
        );
        this.#events.upgradeRefused(verdict.reason);
        done(false, verdict.status, verdict.reason);
      },
    };
    const wss = server
      ? new WebSocketServer({ server, ...common })
      : new WebSocketServer({ host: this.#opts.host, port: this.#opts.port, ...common });
    await new Promise<void>((resolve, reject) => {
      if (server) {
        server.once('error', reject);
        server.listen(this.#opts.port, this.#opts.host, () => {
          server.off('error', reject);
          resolve();
        });
        return;
      }
      wss.once('listening', resolve);
      wss.once('error', reject);
    });
    // Set only once listening: a failed listen (port in use) leaves nothing for close() to wait on.
    this.#wss = wss;
    wss.on('error', (err) => this.#logger.error({ err }, 'websocket server error'));
    wss.on('connection', (ws, req) => this.#accept(ws, req));
    this.#heartbeat = setInterval(() => this.#beat(), this.#opts.heartbeatIntervalMs);
    this.#heartbeat.unref();
    return ((server ?? wss).address() as AddressInfo).port;
  }

  #accept(ws: WebSocket, req: IncomingMessage): void {
    if (this.#sockets.size >= this.#opts.maxClients) {
      ws.close(CloseCode.MAX_CLIENTS, 'Maximum clients reached');
      this.#events.closed('max_clients');
      return;
    }
    let grace: NodeJS.Timeout | undefined;
    let serverCode: number | undefined;
    // The upgraded request's socket is the one ws writes to.
    const socket: Socket = req.socket;
    const batch = this.#batch;
    const beforeWrite = this.#opts.beforeWrite ?? ((): void => undefined);
    /**
     * Frames given this tick, not yet written: not backpressure (the kernel has not refused them), so not
     * counted in bufferedAmount, exactly as bytes held by a cork would not be.
     */
    let held: Buffer[] = [];
    let heldBytes = 0;
    const release = (): void => {
      if (heldBytes === 0) return;
      const list = held;
      const bytes = heldBytes;
      held = [];
      heldBytes = 0;
      if (socket.destroyed) return; // gone meanwhile: what ws.send would do with them
      beforeWrite();
      // A ping or pong ws writes in the same tick may leave before these frames: RFC 6455 5.4 lets control
      // frames go between messages. A close releases them first (below), so none follows the close frame.
      socket.write((list.length === 1 ? list[0] : undefined) ?? batch.joined(list, bytes));
    };
    const session = new ClientSession(
      this.#hub,
      {
        bufferedAmount: () => ws.bufferedAmount,
        send: (data) => {
          if (ws.readyState !== WebSocket.OPEN || !socket.writable) {
            release();
            beforeWrite();
            ws.send(data); // ws's own handling of a send on a closing socket
            return;
          }
          // Written straight to the socket (ws queues nothing of its own without permessage-deflate).
          const frame = batch.frame(data);
          if (heldBytes === 0) batch.later(release);
          held.push(frame);
          heldBytes += frame.length;
          if (heldBytes >= MAX_CORKED_BYTES) release();
        },
        close: (code, reason) => {
          serverCode = code;
          release(); // the frames given before the close go before the close frame
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
