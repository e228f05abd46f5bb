import { decoded, reject, type Decoded } from '@broadcast-ops/core/decoded';
import * as z from '@broadcast-ops/core/zod';

/**
 * Wire format between brokers and relays on Redis (docs/relay.md "Relays on Redis"). Everything here is
 * JSON on Redis: a relay's registration (a key with an expiry), the requests a broker publishes on a
 * relay's channel, and the relay's answers and allocation ends, published on the broker instance's bus.
 * None of it carries a passphrase or a token: a relay learns a session id, the two pinned peer IPs, a byte
 * rate and a lifetime. Parsing never throws: what does not match is `undefined` and is ignored.
 */

/** A relay's id: the first part of its allocation ids (`<relay>.<local id>`). */
const RELAY_ID = /^[A-Za-z0-9_-]{1,64}$/;
const port = z.intRange(0, 65535);
const relayId = () => z.string().check(z.regex(RELAY_ID));

export const relayRegistrationSchema = z.strictObject({
  id: relayId(),
  /** The address the peers send to. */
  address: z.textRange(1, 255),
  /** The UDP port range of its allocations, `lo-hi` (`0-0`: ephemeral). */
  ports: z.string().check(z.maxLength(11)),
  capacity: z.int().check(z.minimum(0)),
  free: z.int().check(z.minimum(0)),
  /** Wall-clock ms of the registration write. */
  at: z.number(),
  /** `process` (`punch relay`) or `broker` (the relay inside a broker instance). */
  kind: z.enum(['process', 'broker']),
});
export type RelayRegistration = z.output<typeof relayRegistrationSchema>;

export const relayRequestSchema = z.discriminatedUnion('t', [
  z.strictObject({
    t: z.literal('allocate'),
    /** Correlates the answer. */
    rq: z.textRange(1, 64),
    /** The broker instance whose bus takes the answer. */
    from: relayId(),
    sessionId: z.textRange(1, 128),
    peers: z.tuple([z.textRange(1, 64), z.textRange(1, 64)]),
    bytesPerSecond: z.optional(z.int().check(z.positive())),
    lifetimeMs: z.optional(z.int().check(z.positive())),
  }),
  z.strictObject({ t: z.literal('release'), id: z.textRange(1, 200) }),
  /** Extend an allocation to `lifetimeMs` from now (docs/relay.md "Renewal"); no answer. */
  z.strictObject({
    t: z.literal('renew'),
    id: z.textRange(1, 200),
    lifetimeMs: z.int().check(z.positive()),
  }),
]);
export type RelayRequest = z.output<typeof relayRequestSchema>;

/** Figures as the relay measured them (docs/relay.md "What the relay measures"), per media direction. */
const count = z.intRange(0, Number.MAX_SAFE_INTEGER);
const millis = z.nullable(z.number().check(z.minimum(0), z.maximum(3_600_000)));
export const relayDirectionSchema = z.strictObject({
  packets: count,
  lost: count,
  retransmitted: count,
  reordered: count,
  rttMs: millis,
  rttVarMs: millis,
  senderLegMs: millis,
  receiverLegMs: millis,
  rttAgeMs: z.nullable(z.number().check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER))),
});

export type RelayDirection = z.output<typeof relayDirectionSchema>;

/** The most allocations one report names (a relay's default cap is 100). */
export const MAX_REPORTED_ALLOCATIONS = 1000;

export const relayAnswerSchema = z.discriminatedUnion('t', [
  z.strictObject({
    t: z.literal('relay_allocated'),
    rq: z.string(),
    id: z.textRange(1, 200),
    address: z.textRange(1, 255),
    ports: z.tuple([port, port]),
  }),
  z.strictObject({
    t: z.literal('relay_refused'),
    rq: z.string(),
    reason: z.string().check(z.maxLength(64)),
  }),
  /** The relay ended an allocation by itself (idle, expired), or it was released. */
  z.strictObject({
    t: z.literal('relay_ended'),
    id: z.textRange(1, 200),
    reason: z.string().check(z.maxLength(64)),
  }),
  /** Every few seconds, to the owner: what the relay measured on each allocation it holds. */
  z.strictObject({
    t: z.literal('relay_report'),
    relay: relayId(),
    /** Wall-clock ms of the reading. */
    at: z.number(),
    allocations: z
      .array(
        z.strictObject({
          id: z.textRange(1, 200),
          directions: z.tuple([relayDirectionSchema, relayDirectionSchema]),
        }),
      )
      .check(z.maxLength(MAX_REPORTED_ALLOCATIONS)),
  }),
]);
export type RelayAnswer = z.output<typeof relayAnswerSchema>;

/** An allocation as stored in Redis by its relay (for any instance to see, renew or free). */
export const relayAllocationRecordSchema = z.strictObject({
  id: z.string(),
  relay: z.string(),
  sessionId: z.string(),
  address: z.string(),
  ports: z.tuple([port, port]),
  at: z.number(),
});
export type RelayAllocationRecord = z.output<typeof relayAllocationRecordSchema>;

/** `raw` checked against `schema`: the value, or `invalid` naming the first field that fails. */
function checkWith<T>(schema: z.ZodMiniType<T>, raw: unknown): Decoded<T> {
  const r = schema.safeParse(raw);
  if (r.success) return decoded(r.data);
  const issue = r.error.issues[0];
  return reject('invalid', `${issue?.path.join('.') || 'message'}: ${issue?.message ?? 'invalid'}`);
}

function parseWith<T>(schema: z.ZodMiniType<T>, text: string): Decoded<T> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return reject('not-json', 'not JSON');
  }
  return checkWith(schema, raw);
}

export const parseRelayRegistration = (text: string): Decoded<RelayRegistration> =>
  parseWith(relayRegistrationSchema, text);
export const parseRelayRequest = (text: string): Decoded<RelayRequest> => parseWith(relayRequestSchema, text);
export const parseRelayAnswer = (raw: unknown): Decoded<RelayAnswer> => checkWith(relayAnswerSchema, raw);

/** The relay an allocation id belongs to (`<relay>.<local>`); undefined for the in-process relay's own ids. */
export function relayOfAllocation(id: string): string | undefined {
  const dot = id.indexOf('.');
  return dot > 0 ? id.slice(0, dot) : undefined;
}
