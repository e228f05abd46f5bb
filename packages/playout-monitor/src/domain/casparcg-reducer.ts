/**
 * CasparCG (`osc_player`) reducer: well-formed CasparCG OSC events for one configured server, channel and
 * layer in; a DevicePatch out. `derive(now)` is pure: it reads the facts gathered by `onEvent` and never
 * changes them. State mapping (README "State mapping", facts in docs/PROTOCOLS.md):
 *
 *   offline  no well-formed CasparCG message from the server for `staleTimeoutMs`. The last state, file
 *            name and timecode stay as they were up to that moment and through offline.
 *   stop     paused; `empty` foreground producer (STOP on 2.2+); on 2.0.7/2.1 the layer still sends
 *            `/paused F` but its producer sends no file messages (STOP); the file time not advancing (end of
 *            a clip without loop); the layer quiet (CLEAR) — each judged only against the server's own
 *            traffic, never against the wall clock, so a server that goes silent mid-play is not turned
 *            into `stop` on its way to `offline`;
 *   play     a file loaded, not paused, and its time advanced within `advanceWindowMs` of the server's
 *            latest message;
 *   rec      never (CasparCG is a player here).
 *
 * Time is the injected monotonic clock in ms; nothing here reads the system time.
 */
import type { CasparEvent } from '../protocol/casparcg.ts';
import { remainingMs, type DevicePatch } from './device-state.ts';
import { framesToTimecode, secondsToFrames, ZERO_TIMECODE } from './timecode.ts';
import { casparcgFormat, rateFps, resolveFrameRate, type VideoFormat } from './video-format.ts';

export interface CasparReducerOptions {
  channel: number;
  layer: number;
  /** Configured `framerate` (frames per second). */
  framerate: number | undefined;
  /** Configured `videoFormat` (the channel's video-mode, e.g. `1080i5000`), already checked. */
  videoFormat: string | undefined;
  defaultFramerate: number;
  staleTimeoutMs: number;
  layerQuietMs: number;
  advanceWindowMs: number;
}

interface FileFacts {
  name: string | undefined;
  path: string | undefined;
  elapsed: number | undefined;
  total: number | undefined;
  loop: boolean | undefined;
  /** Server time (ms) of the last file message, and of the last time `elapsed` changed. */
  lastFileAt: number;
  lastAdvanceAt: number;
}

function noFile(): FileFacts {
  return {
    name: undefined,
    path: undefined,
    elapsed: undefined,
    total: undefined,
    loop: undefined,
    lastFileAt: -Infinity,
    lastAdvanceAt: -Infinity,
  };
}

export class CasparcgReducer {
  readonly #o: CasparReducerOptions;
  readonly #configFormat: VideoFormat | undefined;
  /** Time of the latest well-formed CasparCG message from this server (any channel). */
  #lastServerAt: number | undefined;
  /** Time of the latest message about the watched layer. */
  #lastLayerAt = -Infinity;
  #channelFormat: VideoFormat | undefined;
  #channelFps: number | undefined;
  #paused: boolean | undefined;
  #producer: string | undefined;
  #file: FileFacts = noFile();

  constructor(options: CasparReducerOptions) {
    this.#o = options;
    this.#configFormat = options.videoFormat !== undefined ? casparcgFormat(options.videoFormat) : undefined;
  }

  /** One well-formed CasparCG message from this server's address (the only thing that counts as liveness). */
  onEvent(ev: CasparEvent, now: number): void {
    this.#lastServerAt = now;
    if (ev.channel !== this.#o.channel) return;
    if (ev.layer === undefined) {
      if (ev.field === 'channelFramerate') this.#channelFps = rateFps(ev.fps);
      else if (ev.field === 'channelFormat')
        this.#channelFormat = casparcgFormat(ev.format) ?? this.#channelFormat;
      return;
    }
    if (ev.layer !== this.#o.layer) return;
    this.#lastLayerAt = now;
    const f = this.#file;
    switch (ev.field) {
      case 'time':
        if (f.elapsed !== ev.elapsed) f.lastAdvanceAt = now;
        f.elapsed = ev.elapsed;
        if (ev.total !== undefined) f.total = ev.total;
        f.lastFileAt = now;
        break;
      case 'frame':
        f.lastFileAt = now;
        break;
      case 'path':
        f.path = ev.path;
        f.lastFileAt = now;
        break;
      case 'name':
        f.name = ev.name;
        f.lastFileAt = now;
        break;
      case 'paused':
        this.#paused = ev.paused;
        break;
      case 'loop':
        f.loop = ev.loop;
        break;
      case 'producer':
        this.#producer = ev.producer;
        // 2.2+ sends the producer after the file keys of the same tick (the state map is sorted), so an
        // `empty` producer means the file keys are gone from this tick on.
        if (ev.producer === 'empty') this.#file = noFile();
        break;
      default:
        break;
    }
  }

  /** The frame rate and where it came from (one source of truth per channel, see video-format.ts). */
  frameRate(): ReturnType<typeof resolveFrameRate> {
    return resolveFrameRate({
      deviceFormat: this.#channelFormat,
      configFormat: this.#configFormat,
      configFps: this.#o.framerate,
      deviceFps: this.#channelFps,
      defaultFps: this.#o.defaultFramerate,
    });
  }

  /**
   * Whether `derive` can still change with time alone: only the stale rule reads `now` (every other rule
   * compares with the server's latest message), so once the server has been silent past `staleTimeoutMs`,
   * or before it was ever heard, nothing changes until its next message. The io layer's tick sleeps then.
   */
  awaitsSilence(now: number): boolean {
    return this.#lastServerAt !== undefined && now - this.#lastServerAt <= this.#o.staleTimeoutMs;
  }

  derive(now: number): DevicePatch {
    const { fps, source } = this.frameRate();
    const server = this.#lastServerAt;
    if (server === undefined) {
      return { state: 'offline', connected: false, reason: 'no OSC received yet', framerate: fps };
    }
    if (now - server > this.#o.staleTimeoutMs) {
      // Timecode and file name are left as they were: the store keeps them through offline.
      return {
        state: 'offline',
        connected: false,
        reason: `no OSC for ${Math.round(this.#o.staleTimeoutMs / 1000)} s`,
        framerate: fps,
      };
    }
    const common = { connected: true, reason: undefined, framerate: fps, framerateSource: source };
    // Every rule below compares with the server's latest message, not with `now`.
    const f = this.#file;
    const layerGone = server - this.#lastLayerAt > this.#o.layerQuietMs;
    const fileGone = server - f.lastFileAt > this.#o.layerQuietMs;
    const hasFile = f.elapsed !== undefined || f.name !== undefined || f.path !== undefined;
    const empty =
      layerGone ||
      this.#producer === 'empty' ||
      !hasFile ||
      // 2.0.7/2.1 after STOP: the layer still sends `/paused F`, the empty producer sends nothing.
      (fileGone && this.#paused !== true);
    if (empty) {
      return {
        ...common,
        state: 'stop',
        timecode: ZERO_TIMECODE,
        filename: '',
        positionMs: undefined,
        durationMs: undefined,
        remainingMs: undefined,
        loop: undefined,
      };
    }
    const advancing = server - f.lastAdvanceAt <= this.#o.advanceWindowMs;
    const playing = this.#paused !== true && advancing && f.elapsed !== undefined;
    const elapsed = f.elapsed ?? 0;
    const positionMs = f.elapsed === undefined ? undefined : Math.round(elapsed * 1000);
    const durationMs = f.total !== undefined && f.total > 0 ? Math.round(f.total * 1000) : undefined;
    return {
      ...common,
      state: playing ? 'play' : 'stop',
      timecode: framesToTimecode(secondsToFrames(elapsed, fps), fps),
      filename: f.name ?? f.path ?? '',
      positionMs,
      durationMs,
      remainingMs: remainingMs(positionMs, durationMs),
      loop: f.loop,
    };
  }
}
