import { Counter, Gauge, type Registry } from '@broadcast-ops/core';
import type { PtpAnnouncer } from './ptp.ts';

/** IEEE 1588-2008 §8.2.5.3.1 Table 8, portState. */
const PORT_STATES = { INITIALIZING: 1, FAULTY: 2, DISABLED: 3, LISTENING: 4, MASTER: 6, PASSIVE: 7 } as const;

/**
 * PTP metrics (the service's names `timesvc_ptp_sync_total`, `_announce_total`, `_offset_nanoseconds`, README
 * "Endpoints and metrics"; extras in docs/ptp.md). A master measures no offset or path delay (only a slave does), so
 * `timesvc_ptp_offset_nanoseconds` carries no sample rather than a made-up 0 (docs/ptp.md "Metrics").
 */
export function registerPtpMetrics(registry: Registry, ptp: () => PtpAnnouncer | undefined): void {
  new Counter({
    name: 'timesvc_ptp_sync_total',
    help: 'Sync messages sent (each followed by a Follow_Up)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(ptp()?.counters.sync ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_ptp_announce_total',
    help: 'Announce messages sent',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(ptp()?.counters.announce ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_ptp_delay_req_total',
    help: 'Delay requests answered, by type (delay_req: E2E, pdelay_req: P2P)',
    labelNames: ['type'],
    registers: [registry],
    collect() {
      this.reset();
      const c = ptp()?.counters;
      this.inc({ type: 'delay_req' }, c?.delayReq ?? 0);
      this.inc({ type: 'pdelay_req' }, c?.pdelayReq ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_ptp_errors_total',
    help: 'PTP datagrams not understood (rx) or not sent (tx)',
    labelNames: ['direction'],
    registers: [registry],
    collect() {
      this.reset();
      const c = ptp()?.counters;
      this.inc({ direction: 'rx' }, c?.rxErrors ?? 0);
      this.inc({ direction: 'tx' }, c?.txErrors ?? 0);
    },
  });
  new Gauge({
    name: 'timesvc_ptp_offset_nanoseconds',
    help: 'Offset measured by the PTP port, ns: never set on a master (no series; labelled so none is emitted)',
    labelNames: ['interface'],
    registers: [registry],
    collect() {
      this.reset();
    },
  });
  new Gauge({
    name: 'timesvc_ptp_clock_class',
    help: 'clockClass announced (6 locked to GPS, 7 holdover, ptp.clock_class otherwise)',
    registers: [registry],
    collect() {
      const s = ptp()?.status();
      if (s) this.set(s.clock_class);
    },
  });
  new Counter({
    name: 'timesvc_ptp_announce_received_total',
    help: 'Announce messages received from other clocks in our domain (the BMCA input)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(ptp()?.counters.announceRx ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_ptp_state_changes_total',
    help: 'PTP port state changes decided by the BMCA (LISTENING, MASTER, PASSIVE)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(ptp()?.counters.stateChanges ?? 0);
    },
  });
  new Gauge({
    name: 'timesvc_ptp_port_state',
    help: 'PTP port state (IEEE 1588-2008 Table 8: 1 INITIALIZING, 2 FAULTY, 3 DISABLED, 4 LISTENING, 6 MASTER, 7 PASSIVE)',
    registers: [registry],
    collect() {
      const s = ptp()?.status();
      this.set(s ? PORT_STATES[s.port_state] : PORT_STATES.DISABLED);
    },
  });
}
