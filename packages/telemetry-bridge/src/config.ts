/**
 * Configuration (README "Configuration": name, environment, companion, clientTransport, logging)
 * plus the additions documented in the README (auth tokens, limits, metrics, health, event log, replay).
 * Strict: unknown keys are errors. Environment overrides are derived from the schema: the dotted camelCase
 * path in SCREAMING_SNAKE with prefix BRIDGE_ (`clientTransport.maxClients` → BRIDGE_CLIENT_TRANSPORT_MAX_CLIENTS),
 * coerced by the type of the default (arrays comma-separated).
 */
import { ConfigError, coerceEnvValue, loadConfig, type EnvOverride } from '@broadcast-ops/core';
import * as z from 'zod';

const port = z.number().int().min(0).max(65535);

export const configSchema = z.strictObject({
  name: z.string().min(1).max(64).default('telemetry-bridge'),
  environment: z.enum(['development', 'production', 'test']).default('production'),
  companion: z
    .strictObject({
      // Companion Satellite API (docs/companion.md): WebSocket on 16623 (Companion ≥ 3.5) or TCP on 16622.
      enabled: z.boolean().default(false),
      host: z.string().min(1).default('127.0.0.1'),
      port: port.default(16623),
      // Hot standby (docs/companion.md "Hot standby"): Companion instances in order of preference, all on
      // the same transport; when set, host/port are not used.
      hosts: z
        .array(z.strictObject({ host: z.string().min(1), port: port.refine((p) => p > 0, 'port 0') }))
        .min(1)
        .max(8)
        .optional(),
      transport: z.enum(['ws', 'tcp']).default('ws'),
      // Companion drops a Satellite client after 5 s without inbound data: keep the PING well inside.
      // A hung Companion is detected within deadAfter + heartbeatInterval (docs/companion.md "Hot standby").
      heartbeatInterval: z.number().int().min(50).max(2000).default(200),
      deadAfter: z.number().int().min(100).max(60_000).default(1000),
      // Wait before the first try of the next host after a loss (hot standby); later rounds back off.
      failoverDelay: z.number().int().min(0).max(60_000).default(0),
      connectionTimeout: z.number().int().min(100).max(60_000).default(5000),
      replyTimeout: z.number().int().min(50).max(60_000).default(5000),
      reconnectDelay: z.number().int().min(10).max(60_000).default(1000),
      maxReconnectDelay: z.number().int().min(10).max(600_000).default(30_000),
      reconnectJitter: z.number().int().min(0).max(60_000).default(500),
      maxReconnectAttempts: z.number().int().min(0).default(0),
      refreshTimeout: z.number().int().min(10).max(60_000).default(1000),
      // Absolute button locations ("page/row/column") subscribed on every session where Companion offers
      // subscriptions (docs/companion.md "Button state for every app").
      locations: z
        .array(z.string().regex(/^[1-9]\d{0,4}\/\d{1,4}\/\d{1,4}$/, 'a location: page/row/column, page ≥ 1'))
        .max(1024)
        .default([]),
      device: z
        .strictObject({
          deviceId: z
            .string()
            .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
            .default('telemetry-bridge-001'),
          productName: z
            .string()
            .min(1)
            .max(64)
            .regex(/^[^\r\n]*$/)
            .default('Telemetry Bridge'),
          serial: z
            .string()
            .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
            .optional(),
          keysTotal: z.number().int().min(1).max(2000).default(32),
          keysPerRow: z.number().int().min(1).max(1000).default(8),
          bitmaps: z.number().int().min(0).max(512).default(0),
          // Preferred bitmap encoding; used where CAPS BITMAP_FORMATS offers it (1.12.0), raw rgb otherwise.
          bitmapFormat: z.enum(['rgb', 'png', 'webp']).default('rgb'),
          colors: z.union([z.enum(['hex', 'rgb']), z.literal(false)]).default('hex'),
          text: z.boolean().default(true),
          textStyle: z.boolean().default(false),
          pincodeLock: z.boolean().default(true),
          brightness: z.boolean().default(true),
          variables: z
            .array(
              z.strictObject({
                id: z.string().regex(/^[A-Za-z0-9_:-]{1,64}$/),
                type: z.enum(['input', 'output']),
                name: z.string().min(1).max(128),
                description: z.string().max(256).optional(),
              }),
            )
            .max(256)
            .default([]),
        })
        .prefault({}),
    })
    .prefault({}),
  clientTransport: z
    .strictObject({
      host: z.string().min(1).default('0.0.0.0'),
      port: port.default(8765),
      requireAuth: z.boolean().default(false),
      // Origins (scheme://host[:port]) besides the bridge's own whose pages may open a WebSocket to it.
      allowedOrigins: z
        .array(
          z
            .string()
            .max(300)
            .regex(/^https?:\/\/[^/\s?#]+$/i, 'an origin: http(s)://host[:port]'),
        )
        .max(32)
        .default([]),
      authTokens: z.array(z.string().min(16).max(1024)).default([]),
      maxClients: z.number().int().min(1).max(10_000).default(100),
      maxMessageSize: z
        .number()
        .int()
        .min(1024)
        .max(16 * 1024 * 1024)
        .default(1024 * 1024),
      rateLimit: z.number().int().min(1).max(1_000_000).default(100),
      rateLimitWindow: z.number().int().min(10).max(60_000).default(1000),
      handshakeTimeout: z.number().int().min(100).max(60_000).default(10_000),
      idleTimeout: z.number().int().min(1000).max(86_400_000).default(300_000),
      heartbeatInterval: z.number().int().min(100).max(300_000).default(30_000),
      maxPatternsPerClient: z.number().int().min(1).max(100_000).default(1000),
      // Snapshot keys one client may have waiting to be sent (all its snapshots); a subscribe beyond is
      // refused with SUBSCRIPTION_FAILED, a replay that falls behind the ring beyond it is dropped.
      maxPendingSnapshotKeys: z.number().int().min(1).max(10_000_000).default(200_000),
      // Keys one client may hold under app.<ns>.custom; writes of new keys beyond are FORBIDDEN.
      maxKeysPerClient: z.number().int().min(1).max(1_000_000).default(10_000),
      // A departed client's keys stay (stale) this long in ms, then are deleted unless it came back.
      departedKeyTtl: z.number().int().min(1000).max(604_800_000).default(600_000),
      backpressure: z
        .strictObject({
          softLimitBytes: z
            .number()
            .int()
            .min(1024)
            .default(1024 * 1024),
          hardLimitBytes: z
            .number()
            .int()
            .min(2048)
            .default(8 * 1024 * 1024),
          // Live backlog only: snapshot and replay pages never enter the queue.
          maxQueuedMessages: z.number().int().min(1).max(1_000_000).default(10_000),
        })
        .prefault({}),
    })
    .prefault({}),
  commands: z
    .strictObject({
      defaultTimeout: z.number().int().min(1).max(300_000).default(30_000),
      idempotencyWindow: z.number().int().min(1000).max(3_600_000).default(60_000),
      // Commands one client may have in flight (each holds its frame until its final ack or ttl).
      maxInFlightPerClient: z.number().int().min(1).max(100_000).default(100),
    })
    .prefault({}),
  replay: z
    .strictObject({
      ringSize: z.number().int().min(1).max(1_000_000).default(10_000),
      // Byte budget of the ring (serialised messages), so large values cannot grow memory without bound.
      maxBytes: z
        .number()
        .int()
        .min(64 * 1024)
        .max(4 * 1024 * 1024 * 1024)
        .default(64 * 1024 * 1024),
    })
    .prefault({}),
  eventLog: z
    .strictObject({
      enabled: z.boolean().default(true),
      path: z.string().min(1).default('data/telemetry-bridge/events'),
      maxFileSize: z
        .number()
        .int()
        .min(4096)
        .default(16 * 1024 * 1024),
      maxFiles: z.number().int().min(1).max(10_000).default(8),
      // Records are fsynced at least this often (ms), and before any ack that promises persistence.
      syncInterval: z.number().int().min(1).max(1000).default(50),
      // false: never fsync (measuring only; a power cut can then lose acknowledged records).
      fsync: z.boolean().default(true),
    })
    .prefault({}),
  // The web console and state API on the client transport's port (docs/console.md).
  console: z
    .strictObject({
      enabled: z.boolean().default(true),
      // Names the Host header may carry besides IP literals, localhost and this machine's hostname.
      allowedHosts: z.array(z.string().min(1).max(253)).max(32).default([]),
    })
    .prefault({}),
  metrics: z
    .strictObject({
      enabled: z.boolean().default(true),
      host: z.string().min(1).default('0.0.0.0'),
      port: port.default(9090),
      path: z.string().startsWith('/').default('/metrics'),
    })
    .prefault({}),
  health: z
    .strictObject({
      enabled: z.boolean().default(true),
      host: z.string().min(1).default('0.0.0.0'),
      port: port.default(9091),
    })
    .prefault({}),
  logging: z
    .strictObject({
      level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      pretty: z.boolean().default(false),
    })
    .prefault({}),
});

export type BridgeConfig = z.output<typeof configSchema>;

/**
 * The fully defaulted configuration (used to derive environment names and types). Parsed once, at load,
 * without zod's compiled fast path, which would be built for this one parse (about 10 ms of every start;
 * core's loadConfig parses the same way, docs/at-rest.md at the repository root, "What was cut").
 */
export const DEFAULT_CONFIG: BridgeConfig = configSchema.parse({}, { jitless: true });

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
