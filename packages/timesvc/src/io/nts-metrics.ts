import { Counter, Gauge, type Registry } from '@broadcast-ops/core';
import type { NtsServerSide } from './nts-service.ts';

// Apart from nts-service.ts so that the NTS metrics exist (at 0) with NTS off while the NTS code itself loads
// only when nts.enabled (io/service.ts loadOptionalCode, docs/performance.md "At rest").

/** NTS metrics (README "Metrics"), read from the live counters at scrape time. */
export function registerNtsMetrics(registry: Registry, side: () => NtsServerSide | undefined): void {
  new Counter({
    name: 'timesvc_nts_ke_requests_total',
    help: 'NTS-KE connections accepted (each is one key-establishment attempt)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(side()?.ke.counters.requests ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_nts_ke_success_total',
    help: 'NTS-KE responses that delivered cookies',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(side()?.ke.counters.success ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_nts_ke_failures_total',
    help: 'NTS-KE attempts that ended without cookies, by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      const c = side()?.ke.counters;
      if (c) for (const [reason, n] of Object.entries(c.failures)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: 'timesvc_nts_auth_success_total',
    help: 'NTS-protected NTP requests authenticated and answered',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(side()?.responder.counters.authenticated ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_nts_auth_failures_total',
    help: 'NTS-protected NTP requests refused (NTSN kiss or dropped), by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      const c = side()?.responder.counters;
      if (c) for (const [reason, n] of Object.entries(c.failures)) this.inc({ reason }, n);
    },
  });
  new Gauge({
    name: 'timesvc_nts_active_sessions',
    help: 'Distinct NTS-KE sessions (client key pairs) that sent an authentic request in the last 10 minutes',
    registers: [registry],
    collect() {
      this.set(side()?.responder.activeSessions() ?? 0);
    },
  });
}
