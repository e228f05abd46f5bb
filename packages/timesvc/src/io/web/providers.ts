/**
 * What the web layer reads from the GPSDO and the PTP announcer (README "Web API: GPSDO and PTP
 * providers"). Both are optional: without a provider `/api/status/gpsdo`, `/api/satellites` and
 * `/api/status/ptp` answer 404 "… not enabled" and the dashboard says so.
 */
export interface GpsdoStatus {
  /** `dummy`, `serialpps`, `network`. */
  type: string;
  /** The device (serial port, gpsd) is connected and talking. */
  connected: boolean;
  /** The GPSDO is locked and usable as a reference. */
  locked: boolean;
  /** GPS fix valid (from RMC status / GGA quality); a change is a reference-health event. */
  fix: boolean;
  /** PPS pulses are arriving (a pulse within the last ~2 s); a change is a reference-health event. */
  pps_ok: boolean;
  /** Satellites used in the fix. */
  satellites: number;
  /** PPS pulses counted since start. */
  pps_count: number;
  lock_duration_s?: number;
  signal_strength_db?: number;
  offset_ns?: number;
  latitude?: number;
  longitude?: number;
  altitude_m?: number;
  hdop?: number;
  last_pps?: string;
  last_nmea?: string;
  firmware?: string;
  serial_number?: string;
  error?: string;
}

export interface Satellite {
  prn: number;
  /** Degrees. */
  elevation: number | null;
  azimuth: number | null;
  /** dB-Hz, null when not tracked. */
  snr: number | null;
  /** Used in the fix (GSA). */
  used: boolean;
}

export interface GpsdoProvider {
  status(): GpsdoStatus;
  satellites(): Satellite[];
  /** `fix` and `pps_ok` of `status()` alone, where the provider has them cheaper (reference-events.ts). */
  signal?(): Pick<GpsdoStatus, 'fix' | 'pps_ok'>;
}

export interface PtpStatus {
  running: boolean;
  /** IEEE 1588 port state: INITIALIZING, LISTENING, MASTER, … */
  port_state: string;
  /** linuxptp notation, e.g. 020000.fffe.000001. */
  clock_id: string;
  domain: number;
  clock_class: number;
  interface: string;
  sync_count: number;
  announce_count: number;
  delay_req_count: number;
  /** Offset of the PTP time base from the served clock, ns (0 when the announcer has none). */
  offset_ns: number;
  priority1?: number;
  priority2?: number;
  clock_accuracy?: number;
  profile?: string;
  path_delay_ns?: number;
}

export interface PtpProvider {
  status(): PtpStatus;
}
