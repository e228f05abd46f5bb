/**
 * vMix (`http_mixer`) reducer: poll outcomes in, DevicePatches out (reference §1.5, defect P4).
 *   rec      `<recording>` is True;
 *   play     else the `<active>` input's state is `Running`;
 *   stop     else (Paused, Completed, no active input);
 *   offline  after `offlineAfterFailures` consecutive failed polls (default 3).
 * Timecode: the active input's `position` (ms) converted to frames at the configured rate; file name: its
 * title. Remaining time as the Companion vMix module computes it: (markOut || duration) − position.
 */
import type { VmixSnapshot } from '../protocol/vmix.ts';
import { framesToTimecode, msToFrames, ZERO_TIMECODE } from '../protocol/timecode.ts';
import type { DevicePatch } from './device-state.ts';

export class VmixReducer {
  readonly #framerate: number;
  readonly #offlineAfter: number;
  #failures = 0;

  constructor(options: { framerate: number; offlineAfterFailures: number }) {
    this.#framerate = options.framerate;
    this.#offlineAfter = options.offlineAfterFailures;
  }

  get consecutiveFailures(): number {
    return this.#failures;
  }

  onSnapshot(s: VmixSnapshot): DevicePatch {
    this.#failures = 0;
    const input = s.activeInput;
    const fps = this.#framerate;
    const state = s.recording ? 'rec' : input?.state === 'Running' ? 'play' : 'stop';
    // No active input (an empty preset): connected, nothing on program. The clip ends at markOut when set.
    const markOut = input?.markOutMs ?? 0;
    const end = markOut > 0 ? markOut : (input?.durationMs ?? 0);
    return {
      state,
      connected: true,
      reason: undefined,
      timecode: input ? framesToTimecode(msToFrames(input.positionMs, fps), fps) : ZERO_TIMECODE,
      filename: input?.title ?? '',
      framerate: fps,
      positionMs: input?.positionMs,
      durationMs: input && input.durationMs > 0 ? input.durationMs : undefined,
      remainingMs: input && end > 0 ? Math.max(0, end - input.positionMs) : undefined,
      loop: input?.loop,
      streaming: s.streaming,
    };
  }

  /** A failed poll; offline (with the reason) once the failures reach the bound, else nothing. */
  onFailure(reason: string): DevicePatch | undefined {
    this.#failures++;
    if (this.#failures < this.#offlineAfter) return undefined;
    return { state: 'offline', connected: false, reason: `${reason} (${this.#failures} failed polls)` };
  }
}
