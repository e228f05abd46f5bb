/**
 * Configuration (README "Configuration"): `settings` and `servers`, validated strictly
 * (unknown keys are errors naming the key), 1 to 12 servers, unique ids.
 * Per-server input options are design additions with defaults, documented in the README.
 */
import { isIP } from 'node:net';
import { ConfigError, loadConfig } from '@broadcast-ops/core';
import * as z from '@broadcast-ops/core/zod';
import { casparcgFormat } from './domain/video-format.ts';

/** A frame rate: above 0, at most 100. */
const framerate = () => z.number().check(z.positive(), z.maximum(100));

const port = z.intRange(0, 65535);
/** A peer's port: 0 is not a port anyone listens on. */
const peerPort = z.intRange(1, 65535);

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
  .textRange(1, 253)
  .check(z.refine(isValidHost, { message: 'not an IP address or a host name (RFC 1123)' }));

export const MAX_DEVICES = 12;

/** The products' own default ports: CasparCG OSC, vMix HTTP API, HyperDeck TCP. */
export const DEFAULT_PORTS = { osc_player: 6250, http_mixer: 8088, tcp_recorder: 9993 } as const;

const defaultPorts = z._default(
  z.strictObject({
    osc_player: z._default(port, DEFAULT_PORTS.osc_player),
    http_mixer: z._default(port, DEFAULT_PORTS.http_mixer),
    tcp_recorder: z._default(port, DEFAULT_PORTS.tcp_recorder),
  }),
  DEFAULT_PORTS,
);

export const settingsSchema = z.strictObject({
  defaultFramerate: z._default(framerate(), 50),
  updateIntervalMs: z._default(z.intRange(10, 60_000), 100),
  webSocketPort: z._default(port, 3050),
  defaultPorts,
  emberPlusPort: z._default(port, 9000),
  tslUmdDestinations: z._default(
    z.array(z.strictObject({ host, port: z._default(peerPort, 4003) })).check(z.maxLength(32)),
    [],
  ),
  tslUmdScreen: z._default(z.intRange(0, 65535), 0),
  /** Design addition: `single` = one display message per packet (receivers that read only the first);
   * `packed` = as many as fit in 2048 bytes (docs/OUTPUTS.md). */
  tslUmdPacking: z._default(z.enum(['single', 'packed']), 'single'),
  /** Design addition: what the final TSL packet on shutdown shows: every tally `off`, or `offline`. */
  tslUmdShutdownState: z._default(z.enum(['off', 'offline']), 'off'),
  /** Design addition: address the HTTP server and the OSC sockets bind to. */
  bindAddress: z._default(z.string().check(z.minLength(1)), '0.0.0.0'),
  /** Design addition: address the outputs listen on (HTTP pages, WebSocket, control API, Ember+).
   * Loopback unless configured otherwise, so the control API is not on the network by accident. */
  listenAddress: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  /** Design addition: mixer inputs sent as punch `tally` to broker sessions (docs/TALLY.md, "Tally to punch").
   * The admin token comes from `adminToken` or from the environment variable named by `adminTokenEnv`. */
  punchTally: z.optional(
    z
      .array(
        z.strictObject({
          brokerUrl: z.url({ protocol: /^https?$/ }),
          session: z.textRange(1, 64),
          adminToken: z.optional(z.textRange(1, 2048)),
          adminTokenEnv: z.optional(z.string().check(z.regex(/^[A-Z_][A-Z0-9_]{0,63}$/))),
          inputs: z
            .array(
              z.strictObject({
                device: z.intRange(1, 65534),
                key: z.textRange(1, 64),
                stream: z.textRange(1, 64),
              }),
            )
            .check(z.minLength(1), z.maxLength(64)),
        }),
      )
      .check(z.maxLength(16)),
  ),
  /** Design addition: further names the HTTP app and WebSocket answer to (the `Host` allow-list). */
  allowedHosts: z._default(z.array(host).check(z.maxLength(32)), []),
});

const common = {
  id: z.intRange(1, 65534),
  name: z.textRange(1, 64),
  ip: host,
  port: z.optional(peerPort),
  framerate: z.optional(framerate()),
};

export const oscServerSchema = z.strictObject({
  ...common,
  /** The local UDP port the monitor receives this server's OSC on; 0 = any free port. */
  port: z.optional(port),
  type: z.literal('osc_player'),
  channel: z._default(z.intRange(1, 9999), 1),
  layer: z._default(z.intRange(-999, 99999), 10),
  /** Design addition: further layers of the channel watched, each with its own state (what is playing,
   * paused, time) in the device's `layers`; `layer` stays the device's own state (docs/PROTOCOLS.md). */
  layers: z.optional(
    z.array(z.intRange(-999, 99999)).check(
      z.maxLength(16),
      z.refine((l) => new Set(l).size === l.length, { message: 'a layer is listed twice' }),
    ),
  ),
  /** The channel's CasparCG video-mode (`1080i5000`, `720p5994`, `PAL`, …): needed on 2.2/2.3 for interlaced
   * channels, whose `/framerate` is the field rate; 2.4+ and 2.1 send `/format` themselves. */
  videoFormat: z.optional(
    z.string().check(
      z.maxLength(32),
      z.refine((v) => casparcgFormat(v) !== undefined, {
        message: 'not a CasparCG video-mode (e.g. 1080i5000, 1080p5000, 720p5994, PAL, NTSC)',
      }),
    ),
  ),
  staleTimeoutMs: z._default(z.intRange(100, 600_000), 5000),
  layerQuietMs: z._default(z.intRange(100, 60_000), 1000),
});

export const httpServerSchema = z.strictObject({
  ...common,
  type: z.literal('http_mixer'),
  pollIntervalMs: z._default(z.intRange(50, 60_000), 250),
  timeoutMs: z._default(z.intRange(50, 60_000), 2000),
  offlineAfterFailures: z._default(z.intRange(1, 100), 3),
  /** Where the tally comes from: `tcp` = vMix's TCP API (`SUBSCRIBE TALLY`, falling back to the HTTP poll
   * while it does not answer), `http` = the HTTP poll only (docs/TALLY.md). */
  tallyApi: z._default(z.enum(['tcp', 'http']), 'tcp'),
  /** vMix's TCP API port (fixed at 8099 on vMix; configurable for simulators and port forwards). */
  tcpPort: z._default(peerPort, 8099),
  /** Inputs given their own tally on the outputs, by vMix GUID (`key`): a TSL UMD index each, and a
   * display name (else the input's title). docs/TALLY.md, "Outputs". */
  tallyInputs: z.optional(
    z
      .array(
        z.strictObject({
          key: z.textRange(1, 64),
          tslIndex: z.optional(z.intRange(1, 65534)),
          name: z.optional(z.textRange(1, 64)),
        }),
      )
      .check(z.maxLength(64)),
  ),
  username: z.optional(z.string().check(z.maxLength(256))),
  password: z.optional(z.string().check(z.maxLength(256))),
});

export const tcpServerSchema = z.strictObject({
  ...common,
  type: z.literal('tcp_recorder'),
  pollIntervalMs: z._default(z.intRange(0, 60_000), 500),
  pingIntervalMs: z._default(z.intRange(100, 60_000), 5000),
  /** A command unanswered for this long means a lost reply: the connection is dropped and reopened. */
  replyTimeoutMs: z._default(z.intRange(100, 60_000), 4000),
  /** A clip id missing from the clip list is looked up again at most this often. */
  clipsRefreshMinMs: z._default(z.intRange(100, 600_000), 10_000),
  timeoutMs: z._default(z.intRange(200, 120_000), 6500),
  reconnectMinMs: z._default(z.intRange(10, 60_000), 1000),
  /** The reconnect backoff's cap: a deck that comes back is seen within this (README "Configuration"). */
  reconnectMaxMs: z._default(z.intRange(10, 600_000), 5000),
});

export const serverSchema = z.discriminatedUnion('type', [
  oscServerSchema,
  httpServerSchema,
  tcpServerSchema,
]);

export const configSchema = z
  .strictObject({
    settings: settingsSchema,
    servers: z.array(serverSchema).check(z.minLength(1), z.maxLength(MAX_DEVICES)),
  })
  .check(
    z.superRefine((cfg, ctx) => {
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
    }),
  );

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
