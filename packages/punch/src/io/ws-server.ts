import { createHash } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { bearerToken, type Clock, type Logger } from '@broadcast-ops/core';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { AccessChecker, AccessRefusal } from '../domain/access.ts';
import type { SessionBroker } from '../domain/broker.ts';
import type { EndReason, PeerLink, SignallingHub } from '../domain/signalling.ts';
import { PUNCH_VERSION } from '../protocol/schemas.ts';
import type { TokenClaims } from '../protocol/token.ts';
import {
  WS_CLOSE,
  encode,
  parseClientMessage,
  type ClientMessage,
  type WsErrorCode,
} from '../protocol/ws-messages.ts';
import { clientAddress, type TrustPolicy } from './client-address.ts';
import type { ClientLimits } from './client-limits.ts';
import type { BridgedSocket, RemoteHandle } from './redis-bridge.ts';

/**
 * `GET /api/ws/:session_name` upgraded to a WebSocket on the same port as the REST API (WSS when the
 * server has TLS). README "WebSocket signalling" describes the protocol; this module owns the sockets:
 *
 * 1. Before anything else, on the HTTP `upgrade` event: the path, then the per-client WebSocket connect
 *    limit keyed by the one client-address function (over the limit: HTTP 429 with `Retry-After`, no
 *    upgrade; no session state is read).
 * 2. Upgrade, then authenticate (bearer header or `?token=`). A missing or bad token is answered in a way
 *    a browser can see: the socket is accepted, gets `error` and is closed with a 44xx code.
 * 3. Messages: at most `messagesPerSecond` per connection (the excess is dropped with one
 *    `INVALID_MESSAGE` per second; twice the limit within a second closes with 4429), frames at most
 *    `maxPayload` bytes (`ws` closes with 1009 before buffering a larger frame), text only, JSON objects.
 * 4. Liveness: a protocol ping every `pingIntervalMs`; a connection that has not answered the previous
 *    ping is terminated, so a half-open socket frees its slot (it becomes detached) within two intervals.
 *    The interval timer runs only while a connection is open: with none it is stopped (an idle broker
 *    wakes nothing for it, docs/at-rest.md at the repository root) and the next connection starts it.
 */
export interface SignallingServerOptions {
  broker: SessionBroker;
  hub: SignallingHub;
  access: AccessChecker;
  clock: Clock;
  logger: Logger;
  trust: TrustPolicy;
  clientLimits: ClientLimits;
  /** Per-client limits on (the same master switch as HTTP). */
  rateLimits: boolean;
  messagesPerSecond: number;
  /** Largest frame, bytes. Default 16 KiB. */
  maxPayload?: number;
  /** Protocol ping interval. Default 15 s. */
  pingIntervalMs?: number;
  /**
   * A peer-token connection that holds no slot this long after connecting is closed (4408): sockets that
   * never register do not stay open. Admin observers are exempt. Default 10 s.
   */
  registerDeadlineMs?: number;
  /**
   * Several instances on Redis (docs/multi-instance.md): while `active()`, this instance does not own the
   * sessions and relays each token-checked socket to the instance that does.
   */
  remote?: {
    active(): boolean;
    open(socket: BridgedSocket, name: string, token: string): RemoteHandle | null;
  };
  /**
   * The WebSocket connect limit shared by every instance (Redis counters); when absent, `clientLimits`.
   * Resolves to the seconds to wait, 0 when allowed; rejects when the counter store is unreachable.
   */
  sharedConnectLimit?: (ip: string) => Promise<number>;
  /** Whether new upgrades must be refused with 503 (the shared store is unreachable). */
  unavailable?: () => boolean;
  /** A connection refused before it joined its session (for the metrics). */
  onReject?: (reason: 'rate_limited' | 'auth_failed' | 'session_expired' | 'session_full') => void;
}

export interface SignallingServer {
  readonly connections: number;
  /** True while the ping interval timer runs (a connection open); tests. */
  readonly heartbeating: boolean;
  /** Close every connection with 1001 (going away) and stop the heartbeat. */
  close(): Promise<void>;
}

/** Bytes queued for one slow connection before it is dropped. */
const MAX_SEND_BUFFER = 1024 * 1024;

/** The upgrade's path, `/api/ws/:name` of the route table (routes/signalling-routes.ts). */
export const SIGNALLING_PATH = /^\/api\/ws\/([^/?#]+)\/?(?:\?.*)?$/;

/** The subprotocol the console offers with its token (README "WebSocket signalling"). */
export const WS_SUBPROTOCOL = 'punch.v1';
const BEARER_PROTOCOL = 'bearer.';

/** The token of a `bearer.<token>` entry of Sec-WebSocket-Protocol (a token's characters are all tchar). */
export function subprotocolToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  for (const p of header.split(',')) {
    const v = p.trim();
    if (v.startsWith(BEARER_PROTOCOL) && v.length > BEARER_PROTOCOL.length)
      return v.slice(BEARER_PROTOCOL.length);
  }
  return undefined;
}

/** Fingerprint of a token: who registered a claim, without keeping the credential. */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest().subarray(0, 16).toString('base64url');
}

function reject(socket: Duplex, status: number, text: string, headers: Record<string, string> = {}): void {
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nPunch-Version: ${PUNCH_VERSION}\r\n` +
      `Content-Length: 0\r\n${extra}\r\n`,
  );
}

function closeCodeOf(r: AccessRefusal): number {
  if (r.code === 'SESSION_EXPIRED') return WS_CLOSE.sessionExpired;
  return r.reason === 'other_session' ? WS_CLOSE.forbidden : WS_CLOSE.authFailed;
}

class WsLink implements PeerLink, BridgedSocket {
  alive = true;
  terminated = false;
  windowStart = 0;
  count = 0;
  warned = false;
  readonly ws: WebSocket;
  readonly ip: string;
  readonly claims: TokenClaims;
  readonly holder: string;

  constructor(ws: WebSocket, ip: string, claims: TokenClaims, holder: string) {
    this.ws = ws;
    this.ip = ip;
    this.claims = claims;
    this.holder = holder;
  }

  send(text: string): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    // A peer that stops reading must not grow our send buffer without bound.
    if (this.ws.bufferedAmount > MAX_SEND_BUFFER) {
      this.ws.terminate();
      return;
    }
    this.ws.send(text);
  }

  probe(timeoutMs: number): Promise<boolean> {
    const ws = this.ws;
    if (ws.readyState !== ws.OPEN) return Promise.resolve(false);
    return new Promise((resolve) => {
      const onPong = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        ws.off('pong', onPong);
        resolve(false);
      }, timeoutMs);
      ws.once('pong', onPong);
      ws.ping();
    });
  }

  closeWith(code: number, reason: string): void {
    this.ws.close(code, reason);
    setTimeout(() => this.ws.terminate(), 1000).unref();
  }

  end(reason: EndReason): void {
    if (reason === 'revoked') this.ws.close(WS_CLOSE.authFailed, 'AUTH_FAILED');
    else if (reason === 'replaced') {
      // The old socket may be half-open: no close handshake to wait for.
      this.ws.close(WS_CLOSE.replaced, 'replaced by a newer connection of this peer');
      setTimeout(() => this.ws.terminate(), 1000).unref();
    } else this.ws.close(WS_CLOSE.normal, 'session closed');
  }
}

export function attachSignalling(server: Server, options: SignallingServerOptions): SignallingServer {
  const { broker, hub, access, clock, logger } = options;
  const maxPayload = options.maxPayload ?? 16 * 1024;
  const perSecond = options.messagesPerSecond;
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload,
    // README "WebSocket signalling": a browser cannot set Authorization on a WebSocket, so the console
    // offers `punch.v1` and `bearer.<token>`; the answer names `punch.v1` only (RFC 6455 section 4.2.2).
    handleProtocols: (offered) => (offered.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
  });
  // Spec "Versioning": every response carries Punch-Version, the 101 Switching Protocols answer included.
  wss.on('headers', (headers) => headers.push(`Punch-Version: ${PUNCH_VERSION}`));
  const deadlineMs = options.registerDeadlineMs ?? 10_000;
  const links = new Map<WebSocket, WsLink>();
  const sessionOf = new WeakMap<WsLink, string>();
  let closing = false;
  /** A connection kept: start the ping interval if it sleeps (rule 4 above). */
  const track = (ws: WebSocket, link: WsLink): void => {
    links.set(ws, link);
    if (heartbeat === undefined && !closing) {
      heartbeat = setInterval(beat, options.pingIntervalMs ?? 15_000);
      heartbeat.unref();
    }
  };

  const sendError = (ws: WebSocket, code: WsErrorCode, message: string): void => {
    if (ws.readyState === ws.OPEN) ws.send(encode({ type: 'error', code, message }));
  };

  const onMessage = (
    link: WsLink,
    data: RawData,
    isBinary: boolean,
    deliver: (m: ClientMessage) => void,
  ): void => {
    const now = clock.monotonicMs();
    if (now - link.windowStart >= 1000) {
      link.windowStart = now;
      link.count = 0;
      link.warned = false;
    }
    link.count++;
    if (link.count > perSecond) {
      if (link.count > 2 * perSecond) {
        link.ws.close(WS_CLOSE.rateLimited, 'message rate limit exceeded');
        return;
      }
      if (!link.warned) {
        link.warned = true;
        sendError(link.ws, 'INVALID_MESSAGE', `rate limit: at most ${perSecond} messages per second`);
      }
      return;
    }
    if (isBinary) {
      sendError(link.ws, 'INVALID_MESSAGE', 'message: binary frames are not accepted; send JSON text');
      return;
    }
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    const parsed = parseClientMessage(buf.toString('utf8'));
    if (!parsed.ok) {
      sendError(link.ws, 'INVALID_MESSAGE', parsed.error.message);
      return;
    }
    deliver(parsed.value);
  };

  /** A token-checked socket relayed to the owning instance (docs/multi-instance.md "How it works"). */
  const onBridged = (
    ws: WebSocket,
    link: WsLink,
    name: string,
    token: string,
    remote: NonNullable<SignallingServerOptions['remote']>,
  ): void => {
    track(ws, link);
    sessionOf.set(link, name);
    const handle = remote.open(link, name, token);
    if (!handle) {
      links.delete(ws);
      return;
    }
    ws.on('pong', () => {
      link.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      link.alive = true;
      try {
        onMessage(link, data, isBinary, (m) => handle.message(m));
      } catch (err) {
        logger.error({ err, session: name }, 'websocket message handler failed');
        sendError(ws, 'SERVER_ERROR', 'the message could not be handled');
      }
    });
    ws.on('close', (code) => {
      links.delete(ws);
      handle.close(link.terminated ? 'terminated: no answer to ping' : `closed (${code})`);
    });
  };

  const onConnection = (ws: WebSocket, ip: string, name: string, token: string | undefined): void => {
    ws.on('error', () => undefined);
    const auth = access.authenticate(token, name, clock.now());
    if (!auth.ok) {
      options.onReject?.(auth.code === 'AUTH_FAILED' ? 'auth_failed' : 'session_expired');
      logger.info({ session: name, ip, outcome: auth.code }, 'signalling token refused');
      sendError(ws, auth.code, auth.message);
      ws.close(closeCodeOf(auth), auth.code);
      return;
    }
    if (options.remote?.active()) {
      onBridged(
        ws,
        new WsLink(ws, ip, auth.claims, tokenFingerprint(token ?? '')),
        name,
        token ?? '',
        options.remote,
      );
      return;
    }
    const live = access.liveSession(broker.get(name), name, auth.claims);
    if (!live.ok) {
      options.onReject?.('session_expired');
      logger.info({ session: name, ip, outcome: live.code }, 'signalling token refused');
      sendError(ws, live.code, live.message);
      ws.close(closeCodeOf(live), live.code);
      return;
    }
    const link = new WsLink(ws, ip, auth.claims, tokenFingerprint(token ?? ''));
    track(ws, link);
    sessionOf.set(link, name);
    ws.on('pong', () => {
      link.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      link.alive = true;
      try {
        onMessage(link, data, isBinary, (m) => hub.handle(link, m));
      } catch (err) {
        logger.error({ err, session: name }, 'websocket message handler failed');
        sendError(ws, 'SERVER_ERROR', 'the message could not be handled');
      }
    });
    ws.on('close', (code) => {
      links.delete(ws);
      clearTimeout(deadline);
      hub.detach(link, link.terminated ? 'terminated: no answer to ping' : `closed (${code})`);
    });
    const deadline = setTimeout(() => {
      if (auth.claims.role === 'admin' || hub.holdsSlot(link) || hub.watches(link)) return;
      if (ws.readyState !== ws.OPEN) return;
      logger.info(
        { session: name, ip, outcome: 'no register' },
        'signalling socket closed: no register in time',
      );
      sendError(ws, 'INVALID_MESSAGE', `register: a peer connection must register within ${deadlineMs} ms`);
      ws.close(WS_CLOSE.registerTimeout, 'no register in time');
    }, deadlineMs);
    deadline.unref();
    const joined = hub.attach(link, name);
    if (!joined.ok) {
      options.onReject?.(joined.code === 'SESSION_FULL' ? 'session_full' : 'session_expired');
      links.delete(ws);
      sendError(ws, joined.code, joined.message);
      ws.close(joined.code === 'SESSION_FULL' ? WS_CLOSE.rateLimited : WS_CLOSE.sessionExpired, joined.code);
    }
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => undefined);
    const m = SIGNALLING_PATH.exec(req.url ?? '');
    if (!m) {
      reject(socket, 404, 'Not Found');
      return;
    }
    if (closing) {
      reject(socket, 503, 'Service Unavailable');
      return;
    }
    if (options.unavailable?.()) {
      reject(socket, 503, 'Service Unavailable', { 'Retry-After': '5' });
      return;
    }
    const ip = clientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], options.trust);
    if (options.rateLimits && options.sharedConnectLimit) {
      options.sharedConnectLimit(ip).then(
        (wait) => {
          if (wait > 0) {
            options.onReject?.('rate_limited');
            reject(socket, 429, 'Too Many Requests', { 'Retry-After': String(wait) });
          } else upgrade(req, socket, head, m, ip);
        },
        () => reject(socket, 503, 'Service Unavailable', { 'Retry-After': '5' }),
      );
      return;
    }
    if (options.rateLimits) {
      const d = options.clientLimits.hit('wsConnect', ip, clock.monotonicMs());
      if (!d.allowed) {
        options.onReject?.('rate_limited');
        reject(socket, 429, 'Too Many Requests', { 'Retry-After': String(d.retryAfterS) });
        return;
      }
    }
    upgrade(req, socket, head, m, ip);
  };

  const upgrade = (
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    m: RegExpExecArray,
    ip: string,
  ): void => {
    let name: string;
    let token: string | undefined;
    try {
      name = decodeURIComponent(m[1] ?? '');
      const query = new URL(req.url ?? '/', 'http://localhost').searchParams;
      token =
        bearerToken(req.headers.authorization) ??
        subprotocolToken(req.headers['sec-websocket-protocol']) ??
        query.get('token') ??
        undefined;
    } catch {
      reject(socket, 400, 'Bad Request');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, ip, name, token));
  };
  server.on('upgrade', onUpgrade);

  let heartbeat: NodeJS.Timeout | undefined;
  const beat = (): void => {
    if (links.size === 0) {
      // The last connection gone: sleep until the next one (track above).
      clearInterval(heartbeat);
      heartbeat = undefined;
      return;
    }
    for (const link of links.values()) {
      if (!link.alive) {
        link.terminated = true;
        logger.info(
          { session: sessionOf.get(link) ?? null, ip: link.ip, outcome: 'terminated' },
          'signalling socket terminated: no answer to ping',
        );
        link.ws.terminate();
        continue;
      }
      link.alive = false;
      link.ws.ping();
    }
  };

  return {
    get connections() {
      return links.size;
    },
    get heartbeating() {
      return heartbeat !== undefined;
    },
    async close() {
      closing = true;
      clearInterval(heartbeat);
      heartbeat = undefined;
      server.off('upgrade', onUpgrade);
      for (const ws of wss.clients) ws.close(WS_CLOSE.goingAway, 'server shutting down');
      const deadline = Date.now() + 2000;
      while (wss.clients.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
