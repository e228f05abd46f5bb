/**
 * One client connection's protocol handler, independent of the transport (WebSocket today; any framed
 * transport can reuse it): handshake first, authentication, then frames go to the hub (reference §1.6).
 * The transport gives it a sink and feeds it text frames and timer ticks.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import type { Hub } from './hub.ts';
import type { OutboundSink } from './outbound-queue.ts';
import {
  CloseCode,
  PROTOCOL_VERSION,
  parseClientFrame,
  sanitiseClientName,
  type HandshakeResponse,
} from '../protocol/envelope.ts';

export interface SessionOptions {
  requireAuth: boolean;
  authTokens: readonly string[];
  handshakeTimeoutMs: number;
  idleTimeoutMs: number;
  serverVersion: string;
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

export class ClientSession {
  readonly #hub: Hub;
  readonly #sink: OutboundSink;
  readonly #clock: Clock;
  readonly #opts: SessionOptions;
  readonly #headerToken: string | undefined;
  #connId: number | undefined;
  #namespace: string | undefined;
  #timer: TimerHandle | undefined;
  #lastInbound: number;
  #closed = false;
  readonly #onOpen: (namespace: string) => void;

  constructor(
    hub: Hub,
    sink: OutboundSink,
    clock: Clock,
    options: SessionOptions,
    headerToken: string | undefined,
    onOpen: (namespace: string) => void = () => undefined,
  ) {
    this.#hub = hub;
    this.#sink = sink;
    this.#clock = clock;
    this.#opts = options;
    this.#headerToken = headerToken;
    this.#onOpen = onOpen;
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

  #close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#timer?.cancel();
    this.#sink.close(code, reason);
  }

  #respond(r: Omit<HandshakeResponse, 'type' | 'serverVersion' | 'protocolVersion'>): void {
    const body: HandshakeResponse = {
      type: 'handshake_response',
      serverVersion: this.#opts.serverVersion,
      protocolVersion: PROTOCOL_VERSION,
      ...r,
    };
    this.#sink.send(JSON.stringify(body));
  }

  receive(text: string): void {
    if (this.#closed) return;
    this.#lastInbound = this.#clock.monotonicMs();
    if (this.#connId !== undefined) {
      this.#hub.receive(this.#connId, text);
      return;
    }
    const parsed = parseClientFrame(text);
    if (!parsed.ok && parsed.code === 'PARSE_ERROR') {
      this.#sink.send(this.#hub.transportError('PARSE_ERROR', parsed.message));
      this.#close(CloseCode.NOT_HANDSHAKE, 'First message was not a handshake');
      return;
    }
    if (!parsed.ok || parsed.value.kind !== 'handshake') {
      if (!parsed.ok && parsed.handshake) {
        this.#respond({ success: false, error: `Invalid handshake: ${parsed.message}` });
        this.#close(CloseCode.INVALID_HANDSHAKE, 'Invalid handshake');
        return;
      }
      this.#sink.send(this.#hub.transportError('INVALID_MESSAGE', 'the first message must be a handshake'));
      this.#close(CloseCode.NOT_HANDSHAKE, 'First message was not a handshake');
      return;
    }
    const hs = parsed.value.frame;
    if (this.#opts.requireAuth) {
      const token = hs.authToken ?? this.#headerToken;
      if (!tokenAccepted(token, this.#opts.authTokens)) {
        this.#respond({ success: false, error: 'Authentication failed' });
        this.#close(CloseCode.AUTH_FAILED, 'Authentication failed');
        return;
      }
    }
    this.#timer?.cancel();
    const opened = this.#hub.openClient(this.#sink, sanitiseClientName(hs.name));
    this.#connId = opened.connId;
    this.#namespace = opened.namespace;
    this.#respond({ success: true, sessionId: opened.sessionId, namespace: opened.namespace });
    this.#onOpen(opened.namespace);
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

  /** The transport reports the connection gone. */
  closed(): void {
    this.#closed = true;
    this.#timer?.cancel();
    if (this.#connId !== undefined) this.#hub.closeClient(this.#connId);
  }
}
