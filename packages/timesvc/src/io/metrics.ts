import { Counter, Gauge, createMetricsRegistry, type Registry } from '@broadcast-ops/core';
import { CLOCK_STATES, type ClockManager } from '../domain/clock-manager.ts';
import { HEALTH_STATUSES, assessHealth, type HealthLimits } from '../domain/health.ts';
import type { NtpServer } from './ntp-server.ts';
import type { NtsServerSide } from './nts-service.ts';
import type { PeerClient } from './peer-client.ts';

/**
 * Metrics with the spec's names (README "Endpoints and metrics"). Values are read from the live
 * objects at scrape time (`collect`), so every metric is current and the NTP hot path only bumps plain
 * counters. PTP and GPSDO metrics will be registered with those services (none is registered unused).
 */
export function createTimesvcMetrics(sources: {
  server: () => NtpServer | undefined;
  manager: ClockManager;
  peers: () => readonly PeerClient[];
  startedMs: number;
  now?: () => number;
  /** The NTS server side, for NTSN replies and dropped NTS requests in the NTP counters. */
  nts?: () => NtsServerSide | undefined;
  /** /api/health's limits, for timesvc_clock_health (domain/health.ts). */
  healthLimits?: HealthLimits;
}): Registry {
  const registry = createMetricsRegistry();
  const now = sources.now ?? Date.now;
  const server = sources.server;
  const manager = sources.manager;

  new Counter({
    name: 'timesvc_ntp_requests_total',
    help: 'NTP datagrams received by the server',
    registers: [registry],
    collect() {
      this.reset();
      const c = server()?.counters;
      if (c) this.inc(c.requests);
    },
  });
  new Counter({
    name: 'timesvc_ntp_responses_total',
    help: 'NTP replies sent, by type (time, kod_rate, kod_deny, kod_ntsn)',
    labelNames: ['type'],
    registers: [registry],
    collect() {
      this.reset();
      const c = server()?.counters;
      this.inc({ type: 'time' }, c?.responses ?? 0);
      this.inc({ type: 'kod_rate' }, c?.kodRate ?? 0);
      this.inc({ type: 'kod_deny' }, c?.kodDeny ?? 0);
      this.inc({ type: 'kod_ntsn' }, sources.nts?.()?.responder.counters.naks ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_ntp_dropped_total',
    help: 'NTP datagrams dropped without a reply, by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      const c = server()?.counters;
      if (!c) return;
      for (const [reason, n] of Object.entries(c.dropped)) this.inc({ reason }, n);
      // NTS requests that cannot be answered (RFC 8915 §5.7: no NTSN without a unique identifier).
      const nts = sources.nts?.()?.responder.counters.droppedBy;
      if (nts) for (const [reason, n] of Object.entries(nts)) this.inc({ reason: `nts_${reason}` }, n);
    },
  });
  new Counter({
    name: 'timesvc_ntp_errors_total',
    help: 'NTP replies that could not be sent',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(server()?.counters.sendErrors ?? 0);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_offset_seconds',
    help: 'Offset of the selected reference from the served clock (reference - served), seconds',
    registers: [registry],
    collect() {
      this.set(manager.snapshot().offsetS);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_jitter_seconds',
    help: 'Jitter of the selected reference, seconds',
    registers: [registry],
    collect() {
      this.set(manager.snapshot().jitterS);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_stratum',
    help: 'Stratum of the served clock (16 = unsynchronised)',
    registers: [registry],
    collect() {
      this.set(manager.snapshot().stratum);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_peer_count',
    help: 'Configured upstream NTP peers, by reachability',
    labelNames: ['reachable'],
    registers: [registry],
    collect() {
      this.reset();
      const peers = sources.peers();
      // A peer that answers only with DENY/RSTR or RATE kisses gives no time: not reachable.
      const up = peers.filter((p) => p.peer.status().reachable).length;
      this.set({ reachable: 'true' }, up);
      this.set({ reachable: 'false' }, peers.length - up);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_poll_interval_seconds',
    help: 'Current poll interval of each upstream peer',
    labelNames: ['peer'],
    registers: [registry],
    collect() {
      this.reset();
      for (const p of sources.peers()) this.set({ peer: p.id }, 2 ** p.peer.poll);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_last_sync_timestamp',
    help: 'Unix time of the last clock update from a reference, seconds (0 = never)',
    registers: [registry],
    collect() {
      this.set((manager.snapshot().lastUpdateWallMs ?? 0) / 1000);
    },
  });
  new Gauge({
    name: 'timesvc_clock_state',
    help: 'Clock discipline state: 1 for the active state, 0 for the others',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const state = manager.state;
      for (const s of CLOCK_STATES) this.set({ state: s.toLowerCase() }, s === state ? 1 : 0);
    },
  });
  const limits = sources.healthLimits ?? { maxErrorS: 0.01, holdoverMaxErrorS: 0.01 };
  new Gauge({
    name: 'timesvc_clock_health',
    help: 'What /api/health says: 1 for the current status (healthy, degraded, unhealthy, unsynchronised)',
    labelNames: ['status'],
    registers: [registry],
    collect() {
      const snap = manager.snapshot();
      const { status } = assessHealth(snap, limits);
      for (const s of HEALTH_STATUSES) this.set({ status: s }, s === status ? 1 : 0);
    },
  });
  new Gauge({
    name: 'timesvc_clock_offset_nanoseconds',
    help: 'Offset of the selected reference from the served clock, nanoseconds',
    registers: [registry],
    collect() {
      this.set(Math.round(manager.snapshot().offsetS * 1e9));
    },
  });
  new Gauge({
    name: 'timesvc_clock_drift_ppb',
    help: 'Frequency correction of the served clock relative to the host clock, ppb',
    registers: [registry],
    collect() {
      this.set(manager.snapshot().driftPpb);
    },
  });
  new Gauge({
    name: 'timesvc_clock_last_update_timestamp',
    help: 'Unix time of the last clock update, seconds (0 = never)',
    registers: [registry],
    collect() {
      this.set((manager.snapshot().lastUpdateWallMs ?? 0) / 1000);
    },
  });
  new Gauge({
    name: 'timesvc_uptime_seconds',
    help: 'Seconds since the service started',
    registers: [registry],
    collect() {
      this.set((now() - sources.startedMs) / 1000);
    },
  });
  // What clients are told, so that an alert can fire on it (RFC 5905 §7.3 root delay and dispersion).
  new Gauge({
    name: 'timesvc_ntp_root_delay_seconds',
    help: 'Root delay advertised in replies, seconds (0 while unsynchronised)',
    registers: [registry],
    collect() {
      const s = manager.serverState;
      this.set(s.leap === 3 ? 0 : s.rootDelayS);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_root_dispersion_seconds',
    help: 'Root dispersion advertised in replies, seconds (0 while unsynchronised)',
    registers: [registry],
    collect() {
      const s = manager.serverState;
      this.set(s.leap === 3 ? 0 : manager.rootDispersionS());
    },
  });
  new Gauge({
    name: 'timesvc_clock_estimated_error_seconds',
    help: 'Advertised error bound now: root delay / 2 + root dispersion + its growth since (+Inf while unsynchronised)',
    registers: [registry],
    collect() {
      this.set(manager.snapshot().estimatedErrorS);
    },
  });
  new Gauge({
    name: 'timesvc_ntp_leap_indicator',
    help: 'Leap indicator in replies: 0 none, 1 insertion or 2 deletion announced (last day), 3 unsynchronised',
    registers: [registry],
    collect() {
      this.set(manager.serverState.leap);
    },
  });
  return registry;
}
