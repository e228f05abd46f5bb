/**
 * vMix (`http_mixer`) reducer: poll outcomes in, DevicePatches out.
 *   rec      `<recording>` is True (recording goes on through fade to black);
 *   stop     else fade to black is engaged (the program output is black, whatever is loaded);
 *   play     else the `<active>` input's state is `Running`;
 *   stop     else (Paused, Completed, no active input);
 *   offline  after `offlineAfterFailures` consecutive failed polls (default 3).
 * Timecode: the active input's `position` (ms) converted to frames at the configured rate; file name: its
 * title. Remaining time as the Companion vMix module computes it: (markOut || duration) − position.
 * Also published: the preview input, fade to black, recording, streaming, the overlay channels in use and
 * the tally of every input (domain/mixer-tally.ts); an offline mixer's inputs are `unknown`.
 */
import type { VmixSnapshot } from '../protocol/vmix.ts';
import type { DevicePatch } from './device-state.ts';
import { tallyFromSnapshot, unknownTally, type MixerInputTally, type TallyDigit } from './mixer-tally.ts';
import { framesToTimecode, msToFrames, ZERO_TIMECODE } from './timecode.ts';
import { resolveFrameRate, type FrameRateSource } from './video-format.ts';

export class VmixReducer {
  readonly #framerate: number;
  readonly #framerateSource: FrameRateSource;
  readonly #offlineAfter: number;
  #failures = 0;
  /** The reason the mixer was declared offline with, while it stays offline (cleared by a good poll). */
  #offlineReason: string | undefined;
  #inputs: MixerInputTally[] = [];

  /** vMix reports no video format: the rate is the configured one, else the default. */
  constructor(options: {
    framerate: number | undefined;
    defaultFramerate: number;
    offlineAfterFailures: number;
  }) {
    const r = resolveFrameRate({ configFps: options.framerate, defaultFps: options.defaultFramerate });
    this.#framerate = r.fps;
    this.#framerateSource = r.source;
    this.#offlineAfter = options.offlineAfterFailures;
  }

  get consecutiveFailures(): number {
    return this.#failures;
  }

  /** A document; `digits` = the last TCP tally push (received before this document was asked for). */
  onSnapshot(
    s: VmixSnapshot,
    tally: { digits?: readonly TallyDigit[]; source?: 'tcp' | 'http' } = {},
  ): DevicePatch {
    this.#failures = 0;
    this.#offlineReason = undefined;
    this.#inputs = tallyFromSnapshot(s, tally.digits);
    const input = s.activeInput;
    const fps = this.#framerate;
    const state = s.recording ? 'rec' : s.fadeToBlack ? 'stop' : input?.state === 'Running' ? 'play' : 'stop';
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
      framerateSource: this.#framerateSource,
      positionMs: input?.positionMs,
      durationMs: input && input.durationMs > 0 ? input.durationMs : undefined,
      remainingMs: input && end > 0 ? Math.max(0, end - input.positionMs) : undefined,
      loop: input?.loop,
      streaming: s.streaming,
      preview: s.previewInput ? { number: s.previewInput.number, title: s.previewInput.title } : undefined,
      fadeToBlack: s.fadeToBlack,
      overlays: s.overlays,
      recording: s.recording,
      inputs: this.#inputs,
      tallySource: tally.source ?? 'http',
    };
  }

  /** The mixer is not heard from (stale bound, dropped link): every input's tally is `unknown`. */
  tallyUnknown(): DevicePatch {
    this.#inputs = unknownTally(this.#inputs);
    return { inputs: this.#inputs };
  }

  /**
   * A failed poll; offline (with the reason) once the failures reach the bound, else nothing. Once offline,
   * a failure for the same reason changes nothing: the reason keeps the count the mixer was declared offline
   * at, so an absent mixer polled every 5 s is not a change on every output every 5 s (docs/TALLY.md); a
   * different reason (refused, then timeout) is a change.
   */
  onFailure(reason: string): DevicePatch | undefined {
    this.#failures++;
    if (this.#failures < this.#offlineAfter) return undefined;
    if (this.#offlineReason === reason) return undefined;
    this.#offlineReason = reason;
    this.#inputs = unknownTally(this.#inputs);
    return {
      state: 'offline',
      connected: false,
      reason: `${reason} (${this.#failures} failed polls)`,
      inputs: this.#inputs,
    };
  }
}
