/**
 * Bridge protocol 0.1: the message envelope (docs/protocol.md "Envelope") and the payload shapes the spec
 * leaves "not shown", filled as docs/protocol.md describes (after the original telemetry-bridge's protocol 0.1). Pure: text in, typed values or typed errors out.
 */
import * as z from '@broadcast-ops/core/zod';
import { decoded, rejected, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export const PROTOCOL_VERSION = '0.1';

export const MESSAGE_TYPES = [
  'command',
  'event',
  'state',
  'ack',
  'error',
  'subscribe',
  'unsubscribe',
] as const;
export type MessageType = (typeof MESSAGE_TYPES)[number];

export const ACK_STATUSES = ['received', 'completed', 'failed', 'timeout', 'rejected'] as const;
export type AckStatus = (typeof ACK_STATUSES)[number];

/** Namespace of a sender or recipient (docs/protocol.md "Envelope"). */
export const NAMESPACE_RE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
/** A concrete state/command path: lower case, dot separated, no wildcards. */
export const PATH_RE = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/;
export const MAX_PATH_LENGTH = 256;
export const MAX_ID_LENGTH = 128;
export const MAX_CORRELATION_ID_LENGTH = 64;
export const MAX_TTL_MS = 300_000;
export const MAX_PATTERNS = 100;

/** Every envelope the hub sends or accepts. `offset` is the hub-wide log position of broadcast messages. */
export interface Envelope<P = unknown> {
  id: string;
  type: MessageType;
  source: string;
  target?: string;
  path: string;
  payload: P;
  timestamp: number;
  correlationId?: string;
  sequence: number;
  ttl?: number;
  idempotencyKey?: string;
  offset?: number;
}

export interface CommandPayload {
  action: string;
  params?: Record<string, unknown>;
}
export interface EventPayload {
  event: string;
  data?: unknown;
}
export interface StatePayload {
  value: unknown;
  stale?: boolean;
  owner?: string;
  version?: number;
}
export interface ErrorInfo {
  code: string;
  message: string;
  details?: unknown;
}
export interface AckPayload {
  status: AckStatus;
  commandId: string;
  result?: unknown;
  error?: ErrorInfo;
}
export interface ErrorPayload extends ErrorInfo {
  relatedMessageId?: string;
}
export interface SubscribePayload {
  patterns: string[];
  filter?: 'state' | 'events' | 'all';
  snapshot?: boolean;
  /** Resume after a reconnect (offset + epoch, as Centrifugo's history recovery; docs/protocol.md). */
  since?: { offset: number; epoch: string };
}
export interface UnsubscribePayload {
  patterns: string[];
}

export interface HandshakeFrame {
  type: 'handshake';
  name: string;
  version: string;
  authToken?: string;
  /** The token a previous handshake_response issued: proves this is the same client (namespace back). */
  resumeToken?: string;
  /**
   * A stable id the client chose (and keeps across its restarts): with authentication off, the scope of its
   * idempotency keys (docs/protocol.md "Exactly once").
   */
  clientId?: string;
  metadata?: Record<string, unknown>;
}
export interface HandshakeResponse {
  type: 'handshake_response';
  success: boolean;
  sessionId?: string;
  namespace?: string;
  /** Present in a later handshake to get the same namespace back, even while the old socket lingers. */
  resumeToken?: string;
  serverVersion: string;
  protocolVersion: string;
  error?: string;
}
export interface HeartbeatFrame {
  type: 'ping' | 'pong';
  timestamp?: number;
}

/** Transport-level error (not an envelope): before the handshake, or a frame that is not JSON. */
export interface TransportError {
  type: 'error';
  code: string;
  message: string;
  timestamp: number;
}

const idString = z.textRange(1, MAX_ID_LENGTH);
const path = z
  .string()
  .check(z.maxLength(MAX_PATH_LENGTH), z.regex(PATH_RE, 'must be a lower-case dotted path'));
const namespace = z
  .string()
  .check(z.maxLength(128), z.regex(NAMESPACE_RE, 'must be a namespace like companion.satellite'));
const pattern = z
  .textRange(1, MAX_PATH_LENGTH)
  .check(z.refine((p) => patternError(p) === undefined, { message: 'invalid pattern' }));
const patterns = z.array(pattern).check(z.minLength(1), z.maxLength(MAX_PATTERNS));

const commandPayload = z.strictObject({
  action: z.textRange(1, 64),
  params: z.optional(z.record(z.string(), z.unknown())),
});
const eventPayload = z.strictObject({ event: z.textRange(1, 64), data: z.optional(z.unknown()) });
// `value` must be present (zod 4 treats an unknown-typed key as required); null clears the key.
const statePayload = z.strictObject({ value: z.unknown() });
const subscribePayload = z.strictObject({
  patterns,
  filter: z.optional(z.enum(['state', 'events', 'all'])),
  snapshot: z.optional(z.boolean()),
  since: z.optional(z.strictObject({ offset: z.int().check(z.minimum(0)), epoch: z.textRange(1, 64) })),
});
const unsubscribePayload = z.strictObject({ patterns });

const base = {
  id: idString,
  // The hub overwrites `source` with the connection's namespace, so any bounded string is fine.
  source: z.optional(z.string().check(z.maxLength(128))),
  path,
  timestamp: z.int().check(z.positive()),
  correlationId: z.optional(z.textRange(1, MAX_CORRELATION_ID_LENGTH)),
  sequence: z.optional(z.int().check(z.minimum(0))),
};

const clientEnvelope = z.discriminatedUnion('type', [
  z.strictObject({
    ...base,
    type: z.literal('command'),
    target: namespace,
    payload: commandPayload,
    ttl: z.optional(z.int().check(z.positive(), z.maximum(MAX_TTL_MS))),
    idempotencyKey: z.optional(z.textRange(1, MAX_ID_LENGTH)),
  }),
  z.strictObject({ ...base, type: z.literal('event'), payload: eventPayload }),
  z.strictObject({ ...base, type: z.literal('state'), payload: statePayload }),
  z.strictObject({ ...base, type: z.literal('subscribe'), payload: subscribePayload }),
  z.strictObject({ ...base, type: z.literal('unsubscribe'), payload: unsubscribePayload }),
]);

/** A client-chosen stable id (handshake `clientId`). */
export const CLIENT_ID_RE = /^[A-Za-z0-9_-]{8,128}$/;

const handshake = z.strictObject({
  type: z.literal('handshake'),
  name: z.string().check(z.maxLength(256)),
  version: z.string().check(z.maxLength(64)),
  authToken: z.optional(z.string().check(z.maxLength(1024))),
  resumeToken: z.optional(z.textRange(1, 128)),
  clientId: z.optional(z.string().check(z.regex(CLIENT_ID_RE, 'clientId: 8-128 characters A-Z a-z 0-9 _ -'))),
  metadata: z.optional(z.record(z.string(), z.unknown())),
});
const heartbeat = z.strictObject({
  type: z.enum(['ping', 'pong']),
  timestamp: z.optional(z.number()),
});

/**
 * The schema compiled to zod's fast path (`z.compile`), built on its first parse rather than at module load, as
 * the classic API's objects built theirs (a bridge that no client reaches never pays for it). zod's mini
 * objects have no fast path of their own: without it a valid frame took 1.4 to 1.8 times as long to check
 * (docs/performance.md "Parsing the envelope"). Refused input is parsed again by zod's runtime parser, so the
 * issues, and the messages clients read, are the runtime's own; a schema zod cannot compile stays on the
 * runtime parser.
 */
function compiledOnUse<S extends z.core.$ZodType>(schema: S): () => S {
  let compiled: S | undefined;
  return () => (compiled ??= z.compile(schema));
}
const clientEnvelopeSchema = compiledOnUse(clientEnvelope);
const handshakeSchema = compiledOnUse(handshake);
const heartbeatSchema = compiledOnUse(heartbeat);

export type ClientEnvelope = z.output<typeof clientEnvelope>;
export type ClientCommand = Extract<ClientEnvelope, { type: 'command' }>;

export type ClientFrame =
  | { kind: 'handshake'; frame: HandshakeFrame }
  | { kind: 'heartbeat'; frame: HeartbeatFrame }
  | { kind: 'envelope'; frame: ClientEnvelope };

/** Why a client frame was refused; `code` is the error code the client is answered with. */
export interface FrameError extends DecodeError<'PARSE_ERROR' | 'INVALID_MESSAGE'> {
  relatedMessageId?: string;
  /** The frame said `"type": "handshake"` but failed its schema (the session answers it in kind). */
  handshake?: true;
}

export type FrameParseResult = Decoded<ClientFrame, FrameError>;

function issuesText(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

/** Deepest object/array nesting a client frame may have (the envelope itself is level 1). */
export const MAX_JSON_DEPTH = 64;

/**
 * The deepest `{`/`[` nesting of JSON text, brackets inside strings ignored. One pass over the text, no
 * recursion; stops counting once past the limit. Malformed text is left to JSON.parse.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) {
        max = depth;
        if (max > MAX_JSON_DEPTH) return max;
      }
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

/**
 * Parse one client text frame. Never throws: JSON errors are PARSE_ERROR, schema errors INVALID_MESSAGE with
 * the message id when one could be read (so the client can correlate the error).
 */
export function parseClientFrame(text: string): FrameParseResult {
  const depth = jsonDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    // Refused before parsing: deep nesting would cost stack in the schema and in every later copy.
    return rejected({
      code: 'INVALID_MESSAGE',
      message: `frame nests objects/arrays deeper than ${MAX_JSON_DEPTH} levels`,
    });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return rejected({ code: 'PARSE_ERROR', message: 'frame is not valid JSON' });
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return rejected({ code: 'INVALID_MESSAGE', message: 'frame must be a JSON object' });
  }
  const type = (raw as { type?: unknown }).type;
  const rawId = (raw as { id?: unknown }).id;
  const related =
    typeof rawId === 'string' && rawId.length > 0 && rawId.length <= MAX_ID_LENGTH
      ? { relatedMessageId: rawId }
      : {};
  if (type === 'handshake') {
    const r = handshakeSchema().safeParse(raw);
    if (!r.success) {
      return rejected({ code: 'INVALID_MESSAGE', message: issuesText(r.error.issues), handshake: true });
    }
    const frame: HandshakeFrame = { type: 'handshake', name: r.data.name, version: r.data.version };
    if (r.data.authToken !== undefined) frame.authToken = r.data.authToken;
    if (r.data.resumeToken !== undefined) frame.resumeToken = r.data.resumeToken;
    if (r.data.clientId !== undefined) frame.clientId = r.data.clientId;
    if (r.data.metadata !== undefined) frame.metadata = r.data.metadata;
    return decoded({ kind: 'handshake', frame });
  }
  if (type === 'ping' || type === 'pong') {
    const r = heartbeatSchema().safeParse(raw);
    if (!r.success) return rejected({ code: 'INVALID_MESSAGE', message: issuesText(r.error.issues) });
    const frame: HeartbeatFrame = { type: r.data.type };
    if (r.data.timestamp !== undefined) frame.timestamp = r.data.timestamp;
    return decoded({ kind: 'heartbeat', frame });
  }
  const r = clientEnvelopeSchema().safeParse(raw);
  if (!r.success)
    return rejected({ code: 'INVALID_MESSAGE', message: issuesText(r.error.issues), ...related });
  return decoded({ kind: 'envelope', frame: r.data });
}

/**
 * Why a subscription pattern is invalid, or undefined. `*` is exactly one segment; `**` is one or more
 * trailing segments and only allowed last (NATS `>` semantics, docs/protocol.md "Patterns").
 */
export function patternError(p: string): string | undefined {
  if (p.length === 0 || p.length > MAX_PATH_LENGTH) return 'pattern length out of range';
  const segments = p.split('.');
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i] as string;
    if (s === '**') {
      if (i !== segments.length - 1) return '"**" is only allowed as the last segment';
    } else if (s !== '*' && !/^[a-z0-9_]+$/.test(s)) {
      return `segment "${s}" is not a lower-case name, "*" or "**"`;
    }
  }
  return undefined;
}

/** Name sanitising for `app.<name>` (docs/protocol.md "Handshake"): lower case, [^a-z0-9] → _, trim _, ≤32, default client. */
export function sanitiseClientName(name: string): string {
  const s = name
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 32)
    .replace(/_+$/g, '');
  // A namespace segment must start with a letter (NAMESPACE_RE); prefix digits-first names.
  if (s.length === 0) return 'client';
  return /^[a-z]/.test(s) ? s : `c_${s}`.slice(0, 32);
}
