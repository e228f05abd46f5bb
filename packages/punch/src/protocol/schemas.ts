import * as z from '@broadcast-ops/core/zod';

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

export const nameSchema = z.string().check(
  z.maxLength(MAX_NAME_LENGTH, { error: `at most ${MAX_NAME_LENGTH} characters` }),
  z.regex(NAME_PATTERN, {
    error: 'must start with a letter or digit and contain only letters, digits, ".", "_" and "-"',
  }),
);

export function makeSchemas(limits: SchemaLimits) {
  const createSessionRequest = z
    .object({
      name: nameSchema.check(z.meta({ description: 'Session name, 1-64 characters, URL-safe' })),
      streams: z
        .optional(
          z.array(nameSchema).check(
            z.minLength(1, { error: 'at least one stream name (omit the field for one default stream)' }),
            z.maxLength(limits.maxStreams, { error: `at most ${limits.maxStreams} streams` }),
            z.refine((s) => new Set(s).size === s.length, { error: 'stream names must be unique' }),
          ),
        )
        .check(
          z.meta({
            description: `Named stream slots; default one stream named "${DEFAULT_STREAM}"`,
            uniqueItems: true,
          }),
        ),
      latency: z
        ._default(z.intRange(MIN_LATENCY_MS, MAX_LATENCY_MS), limits.defaultLatency)
        .check(z.meta({ description: 'Recommended SRT latency, milliseconds' })),
      ttl: z
        ._default(z.intRange(1, limits.maxTtl), limits.defaultTtl)
        .check(z.meta({ description: 'Session lifetime, seconds' })),
      turnstileToken: z.optional(z.string().check(z.maxLength(MAX_TURNSTILE_TOKEN_LENGTH))).check(
        z.meta({
          description: 'Cloudflare Turnstile response; required only when the server has a Turnstile secret',
        }),
      ),
    })
    .check(z.meta({ id: 'CreateSessionRequest' }));

  const tokenRequest = z
    .object({
      stream: z.optional(z.nullable(nameSchema)).check(
        z.meta({
          description: 'Stream the token is scoped to; omitted: the first stream; null: all streams',
        }),
      ),
      label: z
        .optional(z.string().check(z.maxLength(64)))
        .check(z.meta({ description: 'Operator label carried in the token' })),
    })
    .check(z.meta({ id: 'PeerTokenRequest' }));

  const connectQuery = z
    .object({
      stream: z
        .optional(nameSchema)
        .check(z.meta({ description: "Stream name; default the session's first stream" })),
      role: z
        ._default(z.enum(SRT_ROLES), 'sender')
        .check(z.meta({ description: 'SRT role of peer A; peer B gets the other' })),
    })
    .check(z.meta({ id: 'ConnectQuery' }));

  const extendRequest = z
    .object({
      ttl: z
        .intRange(1, limits.maxTtl)
        .check(
          z.meta({ description: 'New lifetime from now, seconds: the session expires ttl seconds from now' }),
        ),
    })
    .check(z.meta({ id: 'ExtendSessionRequest' }));

  return { createSessionRequest, tokenRequest, connectQuery, extendRequest };
}

export type Schemas = ReturnType<typeof makeSchemas>;

/** `?stream=` of a stream's health (docs/health.md); default the token's stream, else the first. */
export const healthQuery = z.object({
  stream: z.optional(
    z
      .string({ error: 'must be a stream name' })
      .check(z.regex(NAME_PATTERN, { error: 'must be a stream name' })),
  ),
});

// Response schemas: used for the OpenAPI document and by the tests to check responses.
const peerSchema = z
  .object({ ip: z.string(), port: z.int(), label: z.string() })
  .check(z.meta({ id: 'Peer' }));
const healthSchema = z
  .object({ rtt: z.number(), retransmit: z.number(), bitrate: z.number() })
  .check(z.meta({ id: 'StreamHealth' }));

export const createSessionResponse = z
  .object({
    session: z.string(),
    token: z.string().check(z.meta({ description: 'Admin token, prefix p_; returned exactly once' })),
    url: z.string(),
    qr: z.string(),
    streams: z.array(z.string()),
    latency: z.int(),
    ttl: z.int(),
    state: z.enum(SESSION_STATES),
    created: z.string().check(z.meta({ description: 'ISO 8601 UTC' })),
    expiresAt: z.int().check(z.meta({ description: 'Unix epoch milliseconds (extra field)' })),
  })
  .check(z.meta({ id: 'CreateSessionResponse' }));

const relayDirectionView = z.object({
  packets: z.int(),
  lost_upstream: z.int(),
  retransmitted: z.int(),
  rtt_ms: z.nullable(z.number()),
  rtt_var_ms: z.nullable(z.number()),
  sender_leg_ms: z.nullable(z.number()),
  receiver_leg_ms: z.nullable(z.number()),
  rtt_age: z.nullable(z.number()),
});
const relayMeasuredSchema = z
  .object({
    at: z.string(),
    age: z.number(),
    stale: z.boolean(),
    a_to_b: relayDirectionView,
    b_to_a: relayDirectionView,
  })
  .check(z.meta({ id: 'RelayMeasured' }));

export const sessionView = z
  .object({
    session: z.string(),
    state: z.enum(SESSION_STATES),
    streams: z.record(
      z.string(),
      z
        .object({
          state: z.enum(STREAM_STATES),
          peer_a: z.nullable(peerSchema),
          peer_b: z.nullable(peerSchema),
          path: z.enum(['direct', 'relayed']).check(
            z.meta({
              description: 'Extra field (docs/relay.md): relayed while the stream is on the relay',
            }),
          ),
          relay: z
            .optional(
              z.object({
                state: z.enum(['allocated', 'refused', 'ended']),
                reason: z.nullable(z.string()),
                address: z.nullable(z.string()),
                ports: z.nullable(z.object({ peer_a: z.int(), peer_b: z.int() })),
                since: z.string(),
                measured: z.optional(z.nullable(relayMeasuredSchema)).check(
                  z.meta({
                    description:
                      'While allocated: what the relay measured from SRT headers (docs/relay.md "What the relay measures")',
                  }),
                ),
              }),
            )
            .check(
              z.meta({ description: 'Extra field, present once the broker tried the relay (docs/relay.md)' }),
            ),
          health: z.nullable(healthSchema),
        })
        .check(z.meta({ id: 'Stream' })),
    ),
    latency: z.int(),
    created: z.string(),
    expiresAt: z.int().check(z.meta({ description: 'Unix epoch milliseconds' })),
    overtime: z.optional(z.literal(true)).check(
      z.meta({
        description:
          'Extra field, present only past the TTL: kept open while media flows; admits no new peer until extended',
      }),
    ),
  })
  .check(z.meta({ id: 'SessionView' }));

export const connectResponse = z
  .object({
    stream: z.string(),
    role: z.enum(SRT_ROLES),
    for_peer_a: z.record(z.enum(CONNECT_FORMATS), z.string()),
    for_peer_b: z.record(z.enum(CONNECT_FORMATS), z.string()),
  })
  .check(z.meta({ id: 'ConnectResponse' }));

export const tokenResponse = z
  .object({
    token: z.string(),
    session: z.string(),
    stream: z.nullable(z.string()),
    role: z.literal('peer'),
    exp: z.int().check(z.meta({ description: 'Unix seconds (the session expiry)' })),
    url: z.string(),
    qr: z.string(),
    invite: z
      .string()
      .check(z.meta({ description: 'Invite id (extra field): list and revoke it under /invites' })),
  })
  .check(z.meta({ id: 'PeerTokenResponse' }));

export const INVITE_STATES = ['unused', 'present', 'away', 'revoked'] as const;

export const inviteList = z
  .object({
    invites: z.array(
      z
        .object({
          id: z.string(),
          stream: z.nullable(z.string()),
          label: z.nullable(z.string()),
          issued: z.string().check(z.meta({ description: 'ISO 8601 UTC' })),
          state: z.enum(INVITE_STATES).check(
            z.meta({
              description:
                'unused: no peer registered with it; present: its peer holds a slot and is connected; ' +
                'away: its peer holds a slot but is disconnected; revoked: its token is refused',
            }),
          ),
          revoked: z.nullable(z.string()).check(z.meta({ description: 'ISO 8601 UTC of the revocation' })),
          token: z.nullable(z.string()).check(z.meta({ description: 'The peer token; null once revoked' })),
          url: z.nullable(z.string()),
          qr: z.nullable(z.string()),
        })
        .check(z.meta({ id: 'Invite' })),
    ),
  })
  .check(z.meta({ id: 'InviteList' }));

export const healthResponse = z
  .object({
    status: z.enum(['ok', 'degraded']),
    version: z.string(),
    uptime: z.number(),
    store: z.object({
      kind: z.enum(['sqlite', 'redis']).check(z.meta({ description: 'The session store in use' })),
      state: z.enum(['ok', 'failing']),
      reachable: z
        .optional(z.boolean())
        .check(z.meta({ description: 'Redis only: whether Redis answers now' })),
      instance: z.optional(z.string()).check(z.meta({ description: 'Redis only: this instance' })),
      role: z
        .optional(z.enum(['owner', 'relay']))
        .check(z.meta({ description: 'Redis only: owner of the sessions, or relay to the owner' })),
      owner: z
        .optional(z.nullable(z.string()))
        .check(z.meta({ description: 'Redis only: the owning instance' })),
      error: z
        .optional(z.string())
        .check(z.meta({ description: 'Why the last save failed (while failing)' })),
      since: z.optional(z.string()).check(z.meta({ description: 'ISO 8601 time of the first failed save' })),
    }),
  })
  .check(z.meta({ id: 'Health' }));

export const errorBody = z
  .object({
    error: z
      .string()
      .check(z.meta({ description: "Stable error code, the toolkit's generic code where one applies" })),
    code: z.string().check(
      z.meta({
        description:
          "The spec's code: INVALID_MESSAGE for INVALID_REQUEST, PAYLOAD_TOO_LARGE and UNSUPPORTED_MEDIA_TYPE; AUTH_FAILED for UNAUTHORIZED and FORBIDDEN; else the same value as error",
      }),
    ),
    message: z.string(),
  })
  .check(z.meta({ id: 'Error' }));

/** `name: message` lines for a zod error, so a 400 names the offending field. */
export function describeIssues(error: z.core.$ZodError, root = 'body'): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = i.path.length ? i.path.map(String).join('.') : root;
      if (i.code === 'invalid_type' && /received undefined/.test(i.message)) return `${path}: required`;
      return `${path}: ${i.message}`;
    })
    .join('; ');
}
