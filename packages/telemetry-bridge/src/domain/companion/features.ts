/**
 * What the connected Companion can do, from `BEGIN ApiVersion` and `CAPS` (docs/companion.md "Versions"),
 * and how Satellite messages map to state paths and values. Pure functions: no sockets, no timers.
 */
import { atLeast, fromBase64, isTruthy, type SatelliteParams } from '../../protocol/satellite.ts';

export interface CompanionFeatures {
  /** KEY-ROTATE (1.3.0) */
  rotate: boolean;
  /** TEXT_STYLE / FONT_SIZE (1.4.0) */
  textStyle: boolean;
  /** BITMAPS=<size> (1.5.0); before, a bitmap is always 72 px */
  bitmapSize: boolean;
  /** KEY=row/col, TEXTCOLOR, COLORS=hex|rgb (1.6.0) */
  rowColumn: boolean;
  /** VARIABLES, SET-VARIABLE-VALUE, VARIABLE-VALUE, BRIGHTNESS opt-out (1.7.0) */
  variables: boolean;
  /** PINCODE_LOCK, LOCKED-STATE (1.8.0) */
  lockedState: boolean;
  /** CAPS line after BEGIN, SERIAL, LOCATION in KEY-STATE (1.10.0) */
  caps: boolean;
  /** ADD-SUB/SUB-PRESS/SUB-ROTATE: 1.10.0 and CAPS SUBSCRIPTIONS=1 (Companion's default is off) */
  subscriptions: boolean;
  /** Signed DIRECTION step counts: CAPS ROTARY_AMOUNT (1.14.0) */
  rotaryAmount: boolean;
  /** Bitmap encodings Companion offers in CAPS BITMAP_FORMATS (1.12.0); before, raw rgb only. */
  bitmapFormats: string[];
}

export type BitmapFormat = 'rgb' | 'png' | 'webp';

/**
 * The encoding to ask for: the preferred one when CAPS BITMAP_FORMATS lists it, else raw rgb, which every
 * Companion sends when BITMAP_FORMAT is absent or unknown (`parseSatelliteBitmapFormat` in Companion's
 * SatelliteRenderUtil.ts). `undefined` = do not send BITMAP_FORMAT at all (a Companion before 1.12.0).
 */
export function bitmapFormatFor(f: CompanionFeatures, preferred: BitmapFormat): BitmapFormat | undefined {
  if (f.bitmapFormats.length === 0) return undefined;
  return f.bitmapFormats.includes(preferred) ? preferred : 'rgb';
}

export function featuresOf(apiVersion: string, caps: SatelliteParams): CompanionFeatures {
  const v = (min: string): boolean => atLeast(apiVersion, min);
  return {
    rotate: v('1.3.0'),
    textStyle: v('1.4.0'),
    bitmapSize: v('1.5.0'),
    rowColumn: v('1.6.0'),
    variables: v('1.7.0'),
    lockedState: v('1.8.0'),
    caps: v('1.10.0'),
    subscriptions: v('1.10.0') && isTruthy(caps['SUBSCRIPTIONS']),
    rotaryAmount: v('1.14.0') && isTruthy(caps['ROTARY_AMOUNT']),
    bitmapFormats:
      v('1.12.0') && typeof caps['BITMAP_FORMATS'] === 'string'
        ? caps['BITMAP_FORMATS']
            .split(',')
            .map((x) => x.trim().toLowerCase())
            .filter((x) => x !== '')
        : [],
  };
}

/** CAPS as published: flags as booleans, lists and other values as strings. */
export function capsValue(caps: SatelliteParams): Record<string, boolean | string> {
  const out: Record<string, boolean | string> = {};
  for (const [k, v] of Object.entries(caps)) {
    out[k] = v === true || v === '1' || v === '0' ? isTruthy(v) : v;
  }
  return out;
}

/** A path segment from an external id: lower case, `[^a-z0-9_]` → `_` (docs/companion.md "State"). */
export function segment(id: string): string {
  const s = id.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  return s === '' ? '_' : s;
}

/** `group:variable` → `companion.variables.group.variable`; an id without a group lands in `satellite`. */
export function variablePath(id: string): string {
  const i = id.indexOf(':');
  const group = i === -1 ? 'satellite' : id.slice(0, i);
  const name = i === -1 ? id : id.slice(i + 1);
  return `companion.variables.${segment(group)}.${segment(name)}`;
}

export interface KeyValue {
  deviceId: string;
  keyIndex: number;
  row: number;
  column: number;
  page?: number;
  type: string;
  pressed: boolean;
  text?: string;
  colour?: string;
  textColour?: string;
  fontSize?: number | string;
  image?: string;
  /** How `image` is encoded: raw `rgb` pixels in base64, or a `png` / `webp` data URL where negotiated (1.12.0). */
  imageFormat?: BitmapFormat;
}

/**
 * How a BITMAP value is encoded: Companion sends png and webp as a data URL (`data:image/webp;base64,…`,
 * "sent verbatim: the client distinguishes them from raw rgb by the `data:` prefix", `buildSatelliteStyleArgs`
 * in SatelliteRenderUtil.ts) and raw rgb as bare base64.
 */
export function bitmapFormatOf(bitmap: string): BitmapFormat {
  const m = /^data:image\/(png|webp);base64,/.exec(bitmap);
  return m ? (m[1] as BitmapFormat) : 'rgb';
}

/** KEY-STATE or SUB-STATE parameters → the published key value (text decoded from base64). */
export function styleValue(
  p: SatelliteParams,
  imageFormat: BitmapFormat | undefined,
): Omit<KeyValue, 'deviceId' | 'keyIndex' | 'row' | 'column'> {
  const out: Omit<KeyValue, 'deviceId' | 'keyIndex' | 'row' | 'column'> = {
    type: typeof p['TYPE'] === 'string' ? p['TYPE'] : 'BUTTON',
    pressed: isTruthy(p['PRESSED']),
  };
  if (typeof p['TEXT'] === 'string') out.text = fromBase64(p['TEXT']);
  if (typeof p['COLOR'] === 'string') out.colour = p['COLOR'];
  if (typeof p['TEXTCOLOR'] === 'string') out.textColour = p['TEXTCOLOR'];
  if (typeof p['FONT_SIZE'] === 'string') {
    const n = Number(p['FONT_SIZE']);
    out.fontSize = Number.isFinite(n) ? n : p['FONT_SIZE'];
  }
  if (imageFormat && typeof p['BITMAP'] === 'string') {
    out.image = p['BITMAP'];
    out.imageFormat = bitmapFormatOf(p['BITMAP']);
  }
  return out;
}

/** `LOCATION="page/row/col"` (1.10.0) → numbers, or undefined. */
export function parseLocation(
  v: string | true | undefined,
): { page: number; row: number; column: number } | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d+)\/(\d+)\/(\d+)$/.exec(v);
  return m ? { page: Number(m[1]), row: Number(m[2]), column: Number(m[3]) } : undefined;
}
