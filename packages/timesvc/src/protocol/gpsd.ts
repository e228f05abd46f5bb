import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

/** One satellite as a receiver reports it (gpsd SKY, NMEA GSV/GSA). */
export interface Satellite {
  prn: number;
  /** Degrees; undefined when the receiver does not know it yet. */
  elevation: number | undefined;
  azimuth: number | undefined;
  /** dB-Hz; undefined when not tracked. */
  snr: number | undefined;
  /** In the navigation solution (GSA, or gpsd SKY `used`). */
  used: boolean;
}

/**
 * gpsd JSON protocol (gpsd_json(5), "gpsd_json.adoc" in the gpsd sources): one JSON object per line, each
 * with a `class`. The client sends `?WATCH={"enable":true,"json":true,"pps":true}` and receives VERSION,
 * DEVICES, WATCH, then TPV (fix), SKY (satellites, DOP), TOFF (serial time vs host clock) and PPS (pulse vs
 * host clock). Unknown classes and malformed fields are ignored without throwing.
 */

export type GpsdMessage =
  | { class: 'VERSION'; release: string }
  | { class: 'DEVICE'; driver: string | undefined; subtype: string | undefined }
  | {
      class: 'TPV';
      mode: number;
      timeUnixMs: number | undefined;
      lat: number | undefined;
      lon: number | undefined;
      alt: number | undefined;
    }
  | { class: 'SKY'; satellites: Satellite[] | undefined; hdop: number | undefined }
  | { class: 'TOFF' | 'PPS'; realSec: number; realNsec: number; clockSec: number; clockNsec: number }
  | { class: 'OTHER'; name: string };

const MAX_LINE = 65_536;

function n(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function int(v: unknown, min: number, max: number): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : undefined;
}

/** Why a gpsd line was refused (every one is counted as `gpsd_bad_json`). */
export type GpsdErrorCode = 'too-long' | 'not-json' | 'no-class' | 'bad-fields';

/** Parse one line: a gpsd JSON object with a class (gpsd_json(5)), or why it is not one. */
export function parseGpsdLine(line: string): Decoded<GpsdMessage, DecodeError<GpsdErrorCode>> {
  if (line.length > MAX_LINE) return reject('too-long', `line longer than ${MAX_LINE} characters`);
  let o: unknown;
  try {
    o = JSON.parse(line);
  } catch {
    return reject('not-json', 'line is not JSON');
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return reject('no-class', 'not a JSON object');
  const r = o as Record<string, unknown>;
  const cls = r['class'];
  if (typeof cls !== 'string') return reject('no-class', 'object has no "class" string');
  const m = report(cls, r);
  return m
    ? decoded(m)
    : reject('bad-fields', `${cls.slice(0, 20)} report with missing or out-of-range fields`);
}

/** The report of class `cls`; undefined when a field it needs is missing or out of range. */
function report(cls: string, r: Record<string, unknown>): GpsdMessage | undefined {
  switch (cls) {
    case 'VERSION':
      return {
        class: 'VERSION',
        release: typeof r['release'] === 'string' ? r['release'].slice(0, 40) : '?',
      };
    case 'DEVICES': {
      const devs = Array.isArray(r['devices']) ? (r['devices'] as unknown[]) : [];
      // The first device with a receiver driver (gpsd also lists its PPS device with driver "PPS").
      for (const d of devs) {
        if (typeof d !== 'object' || d === null) continue;
        const dd = d as Record<string, unknown>;
        if (typeof dd['driver'] === 'string' && dd['driver'] !== 'PPS') {
          return {
            class: 'DEVICE',
            driver: dd['driver'].slice(0, 40),
            subtype: typeof dd['subtype'] === 'string' ? dd['subtype'].slice(0, 80) : undefined,
          };
        }
      }
      return { class: 'OTHER', name: cls };
    }
    case 'DEVICE':
      return {
        class: 'DEVICE',
        driver: typeof r['driver'] === 'string' ? r['driver'].slice(0, 40) : undefined,
        subtype: typeof r['subtype'] === 'string' ? r['subtype'].slice(0, 80) : undefined,
      };
    case 'TPV': {
      const mode = int(r['mode'], 0, 3);
      if (mode === undefined) return undefined;
      const t = typeof r['time'] === 'string' ? Date.parse(r['time']) : NaN;
      return {
        class: 'TPV',
        mode,
        timeUnixMs: Number.isFinite(t) ? t : undefined,
        lat: n(r['lat']),
        lon: n(r['lon']),
        // gpsd ≥ 3.20 sends altHAE/altMSL; `alt` is the older (MSL) name.
        alt: n(r['altMSL']) ?? n(r['alt']) ?? n(r['altHAE']),
      };
    }
    case 'SKY': {
      let satellites: Satellite[] | undefined;
      if (Array.isArray(r['satellites'])) {
        satellites = [];
        for (const s of (r['satellites'] as unknown[]).slice(0, 256)) {
          if (typeof s !== 'object' || s === null) continue;
          const ss = s as Record<string, unknown>;
          const prn = int(ss['PRN'], 1, 9999);
          if (prn === undefined) continue;
          const snr = n(ss['ss']);
          satellites.push({
            prn,
            elevation: n(ss['el']),
            azimuth: n(ss['az']),
            // gpsd reports 0 for a satellite it sees but does not track.
            snr: snr === undefined || snr === 0 ? undefined : snr,
            used: ss['used'] === true,
          });
        }
      }
      return { class: 'SKY', satellites, hdop: n(r['hdop']) };
    }
    case 'TOFF':
    case 'PPS': {
      const realSec = int(r['real_sec'], 0, 2 ** 40);
      const realNsec = int(r['real_nsec'], 0, 999_999_999);
      const clockSec = int(r['clock_sec'], 0, 2 ** 40);
      const clockNsec = int(r['clock_nsec'], 0, 999_999_999);
      if (
        realSec === undefined ||
        realNsec === undefined ||
        clockSec === undefined ||
        clockNsec === undefined
      ) {
        return undefined;
      }
      return { class: cls, realSec, realNsec, clockSec, clockNsec };
    }
    default:
      return { class: 'OTHER', name: cls.slice(0, 20) };
  }
}
