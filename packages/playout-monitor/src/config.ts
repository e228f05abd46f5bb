/**
 * Configuration (README "Configuration"): `settings` and `servers`, validated strictly
 * (unknown keys are errors naming the key), 1 to 12 servers, unique ids.
 * Per-server input options are design additions with defaults, documented in the README.
 */
import { isIP } from 'node:net';
import { ConfigError, loadConfig } from '@broadcast-ops/core';
import * as z from 'zod';
import { casparcgFormat } from './domain/video-format.ts';

const port = z.number().int().min(0).max(65535);
/** A peer's port: 0 is not a port anyone listens on. */
const peerPort = z.number().int().min(1).max(65535);

const HOST_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

/** An IP literal, or a host name by RFC 1123 section 2.1 (letters, digits, hyphens; dotted labels). */
export function isValidHost(h: string): boolean {
  if (isIP(h) !== 0) return true;
  if (h.length > 253) return false;
  const labels = (h.endsWith('.') ? h.slice(0, -1) : h).split('.');
  if (!labels.every((l) => HOST_LABEL.test(l))) return false;
  // All-numeric dotted names are meant as IPv4 addresses: an invalid one (999.999.999.999) is refused.
  return !/^[0-9.]+$/.test(h);
}

const host = z
  .string()
  .min(1)
  .max(253)
  .refine(isValidHost, { message: 'not an IP address or a host name (RFC 1123)' });

export const MAX_DEVICES = 12;

/** The products' own default ports: CasparCG OSC, vMix HTTP API, HyperDeck TCP. */
export const DEFAULT_PORTS = { osc_player: 6250, http_mixer: 8088, tcp_recorder: 9993 } as const;

const defaultPorts = z
  .strictObject({
    osc_player: port.default(DEFAULT_PORTS.osc_player),
    http_mixer: port.default(DEFAULT_PORTS.http_mixer),
    tcp_recorder: port.default(DEFAULT_PORTS.tcp_recorder),
  })
  .default(DEFAULT_PORTS);

export const settingsSchema = z.strictObject({
  defaultFramerate: z.number().positive().max(100).default(50),
  updateIntervalMs: z.number().int().min(10).max(60_000).default(100),
  webSocketPort: port.default(3050),
  defaultPorts,
  emberPlusPort: port.default(9000),
  tslUmdDestinations: z
    .array(z.strictObject({ host, port: peerPort.default(4003) }))
    .max(32)
    .default([]),
  tslUmdScreen: z.number().int().min(0).max(65535).default(0),
  /** Design addition: `single` = one display message per packet (receivers that read only the first);
   * `packed` = as many as fit in 2048 bytes (docs/OUTPUTS.md). */
  tslUmdPacking: z.enum(['single', 'packed']).default('single'),
  /** Design addition: what the final TSL packet on shutdown shows: every tally `off`, or `offline`. */
  tslUmdShutdownState: z.enum(['off', 'offline']).default('off'),
  /** Design addition: address the HTTP server and the OSC sockets bind to. */
  bindAddress: z.string().min(1).default('0.0.0.0'),
  /** Design addition: address the outputs listen on (HTTP pages, WebSocket, control API, Ember+).
   * Loopback unless configured otherwise, so the control API is not on the network by accident. */
  listenAddress: z.string().min(1).default('127.0.0.1'),
  /** Design addition: mixer inputs sent as punch `tally` to broker sessions (docs/TALLY.md, "Tally to punch").
   * The admin token comes from `adminToken` or from the environment variable named by `adminTokenEnv`. */
  punchTally: z
    .array(
      z.strictObject({
        brokerUrl: z.url({ protocol: /^https?$/ }),
        session: z.string().min(1).max(64),
        adminToken: z.string().min(1).max(2048).optional(),
        adminTokenEnv: z
          .string()
          .regex(/^[A-Z_][A-Z0-9_]{0,63}$/)
          .optional(),
        inputs: z
          .array(
            z.strictObject({
              device: z.number().int().min(1).max(65534),
              key: z.string().min(1).max(64),
              stream: z.string().min(1).max(64),
            }),
          )
          .min(1)
          .max(64),
      }),
    )
    .max(16)
    .optional(),
  /** Design addition: further names the HTTP app and WebSocket answer to (the `Host` allow-list). */
  allowedHosts: z.array(host).max(32).default([]),
});

const common = {
  id: z.number().int().min(1).max(65534),
  name: z.string().min(1).max(64),
  ip: host,
  port: peerPort.optional(),
  framerate: z.number().positive().max(100).optional(),
};

export const oscServerSchema = z.strictObject({
  ...common,
  /** The local UDP port the monitor receives this server's OSC on; 0 = any free port. */
  port: port.optional(),
  type: z.literal('osc_player'),
  channel: z.number().int().min(1).max(9999).default(1),
  layer: z.number().int().min(-999).max(99999).default(10),
  /** Design addition: further layers of the channel watched, each with its own state (what is playing,
   * paused, time) in the device's `layers`; `layer` stays the device's own state (docs/PROTOCOLS.md). */
  layers: z
    .array(z.number().int().min(-999).max(99999))
    .max(16)
    .refine((l) => new Set(l).size === l.length, { message: 'a layer is listed twice' })
    .optional(),
  /** The channel's CasparCG video-mode (`1080i5000`, `720p5994`, `PAL`, …): needed on 2.2/2.3 for interlaced
   * channels, whose `/framerate` is the field rate; 2.4+ and 2.1 send `/format` themselves. */
  videoFormat: z
    .string()
    .max(32)
    .refine((v) => casparcgFormat(v) !== undefined, {
      message: 'not a CasparCG video-mode (e.g. 1080i5000, 1080p5000, 720p5994, PAL, NTSC)',
    })
    .optional(),
  staleTimeoutMs: z.number().int().min(100).max(600_000).default(5000),
  layerQuietMs: z.number().int().min(100).max(60_000).default(1000),
});

export const httpServerSchema = z.strictObject({
  ...common,
  type: z.literal('http_mixer'),
  pollIntervalMs: z.number().int().min(50).max(60_000).default(250),
  timeoutMs: z.number().int().min(50).max(60_000).default(2000),
  offlineAfterFailures: z.number().int().min(1).max(100).default(3),
  /** Where the tally comes from: `tcp` = vMix's TCP API (`SUBSCRIBE TALLY`, falling back to the HTTP poll
   * while it does not answer), `http` = the HTTP poll only (docs/TALLY.md). */
  tallyApi: z.enum(['tcp', 'http']).default('tcp'),
  /** vMix's TCP API port (fixed at 8099 on vMix; configurable for simulators and port forwards). */
  tcpPort: peerPort.default(8099),
  /** Inputs given their own tally on the outputs, by vMix GUID (`key`): a TSL UMD index each, and a
   * display name (else the input's title). docs/TALLY.md, "Outputs". */
  tallyInputs: z
    .array(
      z.strictObject({
        key: z.string().min(1).max(64),
        tslIndex: z.number().int().min(1).max(65534).optional(),
        name: z.string().min(1).max(64).optional(),
      }),
    )
    .max(64)
    .optional(),
  username: z.string().max(256).optional(),
  password: z.string().max(256).optional(),
});

export const tcpServerSchema = z.strictObject({
  ...common,
  type: z.literal('tcp_recorder'),
  pollIntervalMs: z.number().int().min(0).max(60_000).default(500),
  pingIntervalMs: z.number().int().min(100).max(60_000).default(5000),
  /** A command unanswered for this long means a lost reply: the connection is dropped and reopened. */
  replyTimeoutMs: z.number().int().min(100).max(60_000).default(4000),
  /** A clip id missing from the clip list is looked up again at most this often. */
  clipsRefreshMinMs: z.number().int().min(100).max(600_000).default(10_000),
  timeoutMs: z.number().int().min(200).max(120_000).default(6500),
  reconnectMinMs: z.number().int().min(10).max(60_000).default(1000),
  /** The reconnect backoff's cap: a deck that comes back is seen within this (README "Configuration"). */
  reconnectMaxMs: z.number().int().min(10).max(600_000).default(5000),
});

export const serverSchema = z.discriminatedUnion('type', [
  oscServerSchema,
  httpServerSchema,
  tcpServerSchema,
]);

export const configSchema = z
  .strictObject({
    settings: settingsSchema,
    servers: z.array(serverSchema).min(1).max(MAX_DEVICES),
  })
  .superRefine((cfg, ctx) => {
    const seen = new Set<number>();
    cfg.servers.forEach((s, i) => {
      if (seen.has(s.id))
        ctx.addIssue({ code: 'custom', path: ['servers', i, 'id'], message: `duplicate id ${s.id}` });
      seen.add(s.id);
    });
    // One peer address, one device: two devices on the same transport, host and port would read (or for
    // OSC receive) the same peer twice. Port 0 on an OSC device means "any free local port": never a clash.
    const addresses = new Map<string, number>();
    cfg.servers.forEach((s, i) => {
      const key = deviceAddressKey(s, cfg.settings);
      if (key === undefined) return;
      const other = addresses.get(key);
      if (other === undefined) addresses.set(key, s.id);
      else
        ctx.addIssue({
          code: 'custom',
          path: ['servers', i, 'ip'],
          message: addressInUse(s, other, cfg.settings),
        });
    });
    // A TSL index names one display: the devices' ids and the mapped inputs' indexes share the space.
    const indexes = new Set(seen);
    cfg.servers.forEach((s, i) => {
      if (s.type !== 'http_mixer') return;
      s.tallyInputs?.forEach((t, j) => {
        if (t.tslIndex === undefined) return;
        if (indexes.has(t.tslIndex))
          ctx.addIssue({
            code: 'custom',
            path: ['servers', i, 'tallyInputs', j, 'tslIndex'],
            message: `TSL index ${t.tslIndex} is already a device id or another input's index`,
          });
        indexes.add(t.tslIndex);
      });
    });
  });

export type MonitorConfig = z.output<typeof configSchema>;
export type ServerConfig = MonitorConfig['servers'][number];
export type OscServerConfig = z.output<typeof oscServerSchema>;
export type HttpServerConfig = z.output<typeof httpServerSchema>;
export type TcpServerConfig = z.output<typeof tcpServerSchema>;

export function serverPort(server: ServerConfig, settings: MonitorConfig['settings']): number {
  return server.port ?? settings.defaultPorts[server.type];
}

/** The address a device is reached on (`udp`/`tcp` + host + port), lower-cased; undefined for OSC port 0.
 * One CasparCG server sends every channel and layer on one OSC stream, so for `osc_player` the watched
 * channel and layer are part of the address: two channels of one server are two devices, not a clash. */
export function deviceAddressKey(
  server: ServerConfig,
  settings: MonitorConfig['settings'],
): string | undefined {
  const port = serverPort(server, settings);
  if (server.type === 'osc_player' && port === 0) return undefined;
  const transport = server.type === 'osc_player' ? 'udp' : 'tcp';
  const where = server.type === 'osc_player' ? `/${server.channel}-${server.layer}` : '';
  return `${transport}:${server.ip.toLowerCase().replace(/\.$/, '')}:${port}${where}`;
}

export function addressInUse(
  server: ServerConfig,
  other: number,
  settings: MonitorConfig['settings'],
): string {
  return `address ${deviceAddressLabel(server, settings)} is already used by device ${other}`;
}

export function deviceAddressLabel(server: ServerConfig, settings: MonitorConfig['settings']): string {
  const host = server.ip.includes(':') ? `[${server.ip}]` : server.ip;
  const where = server.type === 'osc_player' ? ` (channel ${server.channel}, layer ${server.layer})` : '';
  return `${host}:${serverPort(server, settings)}${where}`;
}

/** Environment overrides (documented in the README). */
export const CONFIG_ENV = {
  PLAYOUT_MONITOR_PORT: 'settings.webSocketPort',
  PLAYOUT_MONITOR_BIND: 'settings.bindAddress',
  PLAYOUT_MONITOR_LISTEN: 'settings.listenAddress',
} as const;

export function loadMonitorConfig(options: {
  file?: string;
  data?: unknown;
  environment?: NodeJS.ProcessEnv;
}): MonitorConfig {
  if (options.file === undefined && options.data === undefined) {
    throw new ConfigError('a configuration file is required: playout-monitor --config <file.json>');
  }
  return loadConfig({
    schema: configSchema,
    file: options.file,
    data: options.data,
    env: CONFIG_ENV,
    substitute: true,
    ...(options.environment ? { environment: options.environment } : {}),
  });
}
