/**
 * One client connection's protocol handler, independent of the transport (WebSocket today; any framed
 * transport can reuse it): handshake first, authentication, then each text frame is rate-limited, parsed
 * (protocol/envelope.ts) and handed to the hub as a typed envelope. Close codes live here and in
 * close-codes.ts, never in the domain. A failure while handling a frame is answered with INTERNAL_ERROR and
 * logged; the connection and every other client carry on.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Clock, Logger, TimerHandle } from '@broadcast-ops/core';
import type { Hub } from '../domain/hub.ts';
import type { DisconnectReason } from '../domain/outbound-queue.ts';
import {
  PROTOCOL_VERSION,
  parseClientFrame,
  sanitiseClientName,
  type HandshakeResponse,
} from '../protocol/envelope.ts';
import { CloseCode } from '../protocol/close-codes.ts';
import { closeFor } from './close-codes.ts';

export interface SessionOptions {
  requireAuth: boolean;
  authTokens: readonly string[];
  handshakeTimeoutMs: number;
  idleTimeoutMs: number;
  serverVersion: string;
}

/** What the session needs from its transport. */
export interface SessionTransport {
  bufferedAmount(): number;
  send(data: string): void;
  close(code: number, reason: string): void;
  /** Peer address as the transport sees it (the socket's remote address; no proxy headers are trusted). */
  remote: string;
}

export interface SessionEvents {
  opened(namespace: string): void;
  authFailed(): void;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Constant-time membership test: every configured token is compared, equal-length digests only. */
export function tokenAccepted(token: string | undefined, tokens: readonly string[]): boolean {
  if (token === undefined || token.length === 0) return false;
  const d = digest(token);
  let ok = false;
  for (const t of tokens) if (timingSafeEqual(d, digest(t))) ok = true;
  return ok;
}

const RELATED_ID_RE = /"id"\s*:\s*"([^"\\]{1,128})"/;

export class ClientSession {
  readonly #hub: Hub;
  readonly #t: SessionTransport;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #opts: SessionOptions;
  readonly #headerToken: string | undefined;
  readonly #events: SessionEvents;
  #connId: number | undefined;
  #namespace: string | undefined;
  #openedAt = 0;
  #timer: TimerHandle | undefined;
  #lastInbound: number;
  #closed = false;
  #closeCode: number | undefined;

  constructor(
    hub: Hub,
    transport: SessionTransport,
    clock: Clock,
    logger: Logger,
    options: SessionOptions,
    headerToken: string | undefined,
    events: SessionEvents = { opened: () => undefined, authFailed: () => undefined },
  ) {
    this.#hub = hub;
    this.#t = transport;
    this.#clock = clock;
    this.#logger = logger;
    this.#opts = options;
    this.#headerToken = headerToken;
    this.#events = events;
    this.#lastInbound = clock.monotonicMs();
    this.#timer = clock.setTimer(options.handshakeTimeoutMs, () => {
      this.#timer = undefined;
      if (this.#connId === undefined) this.#close(CloseCode.HANDSHAKE_TIMEOUT, 'Handshake timeout');
    });
  }

  get namespace(): string | undefined {
    return this.#namespace;
  }
  get connId(): number | undefined {
    return this.#connId;
  }

  /** The sink the hub writes to: the hub's close reasons become close codes here. */
  readonly sink = {
    bufferedAmount: (): number => this.#t.bufferedAmount(),
    send: (data: string): void => this.#t.send(data),
    close: (reason: DisconnectReason): void => {
      const c = closeFor(reason);
      this.#close(c.code, c.text);
    },
  };

  #close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closeCode = code;
    this.#timer?.cancel();
    this.#t.close(code, reason);
  }

  #respond(r: Omit<HandshakeResponse, 'type' | 'serverVersion' | 'protocolVersion'>): void {
    const body: HandshakeResponse = {
      type: 'handshake_response',
      serverVersion: this.#opts.serverVersion,
      protocolVersion: PROTOCOL_VERSION,
      ...r,
    };
    this.#t.send(JSON.stringify(body));
  }

  receive(text: string): void {
    if (this.#closed) return;
    this.#lastInbound = this.#clock.monotonicMs();
    const connId = this.#connId;
    if (connId === undefined) {
      this.#handshake(text);
      return;
    }
    // The id is picked out without parsing (parsing is the work being limited), so the client can fail
    // the right request at once.
    if (!this.#hub.admit(connId, RELATED_ID_RE.exec(text.slice(0, 512))?.[1])) return;
    const parsed = parseClientFrame(text);
    try {
      if (!parsed.ok) {
        if (parsed.error.code === 'PARSE_ERROR') {
          // Not JSON: answered with a transport-level error (no envelope to relate it to).
          this.#hub.sendControl(connId, this.#hub.transportError('PARSE_ERROR', parsed.error.message));
          return;
        }
        this.#hub.reject(
          connId,
          'INVALID_MESSAGE',
          parsed.error.message,
          { id: parsed.error.relatedMessageId },
          'invalid',
        );
        return;
      }
      const v = parsed.value;
      if (v.kind === 'handshake') {
        this.#hub.reject(connId, 'INVALID_MESSAGE', 'handshake already completed', {}, 'handshake');
        return;
      }
      if (v.kind === 'heartbeat') {
        if (v.frame.type === 'ping') {
          this.#hub.sendControl(connId, JSON.stringify({ type: 'pong', timestamp: this.#clock.now() }));
        }
        return;
      }
      this.#hub.handle(connId, v.frame);
    } catch (err) {
      // A bug must not pass silently, nor take other clients down: log it and tell the client.
      const id = parsed.ok && parsed.value.kind === 'envelope' ? parsed.value.frame.id : undefined;
      this.#logger.error(
        { err, namespace: this.#namespace, relatedMessageId: id },
        'internal error handling a frame',
      );
      this.#hub.reject(connId, 'INTERNAL_ERROR', 'the hub failed to handle this message', { id }, 'internal');
    }
  }

  #handshake(text: string): void {
    const parsed = parseClientFrame(text);
    if (!parsed.ok && parsed.error.code === 'PARSE_ERROR') {
      this.#t.send(this.#hub.transportError('PARSE_ERROR', parsed.error.message));
      this.#close(CloseCode.NOT_HANDSHAKE, 'First message was not a handshake');
      return;
    }
    if (!parsed.ok || parsed.value.kind !== 'handshake') {
      if (!parsed.ok && parsed.error.handshake) {
        this.#respond({ success: false, error: `Invalid handshake: ${parsed.error.message}` });
        this.#close(CloseCode.INVALID_HANDSHAKE, 'Invalid handshake');
        return;
      }
      this.#t.send(this.#hub.transportError('INVALID_MESSAGE', 'the first message must be a handshake'));
      this.#close(CloseCode.NOT_HANDSHAKE, 'First message was not a handshake');
      return;
    }
    const hs = parsed.value.frame;
    const token = hs.authToken ?? this.#headerToken;
    if (this.#opts.requireAuth && !tokenAccepted(token, this.#opts.authTokens)) {
      // Logged and counted; never the token itself.
      this.#logger.warn(
        { remote: this.#t.remote, name: hs.name.slice(0, 64), tokenGiven: token !== undefined },
        'client authentication failed',
      );
      this.#events.authFailed();
      this.#respond({ success: false, error: 'Authentication failed' });
      this.#close(CloseCode.AUTH_FAILED, 'Authentication failed');
      return;
    }
    this.#timer?.cancel();
    const opened = this.#hub.openClient(this.sink, sanitiseClientName(hs.name), {
      resumeToken: hs.resumeToken,
      credential: this.#opts.requireAuth ? token : undefined,
      clientId: hs.clientId,
    });
    this.#connId = opened.connId;
    this.#namespace = opened.namespace;
    this.#openedAt = this.#clock.monotonicMs();
    this.#respond({
      success: true,
      sessionId: opened.sessionId,
      namespace: opened.namespace,
      resumeToken: opened.resumeToken,
    });
    this.#logger.info(
      {
        namespace: opened.namespace,
        sessionId: opened.sessionId,
        remote: this.#t.remote,
        clientVersion: hs.version.slice(0, 64),
        tookOver: opened.superseded,
      },
      'client connected',
    );
    this.#events.opened(opened.namespace);
    this.#armIdle();
  }

  #armIdle(): void {
    const check = (): void => {
      this.#timer = undefined;
      if (this.#closed) return;
      const idle = this.#clock.monotonicMs() - this.#lastInbound;
      if (idle >= this.#opts.idleTimeoutMs) {
        this.#close(CloseCode.IDLE_TIMEOUT, 'Idle timeout');
        return;
      }
      this.#timer = this.#clock.setTimer(this.#opts.idleTimeoutMs - idle, check);
    };
    this.#timer = this.#clock.setTimer(this.#opts.idleTimeoutMs, check);
  }

  /** Close from the server side (shutdown, kick). */
  close(code: number, reason: string): void {
    this.#close(code, reason);
  }

  /** The transport reports the connection gone (with the close code it saw). */
  closed(code: number): void {
    this.#closed = true;
    this.#timer?.cancel();
    if (this.#connId === undefined) return;
    this.#hub.closeClient(this.#connId);
    this.#logger.info(
      {
        namespace: this.#namespace,
        code: this.#closeCode ?? code,
        byServer: this.#closeCode !== undefined,
        durationMs: Math.round(this.#clock.monotonicMs() - this.#openedAt),
      },
      'client disconnected',
    );
  }
}
