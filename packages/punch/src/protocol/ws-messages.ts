import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';
import type { LinkAlarms, LinkFigures } from './health-figures.ts';
import type { RelayPathView } from './relay-path-view.ts';
import { NAME_PATTERN } from './schemas.ts';

/**
 * Wire format of the WebSocket signalling (spec "WebSocket"; README "WebSocket signalling"): the messages a
 * peer may send, parsed and bounded here, and the messages the server sends. Every message is a JSON
 * object with a `type`. Unknown fields are ignored (spec "Versioning"); `v` may be present on any message
 * and must then be a number. Parsing never throws: a bad message becomes a reason text for `INVALID_MESSAGE`.
 */

export const SRT_STATUSES = ['connecting', 'connected', 'disconnected', 'error'] as const;
export const TALLY_STATES = ['off', 'preview', 'program'] as const;
export type SrtStatus = (typeof SRT_STATUSES)[number];
export type TallyState = (typeof TALLY_STATES)[number];

/** Spec "Limits": register port 1024-65535. */
export const MIN_PEER_PORT = 1024;
export const MAX_PEER_PORT = 65535;
/** `meta` is echoed to the other peer in `peer`: at most this many bytes of JSON. */
export const MAX_META_BYTES = 2048;
export const MAX_LABEL_LENGTH = 64;
export const MAX_CLIENT_ID_LENGTH = 128;

export interface RegisterMessage {
  type: 'register';
  stream: string | undefined;
  port: number;
  role: 'sender' | 'receiver' | null;
  meta: Record<string, unknown>;
}
export interface HealthMessage {
  type: 'health';
  stream: string | undefined;
  rtt: number;
  retransmit: number;
  bitrate: number;
  dropped: number | undefined;
  buffer: number | undefined;
  /**
   * Added fields (docs/health.md "What the agent sends"; servers ignore unknown fields, so other clients
   * may leave them out): the end's role, the interval counters of srt-live-transmit's statistics summed
   * over the report's period, and the receiver's TSBPD latency in ms.
   */
  role: 'sender' | 'receiver' | undefined;
  counts: { packets: number; unique: number; lost: number; retransmitted: number } | undefined;
  latency: number | undefined;
}
export interface StatusMessage {
  type: 'status';
  stream: string | undefined;
  srt: SrtStatus;
}
export interface TallyMessage {
  type: 'tally';
  stream: string | undefined;
  state: TallyState;
  /**
   * Added (README "Tally"): the sender no longer knows the mixer's tally (its data is stale or lost). The
   * spec's states have no "unknown"; a sender puts `state: "off"` with `stale: true`, which spec clients
   * read as off and tally-aware clients show as unknown, never as the last colour.
   */
  stale: boolean;
}
/**
 * Added (README "Tally"): a connection that only follows a stream's tally (the join page), without taking
 * a peer slot. A peer token may watch its own stream only.
 */
export interface WatchMessage {
  type: 'watch';
  stream: string | undefined;
}
export interface ReadyMessage {
  type: 'ready';
  stream: string | undefined;
}
export type ClientMessage =
  RegisterMessage | HealthMessage | StatusMessage | TallyMessage | ReadyMessage | WatchMessage;

/**
 * Why a client message was refused. Every code is answered to the peer as INVALID_MESSAGE with `message` as
 * the text (README "WebSocket protocol"); the codes tell the refusals apart in tests.
 */
export type ClientMessageErrorCode = 'too-deep' | 'not-json' | 'not-object' | 'invalid-field';

export type ParseResult = Decoded<ClientMessage, DecodeError<ClientMessageErrorCode>>;

type Obj = Record<string, unknown>;

class Invalid extends Error {}

function bad(reason: string): never {
  throw new Invalid(reason);
}

function optionalStream(o: Obj): string | undefined {
  const s = o['stream'];
  if (s === undefined || s === null) return undefined;
  if (typeof s !== 'string' || !NAME_PATTERN.test(s)) bad('stream: must be a stream name');
  return s;
}

function number(o: Obj, key: string, min: number, max: number, required: boolean): number | undefined {
  const v = o[key];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(`${key}: must be a number`);
  if (v < min || v > max) bad(`${key}: must be between ${min} and ${max}`);
  return v;
}

function oneOf<T extends string>(o: Obj, key: string, allowed: readonly T[]): T {
  const v = o[key];
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    bad(`${key}: must be one of ${allowed.join(', ')}`);
  }
  return v as T;
}

function parseMeta(v: unknown): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) bad('meta: must be an object');
  if (Buffer.byteLength(JSON.stringify(v)) > MAX_META_BYTES) bad(`meta: at most ${MAX_META_BYTES} bytes`);
  const meta = v as Obj;
  const label = meta['label'];
  if (label !== undefined && (typeof label !== 'string' || label.length > MAX_LABEL_LENGTH)) {
    bad(`meta.label: must be a string of at most ${MAX_LABEL_LENGTH} characters`);
  }
  const clientId = meta['clientId'];
  if (
    clientId !== undefined &&
    (typeof clientId !== 'string' || clientId === '' || clientId.length > MAX_CLIENT_ID_LENGTH)
  ) {
    bad(`meta.clientId: must be a non-empty string of at most ${MAX_CLIENT_ID_LENGTH} characters`);
  }
  return meta;
}

/** Largest interval counter accepted: a day of 1 Gbit/s in 1316-byte packets fits many times over. */
const MAX_COUNT = 2 ** 40;

function parseCounts(v: unknown): HealthMessage['counts'] {
  if (v === undefined) return undefined;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) bad('counts: must be an object');
  const c = v as Obj;
  const get = (k: string): number => {
    const n = c[k];
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_COUNT) {
      bad(`counts.${k}: must be an integer between 0 and ${MAX_COUNT}`);
    }
    return n;
  };
  return {
    packets: get('packets'),
    unique: get('unique'),
    lost: get('lost'),
    retransmitted: get('retransmitted'),
  };
}

function parseObject(o: Obj): ClientMessage {
  const type = o['type'];
  if (typeof type !== 'string') bad('type: required string');
  if (o['v'] !== undefined && (typeof o['v'] !== 'number' || !Number.isFinite(o['v']))) {
    bad('v: must be a number');
  }
  switch (type) {
    case 'register': {
      const port = o['port'];
      if (typeof port !== 'number' || !Number.isInteger(port)) bad('port: required integer');
      if (port < MIN_PEER_PORT || port > MAX_PEER_PORT) {
        bad(`port: must be between ${MIN_PEER_PORT} and ${MAX_PEER_PORT}`);
      }
      const role =
        o['role'] === undefined || o['role'] === null ? null : oneOf(o, 'role', ['sender', 'receiver']);
      return { type, stream: optionalStream(o), port, role, meta: parseMeta(o['meta']) };
    }
    case 'health':
      return {
        type,
        stream: optionalStream(o),
        rtt: number(o, 'rtt', 0, 600_000, true) as number,
        retransmit: number(o, 'retransmit', 0, 100, true) as number,
        bitrate: number(o, 'bitrate', 0, 1e12, true) as number,
        dropped: number(o, 'dropped', 0, Number.MAX_SAFE_INTEGER, false),
        buffer: number(o, 'buffer', 0, 100, false),
        role: o['role'] === undefined ? undefined : oneOf(o, 'role', ['sender', 'receiver'] as const),
        counts: parseCounts(o['counts']),
        latency: number(o, 'latency', 0, 600_000, false),
      };
    case 'status':
      return { type, stream: optionalStream(o), srt: oneOf(o, 'srt', SRT_STATUSES) };
    case 'tally':
      if (o['stale'] !== undefined && typeof o['stale'] !== 'boolean') bad('stale: must be a boolean');
      return {
        type,
        stream: optionalStream(o),
        state: oneOf(o, 'state', TALLY_STATES),
        stale: o['stale'] === true,
      };
    case 'watch':
      return { type, stream: optionalStream(o) };
    case 'ready':
      return { type, stream: optionalStream(o) };
    default:
      return bad(`type: unknown message type ${JSON.stringify(type.slice(0, 32))}`);
  }
}

/** Parse one text frame. Never throws. */
/** Deepest nesting of objects and arrays a client message may have (a `meta` object is flat in practice). */
export const MAX_DEPTH = 16;

/**
 * Nesting depth of a JSON text, scanned without recursion before anything parses or walks it, so a
 * message nested thousands deep is refused as INVALID_MESSAGE instead of exhausting the stack.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

export function parseClientMessage(text: string): ParseResult {
  if (jsonDepthExceeds(text, MAX_DEPTH)) {
    return reject('too-deep', `message: nested deeper than ${MAX_DEPTH} levels`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return reject('not-json', 'message: not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return reject('not-object', 'message: must be a JSON object with a "type"');
  }
  try {
    return decoded(parseObject(value as Obj));
  } catch (err) {
    if (err instanceof Invalid) return reject('invalid-field', err.message);
    throw err;
  }
}

// --- server → peer

/** Error codes of the WebSocket `error` message (spec "Errors", plus SERVER_ERROR from the original's enum). */
export type WsErrorCode =
  'SESSION_FULL' | 'SESSION_EXPIRED' | 'STREAM_TAKEN' | 'AUTH_FAILED' | 'INVALID_MESSAGE' | 'SERVER_ERROR';

export type HealthStatus = 'healthy' | 'warning' | 'critical';

export type ServerMessage =
  | {
      type: 'peer';
      stream: string;
      ip: string;
      port: number;
      localPort: number;
      passphrase: string;
      latency: number;
      meta: Record<string, unknown>;
    }
  | {
      type: 'peer_match';
      stream: string;
      peer_a: { ip: string; port: number };
      peer_b: { ip: string; port: number };
      localPort: number;
      passphrase: string;
      latency: number;
    }
  /**
   * `partnerSrt` (extra field, only to a peer that reported its SRT `connected`): the partner's last SRT
   * status report, null when it has reported none since it (re)registered. A peer whose SRT still runs
   * restarts it unless the partner's runs too (README "Reconnection": a restarted partner needs a fresh
   * rendezvous).
   */
  | { type: 'start'; stream: string; partnerSrt?: string | null }
  | { type: 'presence'; stream: string; slot: 'a' | 'b'; present: boolean; label: string }
  | {
      type: 'session';
      state: string;
      /** `path` (added, docs/relay.md): present only while the stream is on the relay. */
      streams: Record<string, { state: string; peers: number; path?: 'relayed' }>;
      connected: number;
      total: number;
    }
  /**
   * `stale` and `age` (added, README "Tally"): present only when the tally is not known; `age` is the ms
   * since the broker learnt that (so a page that connects later shows how long it has been unknown).
   */
  | { type: 'tally'; stream: string; state: TallyState; stale?: true; age?: number }
  | {
      type: 'health_report';
      streams: Record<
        string,
        {
          rtt: number;
          retransmit: number;
          bitrate: number;
          status: HealthStatus;
          suggestedLatency: number;
          /** Added (docs/relay.md): present only while the stream's link runs through the relay. */
          path?: 'relayed';
          /** Added (docs/relay.md "What the relay measures"): the relay's figures, while relayed. */
          relay?: RelayPathView;
          /** Added: each end's latest report (slot a, slot b). */
          ends?: Record<string, EndHealth>;
          /** Added (docs/health.md): each end's figures over 10 s and 60 s, by role; advice; alarm state. */
          figures?: LinkFigures;
          advice?: string[];
          alarms?: LinkAlarms;
        }
      >;
    }
  /** Added (docs/health.md "Alarms"): to admin connections when an alarm is raised or cleared. */
  | {
      type: 'health_alarm';
      stream: string;
      alarm: 'drops' | 'margin';
      active: boolean;
      message: string;
      at: number;
    }
  | { type: 'error'; code: WsErrorCode; message: string }
  | { type: 'session_closed'; reason: 'admin_closed' | 'ttl_expired' | 'error' };

/** One end's latest health report, as the console shows it. */
export interface EndHealth {
  rtt: number;
  retransmit: number;
  bitrate: number;
  dropped: number | null;
  buffer: number | null;
  /** Seconds since it arrived. */
  age: number;
  /** Added: which end this is (sender or receiver), null when it did not say. */
  role: 'sender' | 'receiver' | null;
}

export function encode(message: ServerMessage): string {
  return JSON.stringify(message);
}

/**
 * Close codes (RFC 6455 §7.4.2: 4000-4999 are for applications). They mirror the HTTP statuses of the same
 * refusals so that one table explains both. 1000 follows `session_closed`, 1001 a server shutdown, and
 * 1009 (RFC 6455 §7.4.1, "message too big") is sent by the `ws` library for a frame over the size limit.
 */
export const WS_CLOSE = {
  normal: 1000,
  goingAway: 1001,
  tooBig: 1009,
  invalidMessage: 4400,
  authFailed: 4401,
  forbidden: 4403,
  replaced: 4409,
  registerTimeout: 4408,
  sessionExpired: 4410,
  rateLimited: 4429,
} as const;
