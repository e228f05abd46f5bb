import type { ClockManager } from '../../domain/clock-manager.ts';
import { rootDispersionAt } from '../../domain/ntp-responder.ts';
import type { ClockSnapshot } from '../../domain/reference-source.ts';
import type { SourceStatsTracker } from '../../domain/source-stats.ts';
import { ntpToUnixMs, refIdToAscii, refIdToIpv4 } from '../../protocol/ntp-packet.ts';
import type { TimesvcConfig } from '../../config.ts';
import type { NtpServer } from '../ntp-server.ts';
import type { NtsServerSide } from '../nts-service.ts';
import type { PeerClient } from '../peer-client.ts';
import type { GpsdoProvider, PtpProvider } from './providers.ts';

/** What the status routes, the status stream and the CLI read (README "Web API: status bodies"). */
export interface StatusSources {
  config: () => TimesvcConfig;
  manager: ClockManager;
  servedNowMs: () => number;
  monotonicMs: () => number;
  server: () => NtpServer | undefined;
  peers: () => readonly PeerClient[];
  nts: () => NtsServerSide | undefined;
  stats: SourceStatsTracker;
  /** Wall ms at start, on `nowMs`'s clock. */
  startedMs: number;
  /** Wall time now (the service's clock; default Date.now). */
  nowMs?: (() => number) | undefined;
  version: string;
  gpsdo?: GpsdoProvider | undefined;
  ptp?: PtpProvider | undefined;
  /** A documented lab credential or JWT secret is in use (dashboard banner). */
  defaultCredential: () => boolean;
}

const iso = (ms: number | undefined): string | null =>
  ms === undefined || !Number.isFinite(ms) ? null : new Date(ms).toISOString();
const finite = (v: number | undefined): number | null => (v === undefined || !Number.isFinite(v) ? null : v);

/** Refid as text: ASCII codes (`GPS`, `LOCL`, kiss codes) as letters, otherwise the dotted quad. */
export function refIdText(refId: number, stratum: number): string {
  // RFC 5905 §7.3: at stratum 0 (kiss) and 1 the refid is ASCII; above, an IPv4 address or an IPv6 hash.
  // A local-stratum server advertises an ASCII code (LOCL) at any stratum: letters first, then A-Z/0-9.
  const ascii = refIdToAscii(refId);
  if (stratum <= 1 || /^[A-Z][A-Z0-9]{1,3}$/.test(ascii)) return ascii || refIdToIpv4(refId);
  return refIdToIpv4(refId);
}

/** The clock fields the dashboard chart draws (status-history.ts historyPoint), from a snapshot. */
export function chartClock(snap: ClockSnapshot): {
  state: string;
  offset_ns: number;
  jitter_ns: number;
  estimated_error_ns: number | null;
} {
  return {
    state: snap.state.toLowerCase(),
    offset_ns: Math.round(snap.offsetS * 1e9),
    estimated_error_ns: Number.isFinite(snap.estimatedErrorS) ? Math.round(snap.estimatedErrorS * 1e9) : null,
    jitter_ns: Math.round(snap.jitterS * 1e9),
  };
}

export function clockStatus(s: StatusSources, snap: ClockSnapshot = s.manager.snapshot()) {
  const st = s.manager.serverState;
  const now = s.monotonicMs();
  const leap = ['none', 'insert', 'delete', 'unsynchronised'][st.leap] ?? 'unsynchronised';
  const chart = chartClock(snap);
  return {
    state: chart.state,
    current_time: new Date(s.servedNowMs()).toISOString(),
    offset_ns: chart.offset_ns,
    offset_stddev_ns: Math.round(snap.offsetStddevS * 1e9),
    drift_ppb: snap.driftPpb,
    drift_error_ppb: snap.driftErrorPpb,
    remaining_slew_ns: Math.round(snap.remainingSlewS * 1e9),
    estimated_error_ns: chart.estimated_error_ns,
    jitter_ns: chart.jitter_ns,
    primary_reference: snap.sources.find((x) => x.kind === 'gpsdo')?.id ?? null,
    active_reference: snap.selected ?? null,
    last_reference: snap.lastReference ?? null,
    stratum: snap.stratum,
    leap,
    last_sync: iso(snap.lastUpdateWallMs),
    last_update_age_s: snap.lastUpdateMs === undefined ? null : (now - snap.lastUpdateMs) / 1000,
    holdover_started:
      snap.holdoverStartedMs === undefined ? null : iso(Date.now() - (now - snap.holdoverStartedMs)),
    holdover_remaining_s: snap.holdoverRemainingMs === undefined ? null : snap.holdoverRemainingMs / 1000,
    steps: snap.steps,
    spikes: snap.spikes,
  };
}

export function ntpStatus(s: StatusSources) {
  const cfg = s.config().ntp;
  const snap = s.manager.snapshot();
  const st = s.manager.serverState;
  const c = s.server()?.counters;
  const synced = st.leap !== 3;
  return {
    running: s.server() !== undefined,
    addresses: s.server()?.addresses ?? [],
    stratum: synced ? st.stratum : 16,
    ref_id: synced ? refIdText(st.referenceId, st.stratum) : 'INIT',
    ref_id_hex: st.referenceId.toString(16).toUpperCase().padStart(8, '0'),
    root_delay_ms: st.rootDelayS * 1000,
    root_dispersion_ms: rootDispersionAt(st, s.monotonicMs()) * 1000,
    precision: st.precision,
    peer_count: s.peers().length,
    last_sync: iso(snap.lastUpdateWallMs),
    offset_us: snap.offsetS * 1e6,
    jitter_us: snap.jitterS * 1e6,
    request_count: c?.requests ?? 0,
    response_count: c?.responses ?? 0,
    kod_rate_count: c?.kodRate ?? 0,
    kod_deny_count: c?.kodDeny ?? 0,
    // chronyc serverstats (docs/cli.md): drops by reason (rate_limited is chrony's "NTP packets dropped"),
    // NTS-authenticated requests, send errors.
    dropped: { ...(c?.dropped ?? {}) },
    send_error_count: c?.sendErrors ?? 0,
    authenticated_count: s.nts()?.responder.counters.authenticated ?? 0,
    rx_timestamps: s.server()?.rxTimestamps ?? 'off',
    configured_port: cfg.port,
  };
}

/**
 * chronyc `clients` (docs/cli.md "clients"): the server's client log, most recently seen first, at most
 * `limit`; `rate_limit_enabled` says whether Drop and KoD can count at all.
 */
export function clientsStatus(s: StatusSources, limit: number) {
  const server = s.server();
  return {
    responder: server?.responder ?? null,
    rate_limit_enabled: s.config().ntp.rate_limit.enabled,
    max_clients: s.config().ntp.rate_limit.max_clients,
    clients: server?.clients(limit) ?? [],
  };
}

export function ntsStatus(s: StatusSources) {
  const side = s.nts();
  if (!side) return undefined;
  const ke = side.ke.counters;
  return {
    running: true,
    ke_port: s.config().nts.ke_port,
    active_sessions: side.responder.activeSessions(),
    total_ke_requests: ke.requests,
    total_ke_success: ke.success,
    total_ke_failures: Object.values(ke.failures).reduce((a: number, b: number) => a + b, 0),
    authenticated_requests: side.responder.counters.authenticated,
    cert_expiry: side.ke.certExpiry?.toISOString() ?? null,
  };
}

export function peersStatus(s: StatusSources) {
  const snap = s.manager.snapshot();
  const now = s.monotonicMs();
  return s.peers().map((p) => {
    const ps = p.peerStatus();
    const src = snap.sources.find((x) => x.id === p.id);
    const stats = s.stats.stats(p.id);
    return {
      id: p.id,
      address: ps.address,
      resolved: ps.resolved ?? null,
      prefer: ps.prefer,
      stratum: ps.stratum,
      ref_id: ps.stratum > 0 ? refIdText(ps.referenceId, ps.stratum) : null,
      reachable: ps.reachable,
      reach: ps.reach,
      reach_octal: ps.reach.toString(8),
      poll: ps.poll,
      offset_us: finite(src?.offsetS) === null ? null : (src?.offsetS ?? 0) * 1e6,
      delay_us: ps.delayS === undefined ? null : ps.delayS * 1e6,
      jitter_us: ps.jitterS === undefined ? null : ps.jitterS * 1e6,
      root_distance_us: finite(src?.rootDistanceS) === null ? null : (src?.rootDistanceS ?? 0) * 1e6,
      last_sample_age_s: ps.lastSampleMs === undefined ? null : (now - ps.lastSampleMs) / 1000,
      // chronyc's LastRx: the age of the last good reply, not of the filter's chosen sample.
      last_rx_age_s: ps.lastRxMs === undefined ? null : (now - ps.lastRxMs) / 1000,
      next_poll_s: Math.max(0, (ps.nextPollMs - now) / 1000),
      poll_count: ps.pollCount,
      error_count: ps.errorCount,
      selected: src?.selected ?? false,
      verdict: src?.verdict ?? 'none',
      verdict_reason: verdictReason(src?.verdict, ps),
      denied: ps.denied ?? null,
      last_kod: ps.lastKod ?? null,
      nts_enabled: p.ntsStatus !== undefined,
      ntpdata: ntpData(p, ps, now),
      sourcestats: {
        samples: stats.samples,
        runs: stats.runs,
        span_s: stats.spanS,
        frequency_ppm: stats.frequencyPpm,
        skew_ppm: stats.skewPpm,
        offset_us: stats.offsetS === null ? null : stats.offsetS * 1e6,
        stddev_us: stats.stddevS === null ? null : stats.stddevS * 1e6,
      },
    };
  });
}

/** `chronyc ntpdata` for one source (doc/chronyc.adoc "ntpdata"; docs/cli.md), offsets in timesvc's sign. */
function ntpData(p: PeerClient, ps: ReturnType<PeerClient['peerStatus']>, nowMs: number) {
  const d = p.peer.ntpData();
  const link = p.link;
  const sec = (v: number | undefined): number | null => (v === undefined ? null : v);
  return {
    remote_address: ps.resolved ?? null,
    remote_port: link.remotePort,
    local_address: link.localAddress ?? null,
    leap: ps.leap,
    version: d.version ?? null,
    mode: d.mode ?? null,
    stratum: ps.stratum,
    poll: ps.poll,
    precision: d.precision ?? null,
    root_delay_s: ps.rootDelayS,
    root_dispersion_s: ps.rootDispersionS,
    ref_id_hex: ps.referenceId.toString(16).toUpperCase().padStart(8, '0'),
    reference_time: d.referenceTimestamp ? iso(ntpToUnixMs(d.referenceTimestamp, Date.now())) : null,
    offset_s: sec(d.lastOffsetS),
    peer_delay_s: sec(d.lastDelayS),
    peer_dispersion_s: sec(d.lastDispersionS),
    response_time_s: sec(d.responseTimeS),
    authenticated: p.ntsStatus !== undefined,
    tx_timestamping: link.txTimestamps ?? null,
    rx_timestamping: link.rxTimestamps ?? null,
    total_tx: d.totalTx,
    total_rx: d.totalRx,
    total_valid_rx: d.totalValidRx,
    total_good_rx: d.totalGoodRx,
    last_rx_age_s: ps.lastRxMs === undefined ? null : (nowMs - ps.lastRxMs) / 1000,
  };
}

/** Why a source has its verdict, in words an operator reads (selection per RFC 5905 §11.2). */
function verdictReason(
  verdict: string | undefined,
  ps: { reachable: boolean; denied: string | undefined; leap: number; samples: number },
): string {
  if (ps.denied) return `demobilised by kiss code ${ps.denied}`;
  if (!ps.reachable) return 'unreachable: no reply in the last 8 polls';
  if (ps.leap === 3) return 'the source is unsynchronised (LI 3 or stratum 16)';
  switch (verdict) {
    case 'selected':
      return 'system peer: best of the truechimers';
    case 'candidate':
      // timesvc follows one system peer; the other truechimers are its fallbacks (README "Clock discipline").
      return 'truechimer, standby: agrees with the system peer, used if it fails';
    case 'falseticker':
      return 'falseticker: outside the intersection of the correctness intervals';
    case 'held':
      return 'held back: its level moved beyond the step threshold; followed after the stepout or a confirmation';
    case 'unfit':
      return 'unfit: root distance beyond MAXDIST or failed header tests';
    case 'too_few_samples':
      return `waiting for samples (${ps.samples} so far)`;
    case 'unusable':
      return 'not usable: no valid sample yet';
    default:
      return 'not yet evaluated';
  }
}

export function gpsdoStatus(s: StatusSources) {
  return s.gpsdo?.status();
}

export function ptpStatus(s: StatusSources) {
  return s.ptp?.status();
}

/** `GET /api/status` and the status stream's message body. */
export function fullStatus(s: StatusSources) {
  const cfg = s.config();
  const ntp = ntpStatus(s);
  return {
    time: new Date(s.servedNowMs()).toISOString(),
    version: s.version,
    uptime_seconds: ((s.nowMs ?? Date.now)() - s.startedMs) / 1000,
    environment: cfg.environment,
    default_credential: s.defaultCredential(),
    clock: clockStatus(s),
    ntp,
    nts: ntsStatus(s) ?? { running: false, message: 'NTS server not enabled' },
    ptp: ptpStatus(s) ?? { running: false, message: 'PTP not enabled' },
    gpsdo: gpsdoStatus(s) ?? { connected: false, message: 'GPSDO not enabled' },
    peers: peersStatus(s),
  };
}
