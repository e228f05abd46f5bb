import * as z from 'zod';

/**
 * Request and response schemas of the HTTP API. The same zod objects validate requests and generate the
 * OpenAPI document (openapi.ts), so the two cannot drift apart.
 *
 * Unknown request fields are ignored, not rejected: spec "Versioning" says "Servers ignore unknown fields"
 * (the original's JSON Schema says `additionalProperties: false`; the spec text wins, see docs/protocol.md).
 */

/** The original Punch JSON Schema's `SessionName` (docs/protocol.md); also used for stream names. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MAX_NAME_LENGTH = 64;
/** Spec "Limits": latency 20-8000 ms, default 200 ms. */
export const MIN_LATENCY_MS = 20;
export const MAX_LATENCY_MS = 8000;
/** Single-stream sessions use this stream name (README "Decisions"). */
export const DEFAULT_STREAM = 'default';
export const PUNCH_VERSION = '1.0';
/** Longest Turnstile response accepted (from the body or the `cf-turnstile-response` header). */
export const MAX_TURNSTILE_TOKEN_LENGTH = 4096;

export const SESSION_STATES = ['WAITING', 'READY', 'CONNECTED', 'RELAYING', 'CLOSED'] as const;
export const STREAM_STATES = ['waiting', 'ready', 'relaying', 'connected'] as const;
export const SRT_ROLES = ['sender', 'receiver'] as const;
export const CONNECT_FORMATS = ['transcoder', 'studio-app', 'mixer', 'pipeline', 'live-transmit'] as const;
export type ConnectFormat = (typeof CONNECT_FORMATS)[number];

export interface SchemaLimits {
  maxStreams: number;
  defaultTtl: number;
  maxTtl: number;
  defaultLatency: number;
}

export const nameSchema = z
  .string()
  .max(MAX_NAME_LENGTH, { error: `at most ${MAX_NAME_LENGTH} characters` })
  .regex(NAME_PATTERN, {
    error: 'must start with a letter or digit and contain only letters, digits, ".", "_" and "-"',
  });

export function makeSchemas(limits: SchemaLimits) {
  const createSessionRequest = z
    .object({
      name: nameSchema.meta({ description: 'Session name, 1-64 characters, URL-safe' }),
      streams: z
        .array(nameSchema)
        .min(1, { error: 'at least one stream name (omit the field for one default stream)' })
        .max(limits.maxStreams, { error: `at most ${limits.maxStreams} streams` })
        .refine((s) => new Set(s).size === s.length, { error: 'stream names must be unique' })
        .optional()
        .meta({
          description: `Named stream slots; default one stream named "${DEFAULT_STREAM}"`,
          uniqueItems: true,
        }),
      latency: z
        .number()
        .int()
        .min(MIN_LATENCY_MS)
        .max(MAX_LATENCY_MS)
        .default(limits.defaultLatency)
        .meta({ description: 'Recommended SRT latency, milliseconds' }),
      ttl: z
        .number()
        .int()
        .min(1)
        .max(limits.maxTtl)
        .default(limits.defaultTtl)
        .meta({ description: 'Session lifetime, seconds' }),
      turnstileToken: z.string().max(MAX_TURNSTILE_TOKEN_LENGTH).optional().meta({
        description: 'Cloudflare Turnstile response; required only when the server has a Turnstile secret',
      }),
    })
    .meta({ id: 'CreateSessionRequest' });

  const tokenRequest = z
    .object({
      stream: nameSchema
        .nullable()
        .optional()
        .meta({ description: 'Stream the token is scoped to; omitted: the first stream; null: all streams' }),
      label: z.string().max(64).optional().meta({ description: 'Operator label carried in the token' }),
    })
    .meta({ id: 'PeerTokenRequest' });

  const connectQuery = z
    .object({
      stream: nameSchema.optional().meta({ description: "Stream name; default the session's first stream" }),
      role: z
        .enum(SRT_ROLES)
        .default('sender')
        .meta({ description: 'SRT role of peer A; peer B gets the other' }),
    })
    .meta({ id: 'ConnectQuery' });

  const extendRequest = z
    .object({
      ttl: z
        .number()
        .int()
        .min(1)
        .max(limits.maxTtl)
        .meta({ description: 'New lifetime from now, seconds: the session expires ttl seconds from now' }),
    })
    .meta({ id: 'ExtendSessionRequest' });

  return { createSessionRequest, tokenRequest, connectQuery, extendRequest };
}

export type Schemas = ReturnType<typeof makeSchemas>;

/** `?stream=` of a stream's health (docs/health.md); default the token's stream, else the first. */
export const healthQuery = z.object({
  stream: z
    .string({ error: 'must be a stream name' })
    .regex(NAME_PATTERN, { error: 'must be a stream name' })
    .optional(),
});

// Response schemas: used for the OpenAPI document and by the tests to check responses.
const peerSchema = z
  .object({ ip: z.string(), port: z.number().int(), label: z.string() })
  .meta({ id: 'Peer' });
const healthSchema = z
  .object({ rtt: z.number(), retransmit: z.number(), bitrate: z.number() })
  .meta({ id: 'StreamHealth' });

export const createSessionResponse = z
  .object({
    session: z.string(),
    token: z.string().meta({ description: 'Admin token, prefix p_; returned exactly once' }),
    url: z.string(),
    qr: z.string(),
    streams: z.array(z.string()),
    latency: z.number().int(),
    ttl: z.number().int(),
    state: z.enum(SESSION_STATES),
    created: z.string().meta({ description: 'ISO 8601 UTC' }),
    expiresAt: z.number().int().meta({ description: 'Unix epoch milliseconds (extra field)' }),
  })
  .meta({ id: 'CreateSessionResponse' });

const relayDirectionView = z.object({
  packets: z.number().int(),
  lost_upstream: z.number().int(),
  retransmitted: z.number().int(),
  rtt_ms: z.number().nullable(),
  rtt_var_ms: z.number().nullable(),
  sender_leg_ms: z.number().nullable(),
  receiver_leg_ms: z.number().nullable(),
  rtt_age: z.number().nullable(),
});
const relayMeasuredSchema = z
  .object({
    at: z.string(),
    age: z.number(),
    stale: z.boolean(),
    a_to_b: relayDirectionView,
    b_to_a: relayDirectionView,
  })
  .meta({ id: 'RelayMeasured' });

export const sessionView = z
  .object({
    session: z.string(),
    state: z.enum(SESSION_STATES),
    streams: z.record(
      z.string(),
      z
        .object({
          state: z.enum(STREAM_STATES),
          peer_a: peerSchema.nullable(),
          peer_b: peerSchema.nullable(),
          path: z.enum(['direct', 'relayed']).meta({
            description: 'Extra field (docs/relay.md): relayed while the stream is on the relay',
          }),
          relay: z
            .object({
              state: z.enum(['allocated', 'refused', 'ended']),
              reason: z.string().nullable(),
              address: z.string().nullable(),
              ports: z.object({ peer_a: z.number().int(), peer_b: z.number().int() }).nullable(),
              since: z.string(),
              measured: relayMeasuredSchema.nullable().optional().meta({
                description:
                  'While allocated: what the relay measured from SRT headers (docs/relay.md "What the relay measures")',
              }),
            })
            .optional()
            .meta({ description: 'Extra field, present once the broker tried the relay (docs/relay.md)' }),
          health: healthSchema.nullable(),
        })
        .meta({ id: 'Stream' }),
    ),
    latency: z.number().int(),
    created: z.string(),
    expiresAt: z.number().int().meta({ description: 'Unix epoch milliseconds' }),
    overtime: z.literal(true).optional().meta({
      description:
        'Extra field, present only past the TTL: kept open while media flows; admits no new peer until extended',
    }),
  })
  .meta({ id: 'SessionView' });

export const connectResponse = z
  .object({
    stream: z.string(),
    role: z.enum(SRT_ROLES),
    for_peer_a: z.record(z.enum(CONNECT_FORMATS), z.string()),
    for_peer_b: z.record(z.enum(CONNECT_FORMATS), z.string()),
  })
  .meta({ id: 'ConnectResponse' });

export const tokenResponse = z
  .object({
    token: z.string(),
    session: z.string(),
    stream: z.string().nullable(),
    role: z.literal('peer'),
    exp: z.number().int().meta({ description: 'Unix seconds (the session expiry)' }),
    url: z.string(),
    qr: z.string(),
    invite: z.string().meta({ description: 'Invite id (extra field): list and revoke it under /invites' }),
  })
  .meta({ id: 'PeerTokenResponse' });

export const INVITE_STATES = ['unused', 'present', 'away', 'revoked'] as const;

export const inviteList = z
  .object({
    invites: z.array(
      z
        .object({
          id: z.string(),
          stream: z.string().nullable(),
          label: z.string().nullable(),
          issued: z.string().meta({ description: 'ISO 8601 UTC' }),
          state: z.enum(INVITE_STATES).meta({
            description:
              'unused: no peer registered with it; present: its peer holds a slot and is connected; ' +
              'away: its peer holds a slot but is disconnected; revoked: its token is refused',
          }),
          revoked: z.string().nullable().meta({ description: 'ISO 8601 UTC of the revocation' }),
          token: z.string().nullable().meta({ description: 'The peer token; null once revoked' }),
          url: z.string().nullable(),
          qr: z.string().nullable(),
        })
        .meta({ id: 'Invite' }),
    ),
  })
  .meta({ id: 'InviteList' });

export const healthResponse = z
  .object({
    status: z.enum(['ok', 'degraded']),
    version: z.string(),
    uptime: z.number(),
    store: z.object({
      kind: z.enum(['sqlite', 'redis']).meta({ description: 'The session store in use' }),
      state: z.enum(['ok', 'failing']),
      reachable: z.boolean().optional().meta({ description: 'Redis only: whether Redis answers now' }),
      instance: z.string().optional().meta({ description: 'Redis only: this instance' }),
      role: z
        .enum(['owner', 'relay'])
        .optional()
        .meta({ description: 'Redis only: owner of the sessions, or relay to the owner' }),
      owner: z.string().nullable().optional().meta({ description: 'Redis only: the owning instance' }),
      error: z.string().optional().meta({ description: 'Why the last save failed (while failing)' }),
      since: z.string().optional().meta({ description: 'ISO 8601 time of the first failed save' }),
    }),
  })
  .meta({ id: 'Health' });

export const errorBody = z
  .object({
    error: z
      .string()
      .meta({ description: "Stable error code, the toolkit's generic code where one applies" }),
    code: z.string().meta({
      description:
        "The spec's code: INVALID_MESSAGE for INVALID_REQUEST, PAYLOAD_TOO_LARGE and UNSUPPORTED_MEDIA_TYPE; AUTH_FAILED for UNAUTHORIZED and FORBIDDEN; else the same value as error",
    }),
    message: z.string(),
  })
  .meta({ id: 'Error' });

/** `name: message` lines for a zod error, so a 400 names the offending field. */
export function describeIssues(error: z.ZodError, root = 'body'): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = i.path.length ? i.path.map(String).join('.') : root;
      if (i.code === 'invalid_type' && /received undefined/.test(i.message)) return `${path}: required`;
      return `${path}: ${i.message}`;
    })
    .join('; ');
}
