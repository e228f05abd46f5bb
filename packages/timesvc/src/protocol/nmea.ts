/**
 * NMEA 0183 sentence codec (pure): framing, checksum, and the five sentences a timing receiver needs —
 * RMC, GGA, GSA, GSV, ZDA (docs/gpsdo.md "NMEA"). Nothing here throws on peer input: every function returns
 * a result with an error kind, so the caller counts errors and moves on.
 *
 * Framing (NMEA 0183 §5.2): `$<talker><type>,f1,…*hh\r\n`; `hh` is the XOR of every byte between `$` and
 * `*` as two hex digits. NMEA 0183 caps a sentence at 82 characters; NMEA 4.x receivers (extra signal id
 * fields, high-precision positions) exceed that, so lines up to MAX_LINE bytes are accepted.
 */
import { reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

/** Longest line kept by the line buffer; longer ones are dropped and counted as `overlong`. */
export const MAX_LINE = 200;

export type NmeaError = 'overlong' | 'no_start' | 'no_checksum' | 'bad_checksum' | 'bad_chars' | 'bad_field';

export interface NmeaFrame {
  talker: string;
  type: string;
  fields: string[];
}

/** What each refusal means, for the `message` of its `DecodeError` (the code is the counter's label). */
const NMEA_ERROR_TEXT: Record<NmeaError, string> = {
  overlong: `line longer than ${MAX_LINE} characters`,
  no_start: 'line does not start with $',
  no_checksum: 'no *hh checksum at the end of the line',
  bad_checksum: 'checksum does not match the sentence',
  bad_chars: 'character outside printable ASCII, or a stray $ or *',
  bad_field: 'a field is missing or out of range',
};

export type Parsed<T> = Decoded<T, DecodeError<NmeaError>>;

function refuse(code: NmeaError): { ok: false; error: DecodeError<NmeaError> } {
  return reject(code, NMEA_ERROR_TEXT[code]);
}

const HEX = /^[0-9A-Fa-f]{2}$/;

/** Verify framing and checksum of one line (without CR/LF). */
export function frameNmea(line: string): Parsed<NmeaFrame> {
  if (line.length > MAX_LINE) return refuse('overlong');
  if (line[0] !== '$') return refuse('no_start');
  const star = line.lastIndexOf('*');
  if (star < 0 || star !== line.length - 3) return refuse('no_checksum');
  const hh = line.slice(star + 1);
  if (!HEX.test(hh)) return refuse('no_checksum');
  let sum = 0;
  for (let i = 1; i < star; i++) {
    const c = line.charCodeAt(i);
    // Printable ASCII only (NMEA 0183 §5.1); `$` and `*` are reserved delimiters.
    if (c < 0x20 || c > 0x7e || c === 0x24 || c === 0x2a) return refuse('bad_chars');
    sum ^= c;
  }
  if (sum !== parseInt(hh, 16)) return refuse('bad_checksum');
  const body = line.slice(1, star).split(',');
  const address = body[0] ?? '';
  // Talker (2 letters) + type (3 letters); proprietary sentences ($P…) are framed but not interpreted.
  if (!/^[A-Z0-9]{3,6}$/.test(address)) return refuse('bad_field');
  const proprietary = address.startsWith('P');
  return {
    ok: true,
    value: {
      talker: proprietary ? 'P' : address.slice(0, 2),
      type: proprietary ? address.slice(1) : address.slice(2),
      fields: body.slice(1),
    },
  };
}

/** Checksum of a sentence body (between `$` and `*`), as the two upper-case hex digits a sender writes. */
export function nmeaChecksum(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) sum ^= body.charCodeAt(i);
  return sum.toString(16).toUpperCase().padStart(2, '0');
}

/** `$body*hh` (no CR/LF). */
export function buildNmea(body: string): string {
  return `$${body}*${nmeaChecksum(body)}`;
}

/**
 * Splits a byte stream into lines, bounded: a line longer than MAX_LINE is discarded up to its newline and
 * counted; bytes never accumulate beyond MAX_LINE.
 */
export class NmeaLineBuffer {
  #buf = '';
  #discarding = false;
  overlong = 0;

  push(chunk: Buffer | string): string[] {
    const text = typeof chunk === 'string' ? chunk : chunk.toString('latin1');
    const out: string[] = [];
    let start = 0;
    for (;;) {
      const nl = text.indexOf('\n', start);
      const piece = nl < 0 ? text.slice(start) : text.slice(start, nl);
      if (!this.#discarding) {
        if (this.#buf.length + piece.length > MAX_LINE + 1) {
          this.#buf = '';
          this.#discarding = true;
          this.overlong++;
        } else this.#buf += piece;
      }
      if (nl < 0) break;
      if (!this.#discarding) {
        const line = this.#buf.endsWith('\r') ? this.#buf.slice(0, -1) : this.#buf;
        if (line.length > 0) out.push(line);
      }
      this.#buf = '';
      this.#discarding = false;
      start = nl + 1;
    }
    return out;
  }
}

// ---- Field helpers -------------------------------------------------------------------------------------

function num(s: string | undefined): number | undefined {
  if (s === undefined || s === '' || !/^[+-]?\d+(\.\d+)?$/.test(s)) return undefined;
  return Number(s);
}

/** `hhmmss[.ss]` → seconds of the day (ms precision), undefined when malformed. */
function parseTimeOfDay(s: string | undefined): number | undefined {
  if (!s || !/^\d{6}(\.\d{1,9})?$/.test(s)) return undefined;
  const h = Number(s.slice(0, 2));
  const m = Number(s.slice(2, 4));
  const sec = Number(s.slice(4));
  // 60 is a leap second (NMEA follows UTC).
  if (h > 23 || m > 59 || sec >= 61) return undefined;
  return h * 3600 + m * 60 + sec;
}

/** `ddmm.mmmm` + hemisphere → signed degrees. */
function coordinate(v: string | undefined, hemi: string | undefined, degDigits: 2 | 3): number | undefined {
  if (!v || !hemi) return undefined;
  if (!/^\d+(\.\d+)?$/.test(v)) return undefined;
  const dot = v.indexOf('.');
  const intLen = dot < 0 ? v.length : dot;
  if (intLen !== degDigits + 2) return undefined;
  const deg = Number(v.slice(0, degDigits));
  const min = Number(v.slice(degDigits));
  if (min >= 60) return undefined;
  const value = deg + min / 60;
  const limit = degDigits === 2 ? 90 : 180;
  if (value > limit) return undefined;
  if (hemi === 'N' || hemi === 'E') return value;
  if (hemi === 'S' || hemi === 'W') return -value;
  return undefined;
}

/**
 * Two-digit RMC year to a full year: 80–99 → 19xx, 00–79 → 20xx (a 100-year window from 1980, the GPS
 * epoch). ZDA's four-digit year is preferred whenever the receiver sends it (docs/gpsdo.md).
 */
export function fullYear(yy: number): number {
  return yy >= 80 ? 1900 + yy : 2000 + yy;
}

function utcMs(year: number, month: number, day: number, secOfDay: number): number | undefined {
  if (month < 1 || month > 12 || day < 1 || day > 31) return undefined;
  const ms = Date.UTC(year, month - 1, day) + Math.round(secOfDay * 1000);
  const check = new Date(Date.UTC(year, month - 1, day));
  if (check.getUTCDate() !== day) return undefined; // 31 February and friends
  return ms;
}

// ---- Sentences -----------------------------------------------------------------------------------------

export interface Rmc {
  kind: 'RMC';
  talker: string;
  secOfDay: number;
  /** Status A (valid) / V (warning). */
  valid: boolean;
  latitude: number | undefined;
  longitude: number | undefined;
  /** Unix ms of the labelled instant (date ddmmyy with the two-digit year windowed). */
  unixMs: number | undefined;
  /** NMEA 2.3 mode indicator (A autonomous, D differential, E estimated, N not valid), when present. */
  mode: string | undefined;
}

export interface Gga {
  kind: 'GGA';
  talker: string;
  secOfDay: number | undefined;
  latitude: number | undefined;
  longitude: number | undefined;
  /** 0 invalid, 1 GPS, 2 DGPS, 4 RTK fixed, 5 RTK float, 6 estimated, … */
  quality: number;
  satellitesUsed: number | undefined;
  hdop: number | undefined;
  altitudeM: number | undefined;
}

export interface Gsa {
  kind: 'GSA';
  talker: string;
  /** 1 none, 2 2D, 3 3D. */
  fix: number;
  prns: number[];
  pdop: number | undefined;
  hdop: number | undefined;
  vdop: number | undefined;
  /** NMEA 4.10 system id (1 GPS, 2 GLONASS, 3 Galileo, 4 BeiDou), when present. */
  systemId: number | undefined;
}

export interface GsvSatellite {
  prn: number;
  elevation: number | undefined;
  azimuth: number | undefined;
  /** dB-Hz; undefined when not tracked (empty field). */
  snr: number | undefined;
}

export interface Gsv {
  kind: 'GSV';
  talker: string;
  total: number;
  index: number;
  inView: number;
  satellites: GsvSatellite[];
  /** NMEA 4.10 signal id, when present (a receiver sends one cycle per signal under one talker). */
  signalId: string | undefined;
}

export interface Zda {
  kind: 'ZDA';
  talker: string;
  secOfDay: number;
  unixMs: number;
}

export interface Other {
  kind: 'OTHER';
  talker: string;
  type: string;
}

export type Sentence = Rmc | Gga | Gsa | Gsv | Zda | Other;

const bad: Parsed<never> = refuse('bad_field');

function rmc(talker: string, f: string[]): Parsed<Rmc> {
  const secOfDay = parseTimeOfDay(f[0]);
  if (secOfDay === undefined || (f[1] !== 'A' && f[1] !== 'V')) return bad;
  const d = f[8] ?? '';
  let unixMs: number | undefined;
  if (/^\d{6}$/.test(d)) {
    unixMs = utcMs(fullYear(Number(d.slice(4, 6))), Number(d.slice(2, 4)), Number(d.slice(0, 2)), secOfDay);
  } else if (d !== '') return bad;
  return {
    ok: true,
    value: {
      kind: 'RMC',
      talker,
      secOfDay,
      valid: f[1] === 'A',
      latitude: coordinate(f[2], f[3], 2),
      longitude: coordinate(f[4], f[5], 3),
      unixMs,
      mode: f[11] || undefined,
    },
  };
}

function gga(talker: string, f: string[]): Parsed<Gga> {
  if (f.length < 9) return bad;
  const quality = num(f[5]);
  if (quality === undefined || !Number.isInteger(quality) || quality < 0 || quality > 9) return bad;
  const altitude = num(f[8]);
  return {
    ok: true,
    value: {
      kind: 'GGA',
      talker,
      secOfDay: parseTimeOfDay(f[0]),
      latitude: coordinate(f[1], f[2], 2),
      longitude: coordinate(f[3], f[4], 3),
      quality,
      satellitesUsed: num(f[6]),
      hdop: num(f[7]),
      altitudeM: altitude,
    },
  };
}

function gsa(talker: string, f: string[]): Parsed<Gsa> {
  if (f.length < 17) return bad;
  const fix = num(f[1]);
  if (fix === undefined || fix < 1 || fix > 3) return bad;
  const prns: number[] = [];
  for (let i = 2; i < 14; i++) {
    const p = num(f[i]);
    if (f[i] !== '' && (p === undefined || !Number.isInteger(p) || p < 1 || p > 999)) return bad;
    if (p !== undefined) prns.push(p);
  }
  return {
    ok: true,
    value: {
      kind: 'GSA',
      talker,
      fix,
      prns,
      pdop: num(f[14]),
      hdop: num(f[15]),
      vdop: num(f[16]),
      systemId: num(f[17]),
    },
  };
}

function gsv(talker: string, f: string[]): Parsed<Gsv> {
  const total = num(f[0]);
  const index = num(f[1]);
  const inView = num(f[2]);
  if (total === undefined || index === undefined || inView === undefined) return bad;
  if (total < 1 || total > 9 || index < 1 || index > total || inView > 99) return bad;
  const rest = f.slice(3);
  // Blocks of 4; an odd single trailing field is the NMEA 4.10 signal id.
  const signalId = rest.length % 4 === 1 ? rest.pop() : undefined;
  if (rest.length % 4 !== 0 || rest.length > 16) return bad;
  const satellites: GsvSatellite[] = [];
  for (let i = 0; i < rest.length; i += 4) {
    if (rest[i] === '') continue; // an empty block pads the last sentence
    const prn = num(rest[i]);
    if (prn === undefined || !Number.isInteger(prn) || prn < 1 || prn > 999) return bad;
    const elevation = num(rest[i + 1]);
    const azimuth = num(rest[i + 2]);
    const snr = num(rest[i + 3]);
    if (elevation !== undefined && (elevation < -90 || elevation > 90)) return bad;
    if (azimuth !== undefined && (azimuth < 0 || azimuth >= 360)) return bad;
    if (snr !== undefined && (snr < 0 || snr > 99)) return bad;
    satellites.push({ prn, elevation, azimuth, snr });
  }
  return { ok: true, value: { kind: 'GSV', talker, total, index, inView, satellites, signalId } };
}

function zda(talker: string, f: string[]): Parsed<Zda> {
  const secOfDay = parseTimeOfDay(f[0]);
  const day = num(f[1]);
  const month = num(f[2]);
  const year = num(f[3]);
  if (secOfDay === undefined || day === undefined || month === undefined || year === undefined) return bad;
  if (!/^\d{4}$/.test(f[3] ?? '')) return bad;
  const unixMs = utcMs(year, month, day, secOfDay);
  if (unixMs === undefined) return bad;
  return { ok: true, value: { kind: 'ZDA', talker, secOfDay, unixMs } };
}

/** Frame, verify and interpret one line. Unknown sentence types come back as `OTHER`. */
export function parseNmea(line: string): Parsed<Sentence> {
  const fr = frameNmea(line);
  if (!fr.ok) return fr;
  const { talker, type, fields } = fr.value;
  switch (type) {
    case 'RMC':
      return rmc(talker, fields);
    case 'GGA':
      return gga(talker, fields);
    case 'GSA':
      return gsa(talker, fields);
    case 'GSV':
      return gsv(talker, fields);
    case 'ZDA':
      return zda(talker, fields);
    default:
      return { ok: true, value: { kind: 'OTHER', talker, type } };
  }
}
