/**
 * Timecode (domain logic, pure). One format everywhere: `HH:MM:SS:FF`, always with `:`, even for
 * drop-frame rates. Non-integer rates (29.97, 59.94, 23.976) count frames at the nominal integer rate
 * (non-drop), as a non-drop timecode generator does; the HyperDeck protocol also sends non-drop timecode.
 */
import { MAX_FPS } from './video-format.ts';

export const ZERO_TIMECODE = '00:00:00:00';

const TC = /^(\d{2}):(\d{2}):(\d{2})[:;.](\d{2})$/;

function two(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** The integer frame count per timecode second for a (possibly fractional) rate. */
export function nominalRate(fps: number): number {
  if (!Number.isFinite(fps) || fps <= 0) return 25;
  return Math.min(MAX_FPS, Math.max(1, Math.round(fps)));
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
 * Seconds (CasparCG's float32 `file/time`) to whole frames. CasparCG computes elapsed = ticks / rate in
 * double and sends it as float32, so the product can land just below a whole frame: a bias of a quarter
 * frame recovers it. Where the server counts fields (interlaced channels from 2.2 on), the odd field lands
 * half a frame in and belongs to the frame it started, so the bias must stay under a half.
 */
export function secondsToFrames(seconds: number, fps: number): number {
  if (!Number.isFinite(seconds) || seconds <= 0) return 0;
  return Math.floor(seconds * fps + 0.25);
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
