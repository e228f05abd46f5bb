/**
 * CasparCG (`osc_player`) reducer: CasparCG OSC events for one configured server in, a DevicePatch out.
 * State mapping (reference §1.5, documented in the README):
 *   offline  no OSC datagram from the server's IP for `staleTimeoutMs` (default 5 s);
 *   play     a producer is loaded, not paused, and `file/time` advanced within `advanceWindowMs`;
 *   stop     paused, `empty` producer, time not advancing (end of a clip), or the watched layer quiet for
 *            `layerQuietMs` while the server still sends (a cleared layer simply goes quiet);
 *   rec      never (CasparCG is a player here).
 * Time is the injected monotonic clock, in ms; nothing here reads the system time.
 */
import type { CasparEvent } from '../protocol/casparcg.ts';
import { casparFormatFps } from '../protocol/casparcg.ts';
import { framesToTimecode, secondsToFrames, ZERO_TIMECODE } from '../protocol/timecode.ts';
import { remainingMs, type DevicePatch } from './device-state.ts';

export interface CasparReducerOptions {
  channel: number;
  layer: number;
  /** Per-server configured frame rate; when absent the channel's reported rate, then the default. */
  framerate: number | undefined;
  defaultFramerate: number;
  staleTimeoutMs: number;
  layerQuietMs: number;
  advanceWindowMs: number;
}

interface LayerFacts {
  paused: boolean | undefined;
  producer: string | undefined;
  name: string | undefined;
  path: string | undefined;
  elapsed: number | undefined;
  total: number | undefined;
  loop: boolean | undefined;
  lastAdvanceAt: number;
}

function emptyLayer(): LayerFacts {
  return {
    paused: undefined,
    producer: undefined,
    name: undefined,
    path: undefined,
    elapsed: undefined,
    total: undefined,
    loop: undefined,
    lastAdvanceAt: -Infinity,
  };
}

export class CasparcgReducer {
  readonly #o: CasparReducerOptions;
  #lastDatagramAt: number | undefined;
  #lastLayerAt: number | undefined;
  #channelFps: number | undefined;
  #layer: LayerFacts = emptyLayer();

  constructor(options: CasparReducerOptions) {
    this.#o = options;
  }

  /** A datagram arrived from this server's address (liveness, whatever its content). */
  onDatagram(now: number): void {
    this.#lastDatagramAt = now;
  }

  /** One event from this server's address; only the watched channel and layer count (defect P3). */
  onEvent(ev: CasparEvent, now: number): void {
    if (ev.channel !== this.#o.channel) return;
    if (ev.layer === undefined) {
      if (ev.field === 'channelFramerate') this.#channelFps = ev.fps;
      else if (ev.field === 'channelFormat')
        this.#channelFps = casparFormatFps(ev.format) ?? this.#channelFps;
      return;
    }
    if (ev.layer !== this.#o.layer) return;
    this.#lastLayerAt = now;
    const l = this.#layer;
    switch (ev.field) {
      case 'time':
        if (l.elapsed !== ev.elapsed) l.lastAdvanceAt = now;
        l.elapsed = ev.elapsed;
        if (ev.total !== undefined) l.total = ev.total;
        break;
      case 'path':
        l.path = ev.path;
        break;
      case 'name':
        l.name = ev.name;
        break;
      case 'paused':
        l.paused = ev.paused;
        break;
      case 'loop':
        l.loop = ev.loop;
        break;
      case 'producer':
        l.producer = ev.producer;
        if (ev.producer === 'empty') this.#layer = { ...emptyLayer(), producer: 'empty' };
        break;
      default:
        break;
    }
  }

  get framerate(): number {
    return this.#o.framerate ?? this.#channelFps ?? this.#o.defaultFramerate;
  }

  derive(now: number): DevicePatch {
    const framerate = this.framerate;
    if (this.#lastDatagramAt === undefined || now - this.#lastDatagramAt > this.#o.staleTimeoutMs) {
      return {
        state: 'offline',
        connected: false,
        reason:
          this.#lastDatagramAt === undefined
            ? 'no OSC received yet'
            : `no OSC for ${Math.round(this.#o.staleTimeoutMs / 1000)} s`,
        framerate,
      };
    }
    const l = this.#layer;
    const quiet = this.#lastLayerAt === undefined || now - this.#lastLayerAt > this.#o.layerQuietMs;
    if (quiet || l.producer === 'empty') {
      if (quiet) this.#layer = emptyLayer();
      return {
        state: 'stop',
        connected: true,
        reason: undefined,
        framerate,
        timecode: ZERO_TIMECODE,
        filename: '',
        positionMs: undefined,
        durationMs: undefined,
        remainingMs: undefined,
        loop: undefined,
      };
    }
    const advancing = now - l.lastAdvanceAt <= this.#o.advanceWindowMs;
    const playing = l.paused !== true && advancing && l.elapsed !== undefined;
    const elapsed = l.elapsed ?? 0;
    const positionMs = l.elapsed === undefined ? undefined : Math.round(elapsed * 1000);
    const durationMs = l.total !== undefined && l.total > 0 ? Math.round(l.total * 1000) : undefined;
    return {
      state: playing ? 'play' : 'stop',
      connected: true,
      reason: undefined,
      framerate,
      timecode: framesToTimecode(secondsToFrames(elapsed, framerate), framerate),
      filename: l.name ?? l.path ?? '',
      positionMs,
      durationMs,
      remainingMs: remainingMs(positionMs, durationMs),
      loop: l.loop,
    };
  }
}
