/**
 * Video formats and frame rates of all three device kinds, in one place (docs/PROTOCOLS.md, "Frame rates").
 *
 * - CasparCG names its channel formats `PAL`, `NTSC`, `1080i5000`, `720p5994`, `dci1080p2398`, `4kDCIp2500`, …
 *   (core/video_format.cpp at every tag from 2.0.7 to 2.5.0). The four digits are the rate × 100; for an
 *   interlaced (`i`) format they are the **field** rate, so 1080i5000 runs 25 frames a second.
 * - HyperDeck names its formats `NTSC`, `PAL`, `NTSCp`, `PALp`, `720p50`, `1080p23976`, `1080i5994`,
 *   `2Kp25DCI`, `4Kp24DCI`, `8Kp5994`, … (Blackmagic HyperDeck manual, Ethernet protocol, "Video Formats";
 *   the DCI and 8K names as the deck reports them in `video format:`). The digits are the rate (23976 = 23.976),
 *   again fields for `i`.
 * - vMix reports no format in `/api`; its rate is the configured one.
 *
 * Frame rate resolution for one device (one source of truth, in this order): the format the device reports
 * (CasparCG `/channel/N/format`, HyperDeck `video format`), the configured format (`videoFormat`), the
 * configured `framerate`, a bare rate the device reports (CasparCG 2.2/2.3 `/channel/N/framerate`, which is
 * the field rate on interlaced channels), then `settings.defaultFramerate`.
 */

/** FF is two digits: `HH:MM:SS:FF` cannot count more than 100 frames a second. */
export const MAX_FPS = 100;

export interface VideoFormat {
  /** The name as the device spells it. */
  name: string;
  /** Frames per second (1000/1001 rates exact). */
  fps: number;
  interlaced: boolean;
}

/** `2398` / `23976` / `2997` / `5994` / `25` / `5000` … as a rate; `fieldsNamed` halves it for `i` formats. */
function namedRate(digits: string, scale: number): number | undefined {
  const value = Number(digits) / scale;
  if (!Number.isFinite(value) || value <= 0) return undefined;
  // The 1000/1001 family: 23.976 (written 2398 or 23976), 29.97, 59.94, 119.88.
  for (const base of [24, 30, 60, 120]) {
    const exact = (base * 1000) / 1001;
    if (Math.abs(value - exact) < 0.011) return exact;
  }
  return value;
}

function make(name: string, rate: number | undefined, interlaced: boolean): VideoFormat | undefined {
  if (rate === undefined) return undefined;
  const fps = interlaced ? rate / 2 : rate;
  return fps >= 1 && fps <= MAX_FPS ? { name, fps, interlaced } : undefined;
}

const CASPAR = /^(?:dci)?\d{3,4}([pi])(\d{4})$/i;
const CASPAR_DCI_4K = /^\d+kDCI([pi])(\d{4})$/i;

/** A CasparCG video-mode name (`1080i5000`, `PAL`, `dci2160p2398`, `4kDCIp5000`), or undefined. */
export function casparcgFormat(name: string): VideoFormat | undefined {
  const n = name.trim();
  if (/^PAL$/i.test(n)) return { name: n, fps: 25, interlaced: true };
  if (/^NTSC$/i.test(n)) return { name: n, fps: 30000 / 1001, interlaced: true };
  const m = CASPAR.exec(n) ?? CASPAR_DCI_4K.exec(n);
  if (!m) return undefined;
  const interlaced = (m[1] ?? '').toLowerCase() === 'i';
  return make(n, namedRate(m[2] ?? '', 100), interlaced);
}

/**
 * Every format name the HyperDeck protocol documents, with its frame rate. Unknown names are not guessed:
 * the device's configured or default rate is used instead (and the README says so).
 */
export const HYPERDECK_FORMATS: Readonly<Record<string, number>> = (() => {
  const table: Record<string, number> = {
    NTSC: 30000 / 1001,
    PAL: 25,
    NTSCp: 30000 / 1001,
    PALp: 25,
  };
  const rates: [string, number][] = [
    ['23976', 24000 / 1001],
    ['24', 24],
    ['25', 25],
    ['2997', 30000 / 1001],
    ['30', 30],
    ['50', 50],
    ['5994', 60000 / 1001],
    ['60', 60],
  ];
  const add = (name: string, fps: number): void => {
    table[name] = fps;
  };
  for (const [r, fps] of rates) {
    if (r === '50' || r === '5994' || r === '60') {
      add(`720p${r}`, fps);
      add(`1080i${r}`, fps / 2);
    }
    add(`1080p${r}`, fps);
    add(`4Kp${r}`, fps);
    add(`8Kp${r}`, fps);
  }
  for (const [r, fps] of rates.slice(0, 3)) {
    add(`2Kp${r}DCI`, fps);
    add(`4Kp${r}DCI`, fps);
    add(`8Kp${r}DCI`, fps);
  }
  return table;
})();

/** A HyperDeck `video format` value, or undefined when the protocol does not document it. */
export function hyperdeckFormat(name: string): VideoFormat | undefined {
  const n = name.trim();
  const fps = HYPERDECK_FORMATS[n];
  if (fps === undefined) return undefined;
  return { name: n, fps, interlaced: /^(NTSC|PAL|\d+i)/.test(n) && !n.endsWith('p') };
}

/** A bare rate (`num/den`, or one number) as frames per second, when it is a usable timecode rate. */
export function rateFps(num: number | undefined, den = 1): number | undefined {
  if (num === undefined || !Number.isFinite(num) || !Number.isFinite(den) || num <= 0 || den <= 0)
    return undefined;
  const fps = num / den;
  return fps >= 1 && fps <= MAX_FPS ? fps : undefined;
}

export type FrameRateSource = 'device-format' | 'config-format' | 'config' | 'device-rate' | 'default';

export interface FrameRateInputs {
  /** Format the device reports (CasparCG `/format`, HyperDeck `video format`), already parsed. */
  deviceFormat?: VideoFormat | undefined;
  /** Format named in the configuration (`videoFormat`). */
  configFormat?: VideoFormat | undefined;
  /** `framerate` in the configuration. */
  configFps?: number | undefined;
  /** A bare rate the device reports (CasparCG 2.2/2.3 `/framerate`). */
  deviceFps?: number | undefined;
  defaultFps: number;
}

/** The one frame rate a device's timecode is counted in, and where it came from. */
export function resolveFrameRate(i: FrameRateInputs): { fps: number; source: FrameRateSource } {
  if (i.deviceFormat) return { fps: i.deviceFormat.fps, source: 'device-format' };
  if (i.configFormat) return { fps: i.configFormat.fps, source: 'config-format' };
  if (i.configFps !== undefined) return { fps: i.configFps, source: 'config' };
  if (i.deviceFps !== undefined) return { fps: i.deviceFps, source: 'device-rate' };
  return { fps: i.defaultFps, source: 'default' };
}
