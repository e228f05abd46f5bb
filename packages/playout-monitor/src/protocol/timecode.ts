/**
 * Timecode helpers (pure). One format everywhere: `HH:MM:SS:FF`, always with `:`, even for drop-frame
 * rates (reference §1.3 and defect P9). Non-integer rates (29.97, 59.94, 23.976) count frames at the
 * nominal integer rate (non-drop), as a non-drop timecode generator does.
 */
export const ZERO_TIMECODE = '00:00:00:00';
/** FF is two digits: `HH:MM:SS:FF` cannot count more than 100 frames a second. */
export const MAX_FPS = 100;

const TC = /^(\d{2}):(\d{2}):(\d{2})[:;.](\d{2})$/;

function two(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** The integer frame count per timecode second for a (possibly fractional) rate. */
export function nominalRate(fps: number): number {
  if (!Number.isFinite(fps) || fps <= 0) return 25;
  return Math.min(MAX_FPS, Math.max(1, Math.round(fps)));
}

/**
 * Frames per second of a video format's named rate (CasparCG `1080i5000`, HyperDeck `1080p2997`, both
 * parsed by their codecs): 59.94, 29.97 and 23.98 are the 1000/1001 rates; an interlaced format names
 * fields, so it runs at half as many frames. Undefined outside 1..MAX_FPS.
 */
export function formatFrameRate(named: number, interlaced: boolean): number | undefined {
  const exact =
    named === 59.94 ? 60000 / 1001 : named === 29.97 ? 30000 / 1001 : named === 23.98 ? 24000 / 1001 : named;
  const fps = interlaced ? exact / 2 : exact;
  return fps >= 1 && fps <= MAX_FPS ? fps : undefined;
}

export function framesToTimecode(frames: number, fps: number): string {
  const rate = nominalRate(fps);
  const f = Number.isFinite(frames) && frames > 0 ? Math.floor(frames) : 0;
  const ff = f % rate;
  const totalSeconds = Math.floor(f / rate);
  const ss = totalSeconds % 60;
  const mm = Math.floor(totalSeconds / 60) % 60;
  // SMPTE timecode wraps at 24 hours.
  const hh = Math.floor(totalSeconds / 3600) % 24;
  return `${two(hh)}:${two(mm)}:${two(ss)}:${two(ff)}`;
}

/**
 * Seconds (e.g. CasparCG's float32 `file/time`) to frames. CasparCG computes elapsed = frame / fps in double
 * and sends it as float32, so rounding recovers the frame number; flooring would lose a frame whenever the
 * float32 lands just below the exact value.
 */
export function secondsToFrames(seconds: number, fps: number): number {
  if (!Number.isFinite(seconds) || seconds <= 0) return 0;
  return Math.round(seconds * fps);
}

/**
 * Milliseconds (vMix `position`, integer ms truncated from the frame time) to frames. The small bias makes
 * a truncated 33.366 ms frame boundary at 29.97 still count as the frame it starts.
 */
export function msToFrames(ms: number, fps: number): number {
  if (!Number.isFinite(ms) || ms <= 0) return 0;
  return Math.floor((ms * fps) / 1000 + 0.05);
}

/** Normalise a device timecode to `HH:MM:SS:FF`; undefined when it is not a timecode at all. */
export function normaliseTimecode(text: string): string | undefined {
  const m = TC.exec(text.trim());
  if (!m) return undefined;
  return `${m[1]}:${m[2]}:${m[3]}:${m[4]}`;
}

/** Frames of a `HH:MM:SS:FF` timecode at a nominal rate; undefined when not a timecode. */
export function timecodeToFrames(text: string, fps: number): number | undefined {
  const m = TC.exec(text.trim());
  if (!m) return undefined;
  const rate = nominalRate(fps);
  return ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * rate + Number(m[4]);
}
