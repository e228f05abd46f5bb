/**
 * Configuration (README "Configuration": name, environment, companion, clientTransport, logging)
 * plus the additions documented in the README (auth tokens, limits, metrics, health, event log, replay).
 * Strict: unknown keys are errors. Environment overrides are derived from the schema: the dotted camelCase
 * path in SCREAMING_SNAKE with prefix BRIDGE_ (`clientTransport.maxClients` → BRIDGE_CLIENT_TRANSPORT_MAX_CLIENTS),
 * coerced by the type of the default (arrays comma-separated).
 */
import { ConfigError, coerceEnvValue, loadConfig, type EnvOverride } from '@broadcast-ops/core';
import * as z from '@broadcast-ops/core/zod';

const port = z.intRange(0, 65535);

export const configSchema = z.strictObject({
  name: z._default(z.textRange(1, 64), 'telemetry-bridge'),
  environment: z._default(z.enum(['development', 'production', 'test']), 'production'),
  companion: z.prefault(
    z.strictObject({
      // Companion Satellite API (docs/companion.md): WebSocket on 16623 (Companion ≥ 3.5) or TCP on 16622.
      enabled: z._default(z.boolean(), false),
      host: z._default(z.textRange(1), '127.0.0.1'),
      port: z._default(port, 16623),
      // Hot standby (docs/companion.md "Hot standby"): Companion instances in order of preference, all on
      // the same transport; when set, host/port are not used.
      hosts: z.optional(
        z
          .array(z.strictObject({ host: z.textRange(1), port: port.check(z.refine((p) => p > 0, 'port 0')) }))
          .check(z.minLength(1), z.maxLength(8)),
      ),
      transport: z._default(z.enum(['ws', 'tcp']), 'ws'),
      // Companion drops a Satellite client after 5 s without inbound data: keep the PING well inside.
      // A hung Companion is detected within deadAfter + heartbeatInterval (docs/companion.md "Hot standby").
      heartbeatInterval: z._default(z.intRange(50, 2000), 200),
      deadAfter: z._default(z.intRange(100, 60_000), 1000),
      // Wait before the first try of the next host after a loss (hot standby); later rounds back off.
      failoverDelay: z._default(z.intRange(0, 60_000), 0),
      connectionTimeout: z._default(z.intRange(100, 60_000), 5000),
      replyTimeout: z._default(z.intRange(50, 60_000), 5000),
      reconnectDelay: z._default(z.intRange(10, 60_000), 1000),
      maxReconnectDelay: z._default(z.intRange(10, 600_000), 30_000),
      reconnectJitter: z._default(z.intRange(0, 60_000), 500),
      maxReconnectAttempts: z._default(z.intRange(0), 0),
      refreshTimeout: z._default(z.intRange(10, 60_000), 1000),
      // Absolute button locations ("page/row/column") subscribed on every session where Companion offers
      // subscriptions (docs/companion.md "Button state for every app").
      locations: z._default(
        z
          .array(
            z
              .string()
              .check(z.regex(/^[1-9]\d{0,4}\/\d{1,4}\/\d{1,4}$/, 'a location: page/row/column, page ≥ 1')),
          )
          .check(z.maxLength(1024)),
        [],
      ),
      device: z.prefault(
        z.strictObject({
          deviceId: z._default(z.string().check(z.regex(/^[A-Za-z0-9_.:-]{1,64}$/)), 'telemetry-bridge-001'),
          productName: z._default(z.textRange(1, 64).check(z.regex(/^[^\r\n]*$/)), 'Telemetry Bridge'),
          serial: z.optional(z.string().check(z.regex(/^[A-Za-z0-9_.:-]{1,64}$/))),
          keysTotal: z._default(z.intRange(1, 2000), 32),
          keysPerRow: z._default(z.intRange(1, 1000), 8),
          bitmaps: z._default(z.intRange(0, 512), 0),
          // Preferred bitmap encoding; used where CAPS BITMAP_FORMATS offers it (1.12.0), raw rgb otherwise.
          bitmapFormat: z._default(z.enum(['rgb', 'png', 'webp']), 'rgb'),
          colors: z._default(z.union([z.enum(['hex', 'rgb']), z.literal(false)]), 'hex'),
          text: z._default(z.boolean(), true),
          textStyle: z._default(z.boolean(), false),
          pincodeLock: z._default(z.boolean(), true),
          brightness: z._default(z.boolean(), true),
          variables: z._default(
            z
              .array(
                z.strictObject({
                  id: z.string().check(z.regex(/^[A-Za-z0-9_:-]{1,64}$/)),
                  type: z.enum(['input', 'output']),
                  name: z.textRange(1, 128),
                  description: z.optional(z.string().check(z.maxLength(256))),
                }),
              )
              .check(z.maxLength(256)),
            [],
          ),
        }),
        {},
      ),
    }),
    {},
  ),
  clientTransport: z.prefault(
    z.strictObject({
      host: z._default(z.textRange(1), '0.0.0.0'),
      port: z._default(port, 8765),
      requireAuth: z._default(z.boolean(), false),
      // Origins (scheme://host[:port]) besides the bridge's own whose pages may open a WebSocket to it.
      allowedOrigins: z._default(
        z
          .array(
            z
              .string()
              .check(
                z.maxLength(300),
                z.regex(/^https?:\/\/[^/\s?#]+$/i, 'an origin: http(s)://host[:port]'),
              ),
          )
          .check(z.maxLength(32)),
        [],
      ),
      authTokens: z._default(z.array(z.textRange(16, 1024)), []),
      maxClients: z._default(z.intRange(1, 10_000), 100),
      maxMessageSize: z._default(z.intRange(1024, 16 * 1024 * 1024), 1024 * 1024),
      rateLimit: z._default(z.intRange(1, 1_000_000), 100),
      rateLimitWindow: z._default(z.intRange(10, 60_000), 1000),
      handshakeTimeout: z._default(z.intRange(100, 60_000), 10_000),
      idleTimeout: z._default(z.intRange(1000, 86_400_000), 300_000),
      heartbeatInterval: z._default(z.intRange(100, 300_000), 30_000),
      maxPatternsPerClient: z._default(z.intRange(1, 100_000), 1000),
      // Snapshot keys one client may have waiting to be sent (all its snapshots); a subscribe beyond is
      // refused with SUBSCRIPTION_FAILED, a replay that falls behind the ring beyond it is dropped.
      maxPendingSnapshotKeys: z._default(z.intRange(1, 10_000_000), 200_000),
      // Keys one client may hold under app.<ns>.custom; writes of new keys beyond are FORBIDDEN.
      maxKeysPerClient: z._default(z.intRange(1, 1_000_000), 10_000),
      // A departed client's keys stay (stale) this long in ms, then are deleted unless it came back.
      departedKeyTtl: z._default(z.intRange(1000, 604_800_000), 600_000),
      backpressure: z.prefault(
        z.strictObject({
          softLimitBytes: z._default(z.intRange(1024), 1024 * 1024),
          hardLimitBytes: z._default(z.intRange(2048), 8 * 1024 * 1024),
          // Live backlog only: snapshot and replay pages never enter the queue.
          maxQueuedMessages: z._default(z.intRange(1, 1_000_000), 10_000),
        }),
        {},
      ),
    }),
    {},
  ),
  commands: z.prefault(
    z.strictObject({
      defaultTimeout: z._default(z.intRange(1, 300_000), 30_000),
      idempotencyWindow: z._default(z.intRange(1000, 3_600_000), 60_000),
      // Commands one client may have in flight (each holds its frame until its final ack or ttl).
      maxInFlightPerClient: z._default(z.intRange(1, 100_000), 100),
    }),
    {},
  ),
  replay: z.prefault(
    z.strictObject({
      ringSize: z._default(z.intRange(1, 1_000_000), 10_000),
      // Byte budget of the ring (serialised messages), so large values cannot grow memory without bound.
      maxBytes: z._default(z.intRange(64 * 1024, 4 * 1024 * 1024 * 1024), 64 * 1024 * 1024),
    }),
    {},
  ),
  eventLog: z.prefault(
    z.strictObject({
      enabled: z._default(z.boolean(), true),
      path: z._default(z.textRange(1), 'data/telemetry-bridge/events'),
      maxFileSize: z._default(z.intRange(4096), 16 * 1024 * 1024),
      maxFiles: z._default(z.intRange(1, 10_000), 8),
      // Records are fsynced at least this often (ms), and before any ack that promises persistence.
      syncInterval: z._default(z.intRange(1, 1000), 50),
      // false: never fsync (measuring only; a power cut can then lose acknowledged records).
      fsync: z._default(z.boolean(), true),
    }),
    {},
  ),
  // The web console and state API on the client transport's port (docs/console.md).
  console: z.prefault(
    z.strictObject({
      enabled: z._default(z.boolean(), true),
      // Names the Host header may carry besides IP literals, localhost and this machine's hostname.
      allowedHosts: z._default(z.array(z.textRange(1, 253)).check(z.maxLength(32)), []),
    }),
    {},
  ),
  metrics: z.prefault(
    z.strictObject({
      enabled: z._default(z.boolean(), true),
      host: z._default(z.textRange(1), '0.0.0.0'),
      port: z._default(port, 9090),
      path: z._default(z.string().check(z.startsWith('/')), '/metrics'),
    }),
    {},
  ),
  health: z.prefault(
    z.strictObject({
      enabled: z._default(z.boolean(), true),
      host: z._default(z.textRange(1), '0.0.0.0'),
      port: z._default(port, 9091),
    }),
    {},
  ),
  logging: z.prefault(
    z.strictObject({
      level: z._default(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), 'info'),
      pretty: z._default(z.boolean(), false),
    }),
    {},
  ),
});

export type BridgeConfig = z.output<typeof configSchema>;

/**
 * The fully defaulted configuration (used to derive environment names and types), parsed once at load by
 * zod's runtime parser: the mini API's objects build no compiled fast path for a parse (docs/at-rest.md at
 * the repository root, "What was cut" and "zod's mini API").
 */
export const DEFAULT_CONFIG: BridgeConfig = configSchema.parse({});

function snake(key: string): string {
  return key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
}

/** Environment variable → config path, for every leaf of the schema. */
export function envOverrides(): Record<string, EnvOverride> {
  const out: Record<string, EnvOverride> = {};
  const walk = (obj: Record<string, unknown>, prefix: string[]): void => {
    for (const [k, v] of Object.entries(obj)) {
      const path = [...prefix, k];
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
        walk(v as Record<string, unknown>, path);
        continue;
      }
      const name = 'BRIDGE_' + path.map(snake).join('_');
      const parse = Array.isArray(v)
        ? (raw: string) =>
            raw
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean)
        : typeof v === 'string'
          ? (raw: string) => raw
          : coerceEnvValue;
      out[name] = { path: path.join('.'), parse };
    }
  };
  walk(DEFAULT_CONFIG, []);
  return out;
}

export function loadBridgeConfig(file?: string, environment: NodeJS.ProcessEnv = process.env): BridgeConfig {
  const config = loadConfig({
    schema: configSchema,
    file,
    env: envOverrides(),
    environment,
    substitute: true,
  });
  if (config.clientTransport.requireAuth && config.clientTransport.authTokens.length === 0) {
    throw new ConfigError(
      `${file ?? 'configuration'}: clientTransport.requireAuth is true but clientTransport.authTokens is empty`,
    );
  }
  if (
    config.clientTransport.backpressure.hardLimitBytes <= config.clientTransport.backpressure.softLimitBytes
  ) {
    throw new ConfigError(
      `${file ?? 'configuration'}: clientTransport.backpressure.hardLimitBytes must exceed softLimitBytes`,
    );
  }
  return config;
}
