import { networkInterfaces } from 'node:os';
import { isIP } from 'node:net';
import { ConfigError, loadConfig } from '@broadcast-ops/core';
import * as z from '@broadcast-ops/core/zod';
import { parseNetwork } from './domain/access-list.ts';
import { PTP_PROFILES, resolveProfile } from './domain/ptp-profiles.ts';
import { isPasswordHash } from './io/web/passwords.ts';

/**
 * timesvc configuration (README "Configuration"). Every section of the spec
 * is accepted and validated strictly now; sections and keys marked "inert" are parsed but not acted on yet
 * (PTP, GPSDO, most of web). See README "Configuration".
 */

/** `${NAME}` substitution yields text: numeric and boolean keys also accept their textual form. */
function num<T extends z.ZodMiniType<number>>(schema: T) {
  return z.pipe(
    z.transform((v: unknown) => (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : v)),
    schema,
  );
}

/** An integer from min to max, inclusive, in its textual form too. */
const int = (min: number, max: number) => num(z.intRange(min, max));

function bool() {
  return z.pipe(
    z.transform((v: unknown) => (v === 'true' ? true : v === 'false' ? false : v)),
    z.boolean(),
  );
}

/** `64`, `"64s"`, `"30m"`, `"24h"`, `"500ms"` -> seconds. */
const duration = z.union([
  num(z.number().check(z.nonnegative())),
  z.pipe(
    z.string().check(z.regex(/^\d+(\.\d+)?(ms|s|m|h)?$/, 'a duration such as 64s, 30m or 24h')),
    z.transform((s) => {
      const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(s);
      const v = Number(m?.[1] ?? 0);
      const unit = m?.[2] ?? 's';
      return unit === 'ms' ? v / 1000 : unit === 'm' ? v * 60 : unit === 'h' ? v * 3600 : v;
    }),
  ),
]);

const hostPort = z.string().check(z.refine((s) => parseHostPort(s, 123) !== undefined, 'must be host:port'));

const peerSchema = z.strictObject({
  address: hostPort,
  prefer: z._default(bool(), false),
  iburst: z._default(bool(), true),
  /** log2 s; below RFC 5905's MINPOLL 4 only for labs (chrony allows down to -6). */
  minpoll: z.optional(int(-4, 17)),
  maxpoll: z.optional(int(-4, 17)),
  /**
   * NTS (RFC 8915): key establishment with the peer's NTS-KE server, then only authenticated replies are
   * used. The NTP server and port then come from NTS-KE (README "NTS"), not from `address`.
   */
  nts_enabled: z._default(bool(), false),
  /** The peer's NTS-KE port (4460). */
  nts_ke_port: z._default(int(1, 65535), 4460),
});

const rateLimitSchema = z.strictObject({
  enabled: z._default(bool(), true),
  /** Average interval a client may sustain, seconds (chrony's `ratelimit interval` is log2 of this). */
  average_interval: z._default(duration, 1),
  burst: z._default(int(1, 1024), 16),
  /** Send at most one RATE kiss per client per this interval; other excess requests are dropped. */
  kod_interval: z._default(duration, 8),
  max_clients: z._default(int(16, 10_000_000), 65_536),
  ipv6_prefix: z._default(int(0, 128), 64),
});

/** The clock discipline (README "Discipline"); defaults follow RFC 5905 and chrony where they apply. */
const disciplineSchema = z.strictObject({
  /** Largest slew rate of the served clock, ppm (chrony's maxslewrate default is 83,333; ntpd 500). */
  max_slew_rate_ppm: z._default(num(z.number().check(z.minimum(10), z.maximum(83_333))), 5000),
  /** Corrections beyond this are stepped (RFC 5905 STEPT, 128 ms); backwards only after LI 3 is served. */
  step_threshold: z._default(duration, 0.128),
  /**
   * A reference whose level moves beyond step_threshold from the served clock is held back this long unless
   * another source confirms it (the stepout of RFC 5905 §11.3, 300 s as ntpd's; 0 = at once). docs/clock-discipline.md.
   */
  stepout: z._default(duration, 300),
  /** |estimate − served clock| beyond this is a FAULT (1 s). */
  fault_threshold: z._default(duration, 1),
  /** Longest HOLDOVER before FAULT (4 h). */
  holdover_timeout: z._default(duration, 4 * 3600),
  /**
   * /api/health (and timesvc_clock_health) is degraded while the advertised error (root delay/2 + root
   * dispersion) exceeds this in LOCKED or SYNCING (docs/clock-discipline.md "Health").
   */
  health_max_error: z._default(duration, 0.01),
  /** /api/health is healthy in HOLDOVER while the advertised error (root delay/2 + dispersion) is below this. */
  holdover_max_error: z._default(duration, 0.01),
  /** Samples a source needs before it is selected (an iburst's 4). */
  min_samples: z._default(int(1, 16), 4),
  /** Lock threshold floor, seconds (100 µs); the effective threshold is at least 3 × the reference jitter. */
  lock_threshold: z._default(duration, 0.0001),
  /**
   * Wander of the host clock between samples, ppm (chrony's maxclockerror, default 1): with the frequency
   * error, how fast the advertised dispersion grows while a reference is followed (docs/clock-discipline.md
   * "The advertised bound"). HOLDOVER grows at RFC 5905's 15 ppm.
   */
  max_clock_error_ppm: z._default(num(z.number().check(z.minimum(0.01), z.maximum(100))), 1),
});

const ntpSchema = z.strictObject({
  enabled: z._default(bool(), true),
  /** 0 = any free port (tests); 123 needs root or CAP_NET_BIND_SERVICE. */
  port: z._default(int(0, 65535), 123),
  /** "" = all addresses, IPv4 and IPv6; an IP address or an interface name binds to that only. */
  interface: z._default(z.string(), ''),
  /** Served stratum in local-stratum mode; otherwise the stratum follows the reference (stratum + 1, RFC 5905 §7.3). */
  stratum: z._default(int(1, 15), 2),
  /** Default minpoll for peers that set none (64 s -> minpoll 6). */
  poll_interval: z._default(duration, 64),
  ref_id: z._default(z.string().check(z.regex(/^[\x20-\x7e]{1,4}$/, 'must be 1-4 ASCII characters')), 'LOCL'),
  allowed_networks: z._default(
    z.array(z.string().check(z.refine((s) => tryNetwork(s), 'must be an IP network such as 10.0.0.0/8'))),
    [],
  ),
  upstream_peers: z._default(z.array(peerSchema).check(z.maxLength(64)), []),
  /** Local-stratum mode: serve time from the host clock at `stratum` when no other reference is usable. */
  local_stratum: z._default(bool(), false),
  rate_limit: z.prefault(rateLimitSchema, {}),
  discipline: z.prefault(disciplineSchema, {}),
  /**
   * Kernel receive timestamps (SIOCGSTAMPNS through the native addon, README "Accuracy"); on by default,
   * used wherever the addon is built. Off: the handler's own reading minus `rx_timestamp_correction_us`.
   */
  kernel_rx_timestamps: z._default(bool(), true),
  /**
   * Batched socket path (native/mmsg.c, docs/performance.md "Batched socket path"): recvmmsg with the kernel
   * receive timestamp of each datagram, replies with sendmmsg. On by default where the addon is built;
   * off, or without the addon: one Node dgram receive and send per request.
   */
  batched_io: z._default(bool(), true),
  /**
   * Native responder (docs/performance.md "Native responder"): on the batched path, plain requests are
   * answered on the addon's own thread from the served clock handed over as linear pieces, without waking
   * the JavaScript thread. On by default; off: every request is answered in JavaScript.
   */
  native_responder: z._default(bool(), true),
  /**
   * Microseconds subtracted from receive timestamps for the event loop's wake-up latency when kernel
   * timestamps are not in use (README "Accuracy"); a client sees the served clock move by about half of it.
   */
  rx_timestamp_correction_us: z._default(num(z.number().check(z.minimum(0), z.maximum(2000))), 0),
  /** SO_RCVBUF of the NTP sockets, bytes (the kernel caps it at net.core.rmem_max). */
  socket_receive_buffer: z._default(int(4096, 256 * 1024 * 1024), 4 * 1024 * 1024),
  /**
   * How served time passes a leap second (docs/leap-seconds.md): `step` repeats (insertion) or skips
   * (deletion) a second at the leap as the NTP timescale does and announces it with LI 1/2 in the last
   * day; `smear` slews it out linearly over `leap_smear_interval` centred on the leap, with LI 0, for
   * closed networks whose clients all take their time from this server. Never the default.
   */
  leap_mode: z._default(z.enum(['step', 'smear']), 'step'),
  /** Length of the smear window, seconds (24 h = 11.6 ppm). */
  leap_smear_interval: z._default(
    duration.check(z.refine((v) => v >= 1 && v <= 172_800, 'must be 1 s to 48 h')),
    86_400,
  ),
  /** A leap-seconds list (IERS/NIST format, e.g. /usr/share/zoneinfo/leap-seconds.list); "" = none. */
  leap_seconds_file: z._default(z.string(), ''),
});

const ntsSchema = z.strictObject({
  enabled: z._default(bool(), false),
  ke_port: z._default(int(0, 65535), 4460),
  cert_path: z._default(z.string(), ''),
  key_path: z._default(z.string(), ''),
  ca_path: z._default(z.string(), ''),
  cookie_key: z._default(z.string(), '').check(
    z.refine((s) => s === '' || (/^[0-9a-fA-F]+$/.test(s) && s.length % 2 === 0 && s.length >= 64), {
      message: 'must be hex, at least 32 bytes',
    }),
  ),
  min_tls_version: z._default(z.literal('1.3'), '1.3'),
  cipher_suite: z._default(z.string(), ''),
  /** Concurrent NTS-KE connections at most; more are closed at accept and counted (docs/nts.md). */
  ke_max_connections: z._default(int(1, 100_000), 1024),
  /** Concurrent NTS-KE connections from one address (IPv6: one /64) at most. */
  ke_max_connections_per_address: z._default(int(1, 100_000), 32),
  /** Deadline for the TLS handshake after the TCP accept (an idle connection is closed then). */
  ke_handshake_timeout: z._default(duration, 2),
});

/** A PTP port setting a profile sets (domain/ptp-profiles.ts): left out, it takes the profile's value. */
const profileInt = (min: number, max: number) => z.optional(int(min, max));

const ptpSchema = z.pipe(
  z.strictObject({
    enabled: z._default(bool(), false),
    interface: z._default(z.string(), ''),
    /** default | smpte-2059-2 | aes67 | aes67-smpte: the values and ranges of docs/ptp.md "Profiles". */
    profile: z._default(z.enum(PTP_PROFILES), 'default'),
    domain: profileInt(0, 127),
    priority1: profileInt(0, 255),
    priority2: profileInt(0, 255),
    clock_class: z._default(int(0, 255), 248),
    clock_accuracy: z._default(int(0, 255), 0xfe),
    log_announce_interval: profileInt(-7, 7),
    announce_receipt_timeout: profileInt(2, 255),
    log_sync_interval: profileInt(-7, 7),
    log_min_delay_req_interval: profileInt(-7, 7),
    /** DiffServ code point of event (319) and general (320) messages; the profile's by default. */
    dscp_event: profileInt(0, 63),
    dscp_general: profileInt(0, 63),
    /** Never master: listen and report the best master heard (docs/ptp.md "BMCA"). */
    listen_only: z._default(bool(), false),
    transport_mode: z._default(z.enum(['multicast', 'unicast']), 'multicast'),
    delay_mechanism: z._default(z.enum(['E2E', 'P2P']), 'E2E'),
    /** Always two-step: one-step is refused (docs/ptp-timestamps.md "Why no one-step"). */
    two_step_flag: z._default(bool(), true).check(
      z.refine((v) => v, {
        message:
          'one-step (false) is not supported: software timestamps cannot write the time a Sync ' +
          'leaves into that Sync; timesvc sends two-step Sync + Follow_Up (docs/ptp-timestamps.md)',
      }),
    ),
  }),
  z.transform((p, ctx) => {
    const r = resolveProfile(p.profile, p);
    if (!r.ok) {
      ctx.issues.push({ code: 'custom', path: [r.key], message: r.message, input: p });
      return z.NEVER;
    }
    return { ...p, ...r.values };
  }),
);

const gpsdoSchema = z.strictObject({
  enabled: z._default(bool(), false),
  type: z._default(z.enum(['dummy', 'serialpps', 'network']), 'dummy'),
  serial_device: z._default(z.string(), ''),
  serial_baud: z._default(num(z.int().check(z.positive())), 9600),
  pps_device: z._default(z.string(), ''),
  network_address: z._default(z.string(), ''),
  poll_interval: z._default(duration, 1),
  /**
   * The median filter's poll (docs/gpsdo.md "Samples: a median filter per poll"): the receiver's samples of
   * one poll reach the clock manager as one, as chrony's `refclock … poll 4` (16 s, its default). A power of
   * two, 1 s (every sample on its own) to 1024 s.
   */
  filter_poll: z._default(
    duration.check(
      z.refine(
        (v) => v >= 1 && v <= 1024 && Number.isInteger(Math.log2(v)),
        'a power of two from 1s to 1024s',
      ),
    ),
    16,
  ),
  nmea_sentences: z._default(z.array(z.string().check(z.regex(/^[A-Z]{5}$/))), ['GPRMC', 'GPGGA']),
  /**
   * Fixed latency of serial-time samples (gpsd TOFF) to remove, like chrony's refclock `offset` option:
   * the time a receiver's sentence takes to arrive after its second (docs/gpsdo.md "gpsd").
   */
  nmea_delay: z._default(duration, 0),
  /** After the GPSDO is lost, HOLDOVER lasts this long before NTP peers may take over (docs/gpsdo.md). */
  fallback_after: z._default(duration, 60),
  /** The simulated receiver (type dummy; docs/gpsdo.md "Dummy"). Deterministic: no lock loss unless asked. */
  dummy: z.prefault(
    z.strictObject({
      locked: z._default(bool(), true),
      satellites: z._default(int(0, 32), 9),
      /** Seconds after start when the simulated antenna is lost (0 = never). */
      lose_lock_after: z._default(duration, 0),
      /** Seconds after the loss when it returns (0 = never). */
      regain_lock_after: z._default(duration, 0),
      /** Reference − host clock, ns (a simulated offset). */
      offset_ns: z._default(int(-1e9, 1e9), 0),
    }),
    {},
  ),
});

const userSchema = z.strictObject({
  username: z.string().check(z.minLength(1)),
  /** `npx timesvc hash-password` (scrypt, README "Web API: passwords"); the format is checked below. */
  password_hash: z.string().check(z.minLength(1)),
  role: z.enum(['admin', 'operator', 'viewer']),
});

const webSchema = z.strictObject({
  /** 0 = any free port (tests). */
  port: z._default(int(0, 65535), 8080),
  bind_address: z._default(z.string(), '0.0.0.0'),
  tls_enabled: z._default(bool(), false),
  tls_cert: z._default(z.string(), ''),
  tls_key: z._default(z.string(), ''),
  jwt_secret: z._default(z.string(), ''),
  jwt_expiry: z._default(duration, 24 * 3600),
  session_timeout: z._default(duration, 30 * 60),
  allowed_origins: z._default(z.array(z.string()), []),
  read_only_mode: z._default(bool(), false),
  rate_limit_rps: z._default(num(z.number().check(z.positive())), 100),
  static_dir: z._default(z.string(), './static'),
  users: z._default(z.array(userSchema), []),
});

const loggingSchema = z.strictObject({
  level: z._default(
    z.enum(['trace', 'debug', 'info', 'warn', 'warning', 'error', 'fatal', 'silent']),
    'info',
  ),
  format: z._default(z.enum(['json', 'pretty']), 'json'),
  output: z._default(z.literal('stdout'), 'stdout'),
});

/** Known placeholder secrets that must not guard real users (checked at start-up). */
export const PLACEHOLDER_SECRETS = new Set([
  'changeme',
  'changeme-in-production',
  'secret',
  'change-me',
  'your-secret-key',
]);

export const configSchema = z
  .strictObject({
    /** `production` refuses to start with the documented lab credential or JWT secret (README "Web API"). */
    environment: z._default(z.enum(['lab', 'production']), 'lab'),
    ntp: z.prefault(ntpSchema, {}),
    nts: z.prefault(ntsSchema, {}),
    ptp: z.prefault(ptpSchema, {}),
    gpsdo: z.prefault(gpsdoSchema, {}),
    web: z.prefault(webSchema, {}),
    logging: z.prefault(loggingSchema, {}),
  })
  .check(
    z.superRefine((c, ctx) => {
      const issue = (path: (string | number)[], message: string): void => {
        ctx.addIssue({ code: 'custom', path, message });
      };
      c.ntp.upstream_peers.forEach((p, i) => {
        if (p.minpoll !== undefined && p.maxpoll !== undefined && p.minpoll > p.maxpoll) {
          issue(['ntp', 'upstream_peers', i, 'minpoll'], 'minpoll must not exceed maxpoll');
        }
      });
      if (c.nts.enabled && (!c.nts.cert_path || !c.nts.key_path)) {
        issue(['nts'], 'NTS needs cert_path and key_path when enabled');
      }
      if (c.ptp.enabled && !c.ptp.interface)
        issue(['ptp', 'interface'], 'PTP needs an interface when enabled');
      if (
        c.gpsdo.enabled &&
        c.gpsdo.type === 'serialpps' &&
        (!c.gpsdo.serial_device || !c.gpsdo.pps_device)
      ) {
        issue(['gpsdo'], 'type serialpps needs serial_device and pps_device');
      }
      if (c.gpsdo.enabled && c.gpsdo.type === 'network' && !c.gpsdo.network_address) {
        issue(['gpsdo', 'network_address'], 'type network needs network_address');
      }
      if (c.web.tls_enabled && (!c.web.tls_cert || !c.web.tls_key)) {
        issue(['web'], 'TLS needs tls_cert and tls_key');
      }
      if (c.web.users.length > 0 && (!c.web.jwt_secret || PLACEHOLDER_SECRETS.has(c.web.jwt_secret))) {
        issue(
          ['web', 'jwt_secret'],
          'a real JWT secret is required when users exist (not empty, not a placeholder)',
        );
      } else if (c.web.users.length > 0 && Buffer.byteLength(c.web.jwt_secret) < 32) {
        // HS256 keys shorter than the hash output weaken the MAC (RFC 7518 §3.2).
        issue(['web', 'jwt_secret'], 'must be at least 32 bytes (HS256, RFC 7518 §3.2)');
      }
      c.web.users.forEach((u, i) => {
        if (!isPasswordHash(u.password_hash)) {
          issue(
            ['web', 'users', i, 'password_hash'],
            'must be a scrypt hash from `npx timesvc hash-password`',
          );
        }
      });
      const names = c.web.users.map((u) => u.username);
      names.forEach((n, i) => {
        if (names.indexOf(n) !== i) issue(['web', 'users', i, 'username'], `duplicate username "${n}"`);
      });
    }),
  );

export type TimesvcConfig = z.output<typeof configSchema>;

/** Environment overrides: environment > file > default. Values are taken as strings. */
export const ENV_OVERRIDES = {
  TIMESVC_JWT_SECRET: { path: 'web.jwt_secret', parse: (raw: string) => raw },
  TIMESVC_NTS_COOKIE_KEY: { path: 'nts.cookie_key', parse: (raw: string) => raw },
  TIMESVC_ENVIRONMENT: { path: 'environment', parse: (raw: string) => raw },
};

export function loadTimesvcConfig(
  file: string | undefined,
  environment: NodeJS.ProcessEnv = process.env,
): TimesvcConfig {
  return loadConfig({ schema: configSchema, file, env: ENV_OVERRIDES, environment, substitute: true });
}

/** Parse `host:port`, `[v6]:port`, a bare host (port = defaultPort) or a bare IPv6 address. */
export function parseHostPort(text: string, defaultPort: number): { host: string; port: number } | undefined {
  const t = text.trim();
  let host: string;
  let portText: string | undefined;
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(t);
  if (bracket) {
    host = bracket[1] ?? '';
    portText = bracket[2];
  } else if (isIP(t) === 6) {
    host = t;
  } else {
    const i = t.lastIndexOf(':');
    if (i >= 0) {
      host = t.slice(0, i);
      portText = t.slice(i + 1);
    } else host = t;
  }
  if (!host || /\s/.test(host)) return undefined;
  const port = portText === undefined ? defaultPort : Number(portText);
  if (
    !Number.isInteger(port) ||
    port < 1 ||
    port > 65535 ||
    (portText !== undefined && !/^\d+$/.test(portText))
  ) {
    return undefined;
  }
  return { host, port };
}

function tryNetwork(s: string): boolean {
  try {
    parseNetwork(s);
    return true;
  } catch {
    return false;
  }
}

/**
 * Where the NTP sockets bind: "" = every IPv4 and IPv6 address (two sockets); an address = that one; an
 * interface name = its first IPv4 and IPv6 addresses (link-local IPv6 addresses get their zone).
 */
export function ntpBindAddresses(iface: string): { udp4?: string; udp6?: string } {
  if (iface === '') return { udp4: '0.0.0.0', udp6: '::' };
  const family = isIP(iface);
  if (family === 4) return { udp4: iface };
  if (family === 6) return { udp6: iface };
  const list = networkInterfaces()[iface];
  if (!list || list.length === 0)
    throw new ConfigError(`ntp.interface: no network interface named "${iface}"`);
  const v4 = list.find((a) => a.family === 'IPv4');
  const v6 = list.find((a) => a.family === 'IPv6');
  const out: { udp4?: string; udp6?: string } = {};
  if (v4) out.udp4 = v4.address;
  if (v6) out.udp6 = v6.address.startsWith('fe80') ? `${v6.address}%${iface}` : v6.address;
  return out;
}

/** The effective minpoll/maxpoll of a peer: its own, else from ntp.poll_interval, maxpoll default 10. */
export function peerPolls(
  peer: { minpoll?: number | undefined; maxpoll?: number | undefined },
  pollIntervalS: number,
): { minpoll: number; maxpoll: number } {
  const fromInterval = Math.max(-4, Math.min(17, Math.round(Math.log2(Math.max(pollIntervalS, 1 / 16)))));
  const minpoll = peer.minpoll ?? Math.min(fromInterval, peer.maxpoll ?? 17);
  const maxpoll = peer.maxpoll ?? Math.max(minpoll, 10);
  return { minpoll, maxpoll };
}
