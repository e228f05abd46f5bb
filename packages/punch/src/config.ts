import { loadConfig, type EnvOverride } from '@broadcast-ops/core';
import { z } from 'zod';

/**
 * Broker configuration: embedded defaults, then an optional JSON/YAML file (`serve --config`), then the
 * environment variables below (the original's names where it has one: PUNCH_SECRET, PUNCH_MAX_STREAMS,
 * PUNCH_DEFAULT_TTL, PUNCH_RATE_LIMIT, TURNSTILE_SECRET). Strict: an unknown key is an error.
 */
const onOff = z
  .union([z.boolean(), z.literal(1), z.literal(0), z.enum(['on', 'off', 'yes', 'no'])])
  .transform((v) => v === true || v === 1 || v === 'on' || v === 'yes');

export const punchConfigSchema = z.strictObject({
  /** HMAC key of the tokens; required by `serve`, at least 32 characters (64+ advised). */
  secret: z.string().min(32, { error: 'must be at least 32 characters' }).optional(),
  host: z.string().min(1).default('0.0.0.0'),
  port: z.number().int().min(0).max(65535).default(8787),
  /** Origin used in `url` and `qr`; default from host and port. */
  baseUrl: z.url().optional(),
  /** SQLite file of the embedded store. */
  db: z.string().min(1).default('data/punch/punch.db'),
  /** Off: the client IP is the socket's address. On: the left-most `X-Forwarded-For` entry. */
  trustProxy: onOff.default(false),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  limits: z
    .strictObject({
      /** Master switch for the per-IP HTTP limits (off only for benchmarks and load tests). */
      rateLimits: onOff.default(true),
      /** POST /api/session per minute per IP (spec "Limits"). */
      createPerMinute: z.number().int().min(1).default(10),
      /** GET /api/session/:id per minute per IP; also DELETE, /connect and /token. */
      getPerMinute: z.number().int().min(1).default(60),
      /** WebSocket connects per minute per IP (used by the WebSocket layer). */
      wsConnectPerMinute: z.number().int().min(1).default(20),
      /** WebSocket messages per second per connection (used by the WebSocket layer). */
      wsMessagesPerSecond: z.number().int().min(1).default(100),
      /** Distinct client IPs tracked per limiter; beyond this, new IPs are refused until the next sweep. */
      rateLimitKeys: z.number().int().min(100).default(100_000),
      /** Streams per session (reference: PUNCH_MAX_STREAMS=16). */
      maxStreams: z.number().int().min(1).max(256).default(16),
      /** Live sessions per server; 0 = unlimited. */
      maxSessions: z.number().int().min(0).default(100_000),
      defaultTtl: z.number().int().min(1).default(1800),
      maxTtl: z.number().int().min(1).default(86_400),
      defaultLatency: z.number().int().min(20).max(8000).default(200),
      /** Largest request body, bytes. */
      bodyLimit: z.number().int().min(256).max(1_048_576).default(16_384),
      /** Seconds a closed session answers 410 before its name is forgotten. */
      tombstoneTtl: z.number().int().min(0).default(600),
    })
    .prefault({}),
  turnstile: z
    .strictObject({
      /** Turnstile verification is on only when a secret is set. */
      secret: z.string().min(1).optional(),
      siteKey: z.string().min(1).optional(),
      verifyUrl: z.url().default('https://challenges.cloudflare.com/turnstile/v0/siteverify'),
    })
    .prefault({}),
});

export type PunchConfig = z.output<typeof punchConfigSchema>;

const str = (path: string): EnvOverride => ({ path, parse: (raw) => raw });

/** Environment variable → config key. Documented in the package README. */
export const PUNCH_ENV: Record<string, EnvOverride | string> = {
  PUNCH_SECRET: str('secret'),
  PUNCH_HOST: str('host'),
  PUNCH_PORT: 'port',
  PUNCH_BASE_URL: str('baseUrl'),
  PUNCH_DB: str('db'),
  PUNCH_TRUST_PROXY: 'trustProxy',
  LOG_LEVEL: str('logLevel'),
  PUNCH_RATE_LIMITS: 'limits.rateLimits',
  PUNCH_RATE_LIMIT: 'limits.createPerMinute',
  PUNCH_RATE_LIMIT_GET: 'limits.getPerMinute',
  PUNCH_RATE_LIMIT_WS_CONNECT: 'limits.wsConnectPerMinute',
  PUNCH_RATE_LIMIT_WS_MESSAGES: 'limits.wsMessagesPerSecond',
  PUNCH_RATE_LIMIT_KEYS: 'limits.rateLimitKeys',
  PUNCH_MAX_STREAMS: 'limits.maxStreams',
  PUNCH_MAX_SESSIONS: 'limits.maxSessions',
  PUNCH_DEFAULT_TTL: 'limits.defaultTtl',
  PUNCH_MAX_TTL: 'limits.maxTtl',
  PUNCH_DEFAULT_LATENCY: 'limits.defaultLatency',
  PUNCH_BODY_LIMIT: 'limits.bodyLimit',
  PUNCH_TOMBSTONE_TTL: 'limits.tombstoneTtl',
  TURNSTILE_SECRET: str('turnstile.secret'),
  TURNSTILE_SITE_KEY: str('turnstile.siteKey'),
  TURNSTILE_VERIFY_URL: str('turnstile.verifyUrl'),
};

export function loadPunchConfig(
  options: { file?: string | undefined; environment?: NodeJS.ProcessEnv } = {},
): PunchConfig {
  return loadConfig({
    schema: punchConfigSchema,
    file: options.file,
    env: PUNCH_ENV,
    substitute: true,
    ...(options.environment ? { environment: options.environment } : {}),
  });
}

/** Default origin for `url`/`qr`: the listen host and port, a wildcard host shown as `localhost`. */
export function defaultBaseUrl(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}
