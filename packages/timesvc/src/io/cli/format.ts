import type { TimesvcConfig } from '../../config.ts';
import type { ClientLogRecord } from '../../domain/client-log.ts';
import type { QueryResult } from '../query.ts';
import { refIdText } from '../web/status.ts';

/**
 * What the operator commands of `npx timesvc` (README "Command line"; commands.ts) read and print: `sources`,
 * `sourcestats` and `tracking` read a running server's web API and print tables laid out like their chronyc
 * namesakes; `query` prints a human summary; `check-config` warns about sections that are enabled but not
 * acted on.
 */

export interface ApiTarget {
  url: string;
  token?: string | undefined;
  user?: string | undefined;
  password?: string | undefined;
}

/** The web API address and credentials from flags, else TIMESVC_URL / TIMESVC_TOKEN / TIMESVC_USER / TIMESVC_PASSWORD. */
export function apiTarget(values: Record<string, unknown>, env: NodeJS.ProcessEnv): ApiTarget {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? values[k] : undefined);
  return {
    url: (str('url') ?? env['TIMESVC_URL'] ?? 'http://127.0.0.1:8080').replace(/\/+$/, ''),
    token: str('token') ?? env['TIMESVC_TOKEN'],
    user: str('user') ?? env['TIMESVC_USER'],
    password: env['TIMESVC_PASSWORD'],
  };
}

export async function apiGet<T>(target: ApiTarget, path: string): Promise<T> {
  let token = target.token;
  if (!token && target.user) {
    if (!target.password) throw new Error('set TIMESVC_PASSWORD (or give --token / TIMESVC_TOKEN)');
    const res = await fetch(`${target.url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: target.user, password: target.password }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = (await res.json().catch(() => ({}))) as { token?: string; message?: string };
    if (!res.ok || !body.token) throw new Error(`login failed: ${res.status} ${body.message ?? ''}`.trim());
    token = body.token;
  }
  const res = await fetch(`${target.url}${path}`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(30_000),
  });
  const body: unknown = await res.json().catch(() => ({}));
  if (!res.ok) {
    const msg = (body as { message?: string }).message ?? '';
    throw new Error(
      `${path}: ${res.status} ${msg}${res.status === 401 ? ' (give --user with TIMESVC_PASSWORD, or --token)' : ''}`,
    );
  }
  return body as T;
}

/** chronyc's compact units: 12ns, 345us, 12ms, 3s, with a sign when asked. */
export function fmtTime(seconds: number | null | undefined, signed = true): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '-';
  const a = Math.abs(seconds);
  const sign = signed ? (seconds < 0 ? '-' : '+') : seconds < 0 ? '-' : '';
  const [v, u] = a < 1e-6 ? [a * 1e9, 'ns'] : a < 1e-3 ? [a * 1e6, 'us'] : a < 1 ? [a * 1e3, 'ms'] : [a, 's'];
  return `${sign}${Math.round(v)}${u}`;
}

/** chronyc's interval (client.c print_seconds): seconds below 1200, then minutes, hours, days, years. */
export function fmtAge(s: number | null): string {
  if (s === null || !Number.isFinite(s) || s < 0) return '-';
  const v = Math.round(s);
  if (v < 1200) return String(v);
  if (v < 36000) return `${Math.floor(v / 60)}m`;
  if (v < 345600) return `${Math.floor(v / 3600)}h`;
  const d = Math.floor(v / 86400);
  return d > 999 ? `${Math.floor(d / 365)}y` : `${d}d`;
}

/** chronyc's frequency column (client.c print_signed_freq_ppm): 3 decimals below 99999.5 ppm. */
function fmtPpm(ppm: number | null, signed: boolean): string {
  if (ppm === null || !Number.isFinite(ppm)) return '-';
  const text = ppm.toFixed(Math.abs(ppm) < 99999.5 ? 3 : 0);
  return signed && ppm >= 0 ? `+${text}` : text;
}

/**
 * timesvc's API gives offsets as source − served clock (RFC 5905's θ); chronyc prints local − source
 * ("positive: the local clock is ahead", chrony sourcestats.c stores −offset). The CLI prints chronyc's.
 */
export const chronySign = (v: number | null): number | null => (v === null ? null : -v);

export interface PeerRow {
  address: string;
  stratum: number;
  poll: number;
  reach: number;
  reachable: boolean;
  selected: boolean;
  verdict: string;
  offset_us: number | null;
  jitter_us: number | null;
  root_distance_us: number | null;
  last_sample_age_s: number | null;
  /** Age of the last good reply (chronyc's LastRx); absent from servers before it was added. */
  last_rx_age_s?: number | null;
  nts_enabled: boolean;
  sourcestats: {
    samples: number;
    /** Runs of residuals of one sign (chronyc's NR); absent from servers before it was added. */
    runs?: number;
    span_s: number;
    frequency_ppm: number | null;
    skew_ppm: number | null;
    offset_us: number | null;
    stddev_us: number | null;
  };
}

/**
 * chronyc's source state: * selected, + combined, - not combined, x falseticker, ? unusable. timesvc
 * combines nothing, so a truechimer that is not the system peer is `-`, as chronyc marks one it leaves out.
 */
export function stateMark(p: PeerRow): string {
  if (p.selected) return '*';
  if (!p.reachable || p.verdict === 'unusable') return '?';
  if (p.verdict === 'candidate') return '-';
  if (p.verdict === 'falseticker' || p.verdict === 'held') return 'x';
  if (p.verdict === 'too_few_samples') return '?';
  return '-';
}

export function formatSources(peers: readonly PeerRow[]): string {
  const lines = [
    'MS Name/IP address         Stratum Poll Reach LastRx Last sample',
    '===============================================================================',
  ];
  for (const p of peers) {
    const off = chronySign(p.offset_us === null ? null : p.offset_us / 1e6);
    const err = p.root_distance_us === null ? null : p.root_distance_us / 1e6;
    const name = (p.nts_enabled ? `${p.address} (NTS)` : p.address).slice(0, 27).padEnd(27);
    lines.push(
      `^${stateMark(p)} ${name}${String(p.stratum).padStart(2)}  ${String(p.poll).padStart(3)}   ${p.reach
        .toString(8)
        .padStart(
          3,
        )}  ${fmtAge(p.last_rx_age_s ?? p.last_sample_age_s).padStart(4)}  ${fmtTime(off).padStart(7)} +/- ${fmtTime(err, false).padStart(6)}`,
    );
  }
  if (peers.length === 0) lines.push('(no upstream peers configured)');
  return lines.join('\n') + '\n';
}

/**
 * chronyc sourcestats (client.c process_cmd_sourcestats: "%-25s %3U %3U  %I %+P %P  %+S  %S"): NP, NR,
 * Span, residual Frequency against the served clock, Freq Skew, Offset and Std Dev, in chronyc's signs.
 */
export function formatSourcestats(peers: readonly PeerRow[]): string {
  const lines = [
    'Name/IP Address            NP  NR  Span  Frequency  Freq Skew  Offset  Std Dev',
    '==============================================================================',
  ];
  const us = (v: number | null): number | null => (v === null ? null : v / 1e6);
  for (const p of peers) {
    const s = p.sourcestats;
    const cells = [
      p.address.slice(0, 25).padEnd(25),
      String(s.samples).padStart(3),
      (s.runs === undefined ? '-' : String(s.runs)).padStart(3),
      ` ${fmtAge(s.samples > 0 ? s.span_s : null).padStart(4)}`,
      fmtPpm(chronySign(s.frequency_ppm), true).padStart(10),
      fmtPpm(s.skew_ppm, false).padStart(10),
      ` ${fmtTime(chronySign(us(s.offset_us))).padStart(7)}`,
      ` ${fmtTime(us(s.stddev_us), false).padStart(6)}`,
    ];
    lines.push(cells.join(' '));
  }
  return lines.join('\n') + '\n';
}

export interface TrackingStatus {
  clock: {
    state: string;
    offset_ns: number;
    offset_stddev_ns: number;
    drift_ppb: number;
    drift_error_ppb: number;
    remaining_slew_ns: number;
    estimated_error_ns: number | null;
    active_reference: string | null;
    last_sync: string | null;
    last_update_age_s: number | null;
    leap: string;
  };
  ntp: {
    stratum: number;
    ref_id: string;
    ref_id_hex: string;
    root_delay_ms: number;
    root_dispersion_ms: number;
  };
  /** The sources, for the selected one's residual frequency (absent: "-"). */
  peers?: readonly PeerRow[];
}

/**
 * chronyc tracking's rows from `GET /api/status`, in chronyc's signs (docs/cli.md): `Last offset` positive
 * when the served clock was ahead of the reference; `Frequency` the host clock's rate error that the
 * served clock corrects ("slow": the host clock runs slow and the served clock is sped up by that much;
 * the API's `drift_ppb` is served − host rate, chronyd's freq_ppm is its negation); `Residual freq` the
 * selected source's sourcestats Frequency.
 */
export function formatTracking(s: TrackingStatus): string {
  const c = s.clock;
  const selected = s.peers?.find((p) => p.selected);
  const sec = (ns: number | null, digits = 9): string =>
    ns === null ? '-' : `${(ns / 1e9).toFixed(digits)} seconds`;
  const signed = (ns: number): string => `${ns >= 0 ? '+' : '-'}${Math.abs(ns / 1e9).toFixed(9)} seconds`;
  const leap =
    c.leap === 'none'
      ? 'Normal'
      : c.leap === 'insert'
        ? 'Insert second'
        : c.leap === 'delete'
          ? 'Delete second'
          : 'Not synchronised';
  const rows: [string, string][] = [
    ['Reference ID', `${s.ntp.ref_id_hex} (${s.ntp.ref_id})`],
    ['Stratum', String(s.ntp.stratum)],
    ['Ref time (UTC)', chronyDate(c.last_sync)],
    ['Clock state', c.state.toUpperCase()],
    ['Reference', c.active_reference ?? '-'],
    ['Last offset', signed(-c.offset_ns)],
    ['Offset std dev', sec(c.offset_stddev_ns)],
    ['Slew remaining', signed(c.remaining_slew_ns)],
    ['Frequency', `${Math.abs(c.drift_ppb / 1000).toFixed(3)} ppm ${c.drift_ppb > 0 ? 'slow' : 'fast'}`],
    [
      'Residual freq',
      selected?.sourcestats.frequency_ppm != null
        ? `${fmtPpm(chronySign(selected.sourcestats.frequency_ppm), true)} ppm`
        : '-',
    ],
    ['Skew', `${(c.drift_error_ppb / 1000).toFixed(3)} ppm`],
    ['Root delay', `${(s.ntp.root_delay_ms / 1000).toFixed(9)} seconds`],
    ['Root dispersion', `${(s.ntp.root_dispersion_ms / 1000).toFixed(9)} seconds`],
    ['Estimated error', sec(c.estimated_error_ns)],
    ['Update age', c.last_update_age_s === null ? '-' : `${c.last_update_age_s.toFixed(1)} seconds`],
    ['Leap status', leap],
  ];
  return rows.map(([k, v]) => `${k.padEnd(16)}: ${v}`).join('\n') + '\n';
}

/** chronyc's time of day (client.c %T: strftime "%a %b %d %H:%M:%S %Y", UTC). */
export function chronyDate(iso: string | null): string {
  if (!iso) return '-';
  const d = new Date(iso);
  const [wd, , , , time] = d.toUTCString().split(' ');
  const month = d.toLocaleString('en-US', { month: 'short', timeZone: 'UTC' });
  const day = String(d.getUTCDate()).padStart(2, '0');
  return `${(wd ?? '').replace(',', '')} ${month} ${day} ${time ?? ''} ${d.getUTCFullYear()}`;
}

const LEAP_TEXT = ['Normal', 'Insert second', 'Delete second', 'Not synchronised'];
const MODE_TEXT: Record<number, string> = { 1: 'Active peer', 2: 'Passive peer', 4: 'Server' };

/** `ntpdata` of `GET /api/peers` (each source's `ntpdata`; docs/cli.md "ntpdata"). */
export interface NtpDataRow {
  address: string;
  ntpdata: {
    remote_address: string | null;
    remote_port: number;
    local_address: string | null;
    leap: number;
    version: number | null;
    mode: number | null;
    stratum: number;
    poll: number;
    precision: number | null;
    root_delay_s: number;
    root_dispersion_s: number;
    ref_id_hex: string;
    reference_time: string | null;
    offset_s: number | null;
    peer_delay_s: number | null;
    peer_dispersion_s: number | null;
    response_time_s: number | null;
    authenticated: boolean;
    tx_timestamping: string | null;
    rx_timestamping: string | null;
    total_tx: number;
    total_rx: number;
    total_valid_rx: number;
    total_good_rx: number;
  };
}

/**
 * chronyc ntpdata's rows (client.c process_cmd_ntpdata) per source, or for the one named. Offset is RFC
 * 5905's θ (source − served clock), which is also chronyd's sign here. Rows chronyd has and timesvc does
 * not measure (jitter asymmetry, the NTP test bits, interleaved mode, hardware timestamps) say so.
 */
export function formatNtpdata(rows: readonly NtpDataRow[], only?: string): string {
  const chosen = only ? rows.filter((r) => r.address === only || r.ntpdata.remote_address === only) : rows;
  if (only && chosen.length === 0) throw new Error(`no source ${only}`);
  const f9 = (v: number | null, signed = false): string =>
    v === null ? '-' : `${signed && v >= 0 ? '+' : ''}${v.toFixed(9)} seconds`;
  const ts = (v: string | null): string => (v === 'kernel' ? 'Kernel' : v === 'daemon' ? 'Daemon' : '-');
  const blocks = chosen.map((r) => {
    const d = r.ntpdata;
    const rows: [string, string][] = [
      ['Remote address', `${d.remote_address ?? r.address} (${r.address})`],
      ['Remote port', String(d.remote_port)],
      ['Local address', d.local_address ?? '-'],
      ['Leap status', LEAP_TEXT[d.leap] ?? String(d.leap)],
      ['Version', d.version === null ? '-' : String(d.version)],
      ['Mode', d.mode === null ? '-' : (MODE_TEXT[d.mode] ?? String(d.mode))],
      ['Stratum', String(d.stratum)],
      ['Poll interval', `${d.poll} (${(2 ** d.poll).toFixed(0)} seconds)`],
      ['Precision', d.precision === null ? '-' : `${d.precision} (${(2 ** d.precision).toFixed(9)} seconds)`],
      ['Root delay', `${d.root_delay_s.toFixed(6)} seconds`],
      ['Root dispersion', `${d.root_dispersion_s.toFixed(6)} seconds`],
      ['Reference ID', d.ref_id_hex],
      ['Reference time', chronyDate(d.reference_time)],
      ['Offset', f9(d.offset_s, true)],
      ['Peer delay', f9(d.peer_delay_s)],
      ['Peer dispersion', f9(d.peer_dispersion_s)],
      ['Response time', f9(d.response_time_s)],
      ['Jitter asymmetry', 'not measured'],
      ['NTP tests', 'not reported (a reply failing one is not counted as good)'],
      ['Interleaved', 'No'],
      ['Authenticated', d.authenticated ? 'Yes' : 'No'],
      ['TX timestamping', ts(d.tx_timestamping)],
      ['RX timestamping', ts(d.rx_timestamping)],
      ['Total TX', String(d.total_tx)],
      ['Total RX', String(d.total_rx)],
      ['Total valid RX', String(d.total_valid_rx)],
      ['Total good RX', String(d.total_good_rx)],
    ];
    return rows.map(([k, v]) => `${k.padEnd(16)}: ${v}`).join('\n') + '\n';
  });
  if (blocks.length === 0) return '(no upstream peers configured)\n';
  return blocks.join('\n');
}

export interface ClientsStatus {
  clients: readonly ClientLogRecord[];
}

/**
 * chronyc clients (client.c process_cmd_clients: "%-25s  %6U  %5U  %C  %C  %I  %6U  %5U  %C  %I"): per
 * client NTP packets, drops, Int, IntL and Last; timesvc has no command port, so the Cmd columns are `-`.
 */
export function formatClients(s: ClientsStatus): string {
  const header = `Hostname ${''.padEnd(20)} NTP   Drop Int IntL Last  ${'Cmd'.padStart(6)}   Drop Int  Last`;
  const lines = [header, '='.repeat(header.length)];
  const int = (v: number | null): string => (v === null ? ' -' : String(v).padStart(2));
  for (const c of s.clients) {
    lines.push(
      `${c.address.padEnd(25)}  ${String(c.ntp_packets).padStart(6)}  ${String(c.dropped).padStart(5)}  ${int(
        c.interval_log2,
      )}  ${int(c.interval_limited_log2)}  ${fmtAge(c.last_rx_ago_s).padStart(4)}  ${'-'.padStart(6)}  ${'-'.padStart(
        5,
      )}   -     -`,
    );
  }
  return lines.join('\n') + '\n';
}

export interface ServerStatsStatus {
  ntp: {
    request_count: number;
    response_count: number;
    kod_rate_count: number;
    kod_deny_count: number;
    dropped?: Record<string, number>;
    send_error_count?: number;
    authenticated_count?: number;
    rx_timestamps: string;
  };
  nts: {
    running: boolean;
    total_ke_requests?: number;
    total_ke_success?: number;
    total_ke_failures?: number;
  };
}

/**
 * chronyc serverstats' rows (client.c process_cmd_serverstats) that timesvc has, then its own counters.
 * "NTP packets dropped" is chronyd's meaning: dropped by rate limiting; the other drops follow.
 */
export function formatServerstats(s: ServerStatsStatus): string {
  const n = s.ntp;
  const dropped = n.dropped ?? {};
  const other = Object.entries(dropped)
    .filter(([k]) => k !== 'rate_limited')
    .reduce((a, [, v]) => a + v, 0);
  const rows: [string, string][] = [
    ['NTP packets received', String(n.request_count)],
    ['NTP packets dropped', String(dropped['rate_limited'] ?? 0)],
    ['NTS-KE connections accepted', s.nts.running ? String(s.nts.total_ke_requests ?? 0) : '-'],
    ['NTS-KE connections failed', s.nts.running ? String(s.nts.total_ke_failures ?? 0) : '-'],
    ['Authenticated NTP packets', String(n.authenticated_count ?? 0)],
    ['Interleaved NTP packets', '0 (not offered)'],
    ['NTP RX timestamps', n.rx_timestamps === 'kernel' ? 'kernel' : n.rx_timestamps],
    ['NTP responses sent', String(n.response_count)],
    ['KoD RATE sent', String(n.kod_rate_count)],
    ['KoD DENY sent', String(n.kod_deny_count)],
    [
      'NTP packets refused',
      `${other} (${
        Object.entries(dropped)
          .filter(([k, v]) => k !== 'rate_limited' && v > 0)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      })`,
    ],
    ['NTP send errors', String(n.send_error_count ?? 0)],
  ];
  return rows.map(([k, v]) => `${k.padEnd(27)}: ${v}`).join('\n') + '\n';
}

/** One line per query, readable: offset, delay, stratum, refid as text where it is ASCII. */
export function formatQuery(host: string, port: number, r: QueryResult): string {
  const leap = ['no warning', 'leap insert', 'leap delete', 'unsynchronised'][r.leap] ?? String(r.leap);
  if (r.kiss) return `${host}:${port}  kiss-o'-death ${r.kiss} (stratum 0)\n`;
  return (
    `${host}:${port}  offset ${fmtTime(r.offsetS)}  delay ${fmtTime(r.delayS, false)}  stratum ${r.stratum}  ` +
    `refid ${refIdText(r.packet.referenceId, r.stratum)}  root delay ${fmtTime(r.rootDelayS, false)}  root disp ${fmtTime(r.rootDispersionS, false)}  ` +
    `poll ${r.poll}  precision 2^${r.precision}  v${r.version}  ${leap}\n`
  );
}

/**
 * Sections enabled but not acted on by this build, and other settings that do nothing (check-config and
 * every start warn). The list shrinks as the services arrive.
 */
export const NOT_IMPLEMENTED: readonly { path: string; when: (c: TimesvcConfig) => boolean; why: string }[] =
  [
    {
      path: 'nts.cipher_suite',
      when: (c) => c.nts.cipher_suite !== '',
      why: 'ignored: NTS-KE offers AEAD_AES_SIV_CMAC_256 only',
    },
    {
      path: 'web.session_timeout',
      when: (c) => c.web.session_timeout !== 30 * 60,
      why: 'ignored: tokens end at web.jwt_expiry',
    },
    {
      path: 'web.rate_limit_rps',
      when: (c) => c.web.rate_limit_rps !== 100,
      why: 'ignored: only failed logins are throttled',
    },
  ];

export function configWarnings(c: TimesvcConfig): string[] {
  const out = NOT_IMPLEMENTED.filter((n) => n.when(c)).map((n) => `${n.path}: ${n.why}`);
  if (c.ntp.stratum === 1 && !c.ntp.local_stratum && !c.gpsdo.enabled) {
    out.push(
      'ntp.stratum: 1 is served only with a locked GPSDO (or local_stratum); from peers it is their stratum + 1',
    );
  }
  if (c.gpsdo.enabled && c.ntp.upstream_peers.length === 0 && !c.ntp.local_stratum) {
    // The GPSDO alone synchronises the service (docs/gpsdo.md), but nothing can confirm a jump of its labels.
    out.push(
      'ntp.upstream_peers: none: the GPSDO is the only reference; a level change of it beyond step_threshold ' +
        `is held back for ntp.discipline.stepout (${c.ntp.discipline.stepout} s) before it is followed`,
    );
  }
  if (c.web.users.length === 0) {
    out.push('web.users: none configured: every API route but health and metrics answers 401');
  }
  return out;
}
