import { Counter, Gauge, type Registry } from '@broadcast-ops/core';
import type { GpsdoSource } from './gpsdo.ts';

/**
 * GPSDO metrics (the service's names `timesvc_gpsdo_locked`, `_satellites`, `_pps_total`, README "Endpoints and
 * metrics", plus the extras `_offset_nanoseconds` and `_signal_strength`, and health counters). Read from the receiver model
 * at scrape time; registered only when a GPSDO is configured.
 */
export function registerGpsdoMetrics(registry: Registry, gpsdo: () => GpsdoSource | undefined): void {
  const status = () => gpsdo()?.gpsdoStatus();
  new Gauge({
    name: 'timesvc_gpsdo_locked',
    help: '1 while the GPSDO is locked (fix, satellites and, for serialpps, PPS)',
    registers: [registry],
    collect() {
      this.set(status()?.locked ? 1 : 0);
    },
  });
  new Gauge({
    name: 'timesvc_gpsdo_satellites',
    help: 'Satellites used in the fix',
    registers: [registry],
    collect() {
      this.set(status()?.satellitesUsed ?? 0);
    },
  });
  new Gauge({
    name: 'timesvc_gpsdo_satellites_visible',
    help: 'Satellites in view',
    registers: [registry],
    collect() {
      this.set(status()?.satellites.length ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_gpsdo_pps_total',
    help: 'PPS edges seen',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(status()?.ppsCount ?? 0);
    },
  });
  new Counter({
    name: 'timesvc_gpsdo_paired_total',
    help: 'PPS edges paired with the NMEA second they start and used as samples',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(status()?.counters.paired ?? 0);
    },
  });
  new Gauge({
    name: 'timesvc_gpsdo_offset_nanoseconds',
    help: 'Receiver time - host clock at the last paired PPS edge, ns (absent until measured)',
    labelNames: ['type'],
    registers: [registry],
    collect() {
      this.reset();
      const st = status();
      // Labelled by receiver type, so "not measured" is no series at all rather than a 0 (prom-client
      // re-creates an unlabelled gauge at 0 on reset).
      if (st?.offsetNs !== undefined) this.set({ type: st.type }, st.offsetNs);
    },
  });
  new Gauge({
    name: 'timesvc_gpsdo_signal_strength',
    help: 'Mean SNR of the satellites used, dB-Hz (absent when unknown)',
    labelNames: ['type'],
    registers: [registry],
    collect() {
      this.reset();
      const st = status();
      if (st?.signalStrengthDb !== undefined) this.set({ type: st.type }, st.signalStrengthDb);
    },
  });
  new Counter({
    name: 'timesvc_gpsdo_errors_total',
    help: 'Receiver input errors by kind (nmea_bad_checksum, nmea_overlong, pps_late_sentence, ...)',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, v] of Object.entries(status()?.counters.errors ?? {})) this.inc({ kind }, v);
    },
  });
  new Counter({
    name: 'timesvc_gpsdo_events_total',
    help: 'Reference-health events (locked, lock_lost, pps_lost, fix_lost, disconnected, connected, holdover)',
    labelNames: ['event'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [event, v] of Object.entries(status()?.counters.events ?? {})) this.inc({ event }, v);
    },
  });
}
