import { ConfigError, loadConfig, type EnvOverride, type LoggerConfig } from '@broadcast-ops/core';
import * as z from '@broadcast-ops/core/zod';
import { AddressPolicy } from './domain/relay-address-policy.ts';
import { parseTrustPolicy } from './io/client-address.ts';

/**
 * Broker configuration: embedded defaults, then an optional JSON/YAML file (`serve --config`), then the
 * environment variables below (the original Punch deployment's names where it has one: PUNCH_SECRET,
 * PUNCH_MAX_STREAMS, PUNCH_DEFAULT_TTL, PUNCH_RATE_LIMIT, TURNSTILE_SECRET). Strict: an unknown key is an
 * error.
 */
const onOff = z.pipe(
  z.union([z.boolean(), z.literal(1), z.literal(0), z.enum(['on', 'off', 'yes', 'no'])]),
  z.transform((v) => v === true || v === 1 || v === 'on' || v === 'yes'),
);

export const punchConfigSchema = z.strictObject({
  /** HMAC key of the tokens; required by `serve`, at least 32 characters (64+ advised). */
  secret: z.optional(z.string().check(z.minLength(32, { error: 'must be at least 32 characters' }))),
  host: z._default(z.textRange(1), '0.0.0.0'),
  port: z._default(z.intRange(0, 65535), 8787),
  /** Origin used in `url` and `qr`; default from host and port. */
  baseUrl: z.optional(z.url()),
  /** SQLite file of the embedded store. */
  db: z._default(z.textRange(1), 'data/punch/punch.db'),
  /**
   * Which `X-Forwarded-For` entries to believe (src/io/client-address.ts): off/0 (the socket's address),
   * a number of proxy hops (`on` = 1), or a comma-separated list of trusted proxy networks.
   */
  trustProxy: z._default(z.union([z.boolean(), z.intRange(0, 10), z.string()]), false).check(
    z.superRefine((v, ctx) => {
      try {
        parseTrustPolicy(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  ),
  /**
   * Several instances on one Redis (docs/multi-instance.md): the Redis URL (`redis://[:password@]host:port/db`
   * or `rediss://` for TLS) replaces the SQLite store; the prefix separates deployments sharing a Redis;
   * the owner lease bounds how long a dead owner's sessions wait for another instance.
   */
  redis: z.prefault(
    z.strictObject({
      url: z.optional(
        z.string().check(z.regex(/^rediss?:\/\//, { error: 'must be a redis:// or rediss:// URL' })),
      ),
      prefix: z._default(z.textRange(1, 64), 'punch:'),
      leaseMs: z._default(z.intRange(1_000, 120_000), 10_000),
    }),
    {},
  ),
  /** PEM certificate chain and key files: with both, the broker serves HTTPS (and WSS) itself. */
  tls: z
    .prefault(
      z.strictObject({
        cert: z.optional(z.textRange(1)),
        key: z.optional(z.textRange(1)),
      }),
      {},
    )
    .check(
      z.refine((t) => (t.cert === undefined) === (t.key === undefined), {
        message: 'PUNCH_TLS_CERT and PUNCH_TLS_KEY must be set together',
      }),
    ),
  logLevel: z._default(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), 'info'),
  limits: z
    .prefault(
      z.strictObject({
        /** Master switch for the per-client HTTP limits (off only for benchmarks and load tests). */
        rateLimits: z._default(onOff, true),
        /** POST /api/session per minute per client (spec "Limits"). */
        createPerMinute: z._default(z.intRange(1), 10),
        /** GET /api/session/:name per minute per client (spec "Limits"). */
        getPerMinute: z._default(z.intRange(1), 60),
        /** DELETE, /connect and /token per minute per client (a bucket of their own). */
        adminPerMinute: z._default(z.intRange(1), 60),
        /** The pages /s/:name and /s/:name/qr per minute per client (a bucket of their own). */
        pagePerMinute: z._default(z.intRange(1), 60),
        /** WebSocket connects per minute per IP (used by the WebSocket layer). */
        wsConnectPerMinute: z._default(z.intRange(1), 20),
        /** WebSocket messages per second per connection (used by the WebSocket layer). */
        wsMessagesPerSecond: z._default(z.intRange(1), 100),
        /** Distinct clients tracked per bucket; beyond this the least recently seen is forgotten. */
        rateLimitKeys: z._default(z.intRange(100), 100_000),
        /** IPv6 clients are counted per prefix of this length (64: one LAN or subscriber). */
        ipv6PrefixBits: z._default(z.intRange(32, 128), 64),
        /** Streams per session (the original deployment's PUNCH_MAX_STREAMS=16). */
        maxStreams: z._default(z.intRange(1, 256), 16),
        /** Live sessions per server; 0 = unlimited. */
        maxSessions: z._default(z.intRange(0), 100_000),
        defaultTtl: z._default(z.intRange(1), 1800),
        maxTtl: z._default(z.intRange(1), 86_400),
        defaultLatency: z._default(z.intRange(20, 8000), 200),
        /** Largest request body, bytes. */
        bodyLimit: z._default(z.intRange(256, 1_048_576), 16_384),
        /** Seconds a closed session answers 410 before its name is forgotten. */
        tombstoneTtl: z._default(z.intRange(0), 600),
        /** Closed sessions kept as tombstones at most; the oldest is forgotten first. */
        maxTombstones: z._default(z.intRange(0), 10_000),
      }),
      {},
    )
    .check(
      z.refine((l) => l.maxTtl >= l.defaultTtl, {
        message: 'maxTtl (PUNCH_MAX_TTL) must be at least defaultTtl (PUNCH_DEFAULT_TTL)',
        path: ['maxTtl'],
      }),
    ),
  turnstile: z.prefault(
    z.strictObject({
      /** Turnstile verification is on only when a secret is set. */
      secret: z.optional(z.textRange(1)),
      siteKey: z.optional(z.textRange(1)),
      verifyUrl: z._default(z.url(), 'https://challenges.cloudflare.com/turnstile/v0/siteverify'),
    }),
    {},
  ),
  /**
   * Health alarms (README "Health", src/io/alarm-webhook.ts): a webhook POSTed on every alarm change. The
   * URL must not carry a secret (no user:password, no query string: URLs end up in proxy logs); a secret,
   * if the receiver wants one, signs the body instead.
   */
  alarms: z.prefault(
    z.strictObject({
      webhook: z.prefault(
        z.strictObject({
          url: z.optional(
            z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).check(
              z.refine((u) => !/^[a-z]+:\/\/[^/]*@/i.test(u), {
                error: 'must not contain user or password (use secret)',
              }),
              z.refine((u) => !u.includes('?') && !u.includes('#'), {
                error:
                  'must not contain a query string or fragment (secrets in URLs end up in logs; use secret)',
              }),
            ),
          ),
          secret: z.optional(z.string().check(z.minLength(16, { error: 'must be at least 16 characters' }))),
          retries: z._default(z.intRange(0, 5), 3),
          timeoutMs: z._default(z.intRange(100, 30_000), 5_000),
        }),
        {},
      ),
    }),
    {},
  ),
  /**
   * The in-process relay (docs/relay.md): where a stream goes when direct rendezvous does not connect
   * within `fallbackAfterMs` of `start`. `publicAddress` is what the peers are told to send to; without it
   * the base URL's host is used unless that is a loopback name (then every fallback is refused with
   * `no_public_address`, shown in the view).
   */
  relay: z.prefault(
    z.strictObject({
      enabled: z._default(onOff, true),
      host: z._default(z.textRange(1), '0.0.0.0'),
      publicAddress: z.optional(z.textRange(1)),
      /** UDP ports of the allocations, inclusive (`0-0`: ephemeral ports), e.g. `40000-40999`. */
      ports: z
        ._default(
          z.string().check(
            z.regex(/^\d{1,5}-\d{1,5}$/, {
              error: 'must be two ports, low-high (e.g. 40000-40999; 0-0 ephemeral)',
            }),
          ),
          '0-0',
        )
        .check(
          z.refine(
            (v) => {
              const [lo, hi] = v.split('-').map(Number) as [number, number];
              return (lo === 0 && hi === 0) || (lo >= 1024 && hi <= 65535 && lo <= hi);
            },
            { error: 'must be 0-0 or a range within 1024-65535, low first' },
          ),
        ),
      fallbackAfterMs: z._default(z.intRange(2_000, 120_000), 8_000),
      /** CIDRs allowed as peer addresses although loopback or private-use (a lab, one private network). */
      allow: z
        .pipe(
          z._default(z.union([z.array(z.textRange(1)), z.string()]), []),
          z.transform((v) =>
            typeof v === 'string'
              ? v
                  .split(',')
                  .map((x) => x.trim())
                  .filter(Boolean)
              : v,
          ),
        )
        .check(
          z.superRefine((v, ctx) => {
            try {
              new AddressPolicy(v);
            } catch (err) {
              ctx.addIssue({ code: 'custom', message: (err as Error).message });
            }
          }),
        ),
      maxAllocations: z._default(z.intRange(1, 10_000), 100),
      /** Byte rate per direction per allocation (20 Mbit/s by default). */
      bytesPerSecond: z._default(z.intRange(12_500, 12_500_000), 2_500_000),
      /**
       * An allocation's lifetime (6 h); the owning broker renews it at three quarters of it while the
       * session is live (docs/relay.md "Renewal"). Short values are for tests.
       */
      lifetimeMs: z._default(z.intRange(4_000, 24 * 60 * 60 * 1000), 6 * 60 * 60 * 1000),
      /**
       * `punch relay`'s own `/health` and `/metrics` (docs/relay.md "Deploying a separate relay"): off
       * unless a port is set (0: an ephemeral port, printed at start); the broker ignores it (its relay's
       * counters are on the broker's `/metrics`).
       */
      http: z.prefault(
        z.strictObject({
          host: z._default(z.textRange(1), '127.0.0.1'),
          port: z.optional(z.intRange(0, 65535)),
        }),
        {},
      ),
    }),
    {},
  ),
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
  PUNCH_TRUST_PROXY: str('trustProxy'),
  PUNCH_REDIS_URL: str('redis.url'),
  PUNCH_REDIS_PREFIX: str('redis.prefix'),
  PUNCH_REDIS_LEASE_MS: 'redis.leaseMs',
  PUNCH_TLS_CERT: str('tls.cert'),
  PUNCH_TLS_KEY: str('tls.key'),
  LOG_LEVEL: str('logLevel'),
  PUNCH_RATE_LIMITING: 'limits.rateLimits',
  PUNCH_RATE_LIMIT: 'limits.createPerMinute',
  PUNCH_RATE_LIMIT_GET: 'limits.getPerMinute',
  PUNCH_RATE_LIMIT_ADMIN: 'limits.adminPerMinute',
  PUNCH_RATE_LIMIT_PAGES: 'limits.pagePerMinute',
  PUNCH_IPV6_PREFIX: 'limits.ipv6PrefixBits',
  PUNCH_MAX_TOMBSTONES: 'limits.maxTombstones',
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
  PUNCH_ALARM_WEBHOOK_URL: str('alarms.webhook.url'),
  PUNCH_ALARM_WEBHOOK_SECRET: str('alarms.webhook.secret'),
  PUNCH_ALARM_WEBHOOK_RETRIES: 'alarms.webhook.retries',
  PUNCH_ALARM_WEBHOOK_TIMEOUT_MS: 'alarms.webhook.timeoutMs',
  PUNCH_RELAY: 'relay.enabled',
  PUNCH_RELAY_HOST: str('relay.host'),
  PUNCH_RELAY_PUBLIC_ADDRESS: str('relay.publicAddress'),
  PUNCH_RELAY_PORTS: str('relay.ports'),
  PUNCH_RELAY_AFTER_MS: 'relay.fallbackAfterMs',
  PUNCH_RELAY_ALLOW: str('relay.allow'),
  PUNCH_RELAY_MAX_ALLOCATIONS: 'relay.maxAllocations',
  PUNCH_RELAY_BYTES_PER_SECOND: 'relay.bytesPerSecond',
  PUNCH_RELAY_LIFETIME_MS: 'relay.lifetimeMs',
  PUNCH_RELAY_HTTP_HOST: str('relay.http.host'),
  PUNCH_RELAY_HTTP_PORT: 'relay.http.port',
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

/**
 * The configuration as `punch serve` and `punch relay` load it (`--config`, then PUNCH_* variables): a
 * problem is printed as `punch: configuration error:` and the list of problems, exit 2.
 */
export function loadPunchCliConfig(file: string | undefined, env: NodeJS.ProcessEnv): PunchConfig {
  try {
    return loadPunchConfig({ file, environment: env });
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(`configuration error:\n${err.message}`);
    throw err;
  }
}

/** The logger of `punch serve` (`punch`) and `punch relay` (`punch-relay`): LOG_LEVEL, LOG_PRETTY=1. */
export function punchLogger(config: PunchConfig, env: NodeJS.ProcessEnv, service: string): LoggerConfig {
  return { service, level: config.logLevel, pretty: env['LOG_PRETTY'] === '1' };
}

/** Default origin for `url`/`qr`: the listen host and port, a wildcard host shown as `localhost`. */
export function defaultBaseUrl(host: string, port: number, scheme: 'http' | 'https' = 'http'): string {
  const h = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `${scheme}://${h}:${port}`;
}

/** Loopback listen addresses: the only ones where plain HTTP does not expose tokens and passphrases. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** `serve` warns at start when it serves plain HTTP (no TLS of its own) on a host that is not loopback. */
export function warnsPlainHttp(host: string, tls: boolean): boolean {
  return !tls && !isLoopbackHost(host);
}
