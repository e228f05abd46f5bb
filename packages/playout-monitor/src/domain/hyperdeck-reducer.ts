/**
 * HyperDeck (`tcp_recorder`) reducer: connection events, transport info (208 and merged partial 508),
 * display-timecode notifications (513), clip lists (205) and `107 timeline empty` in, DevicePatches out.
 *   play     status `play`;  rec  status `record`;
 *   stop     `preview`, `stopped`, `forward`, `rewind`, `jog`, `shuttle`, unknown, or connected with no data yet;
 *   offline  socket closed, `120 connection rejected`, a lost reply or the keep-alive timed out (with the reason).
 * Timecode: `display timecode` (from 513 when the deck pushes it, else 208/508), falling back to `timecode`;
 * file name from `clips get` by `clip id`. Frame rate: the deck's `video format`, else the configured or
 * default rate (video-format.ts).
 */
import type { ClipInfo, TransportInfo } from '../protocol/hyperdeck.ts';
import { remainingMs, type DevicePatch, type PlayState } from './device-state.ts';
import { normaliseTimecode, timecodeToFrames, ZERO_TIMECODE } from './timecode.ts';
import { hyperdeckFormat, resolveFrameRate } from './video-format.ts';

export function mapTransportStatus(status: string | undefined): PlayState {
  if (status === 'play') return 'play';
  if (status === 'record') return 'rec';
  return 'stop';
}

export class HyperdeckReducer {
  readonly #configuredFps: number | undefined;
  readonly #defaultFps: number;
  #transport: TransportInfo = {};
  #clips = new Map<number, ClipInfo>();

  constructor(options: { framerate: number | undefined; defaultFramerate: number }) {
    this.#configuredFps = options.framerate;
    this.#defaultFps = options.defaultFramerate;
  }

  frameRate(): ReturnType<typeof resolveFrameRate> {
    const format = this.#transport.videoFormat;
    return resolveFrameRate({
      deviceFormat: format !== undefined ? hyperdeckFormat(format) : undefined,
      configFps: this.#configuredFps,
      defaultFps: this.#defaultFps,
    });
  }

  /** The clip id under the play head and the slot, for the client's clip-list refresh decisions. */
  get clipKey(): { slotId: string | undefined; clipId: number | null | undefined; known: boolean } {
    const id = this.#transport.clipId;
    return { slotId: this.#transport.slotId, clipId: id, known: id == null || this.#clips.has(id) };
  }

  /** The `500 connection info` banner arrived: connected, `stop` until transport info says more. */
  onConnected(): DevicePatch {
    this.#transport = {};
    this.#clips = new Map();
    return this.derive();
  }

  /** 208 replaces the transport facts; 508 may carry only the changed keys, so it is merged. */
  onTransport(info: TransportInfo, merge: boolean): DevicePatch {
    this.#transport = merge ? { ...this.#transport, ...info } : info;
    return this.derive();
  }

  /** 513: the front-panel timecode, pushed by decks whose protocol offers it. */
  onDisplayTimecode(timecode: string): DevicePatch {
    this.#transport = { ...this.#transport, displayTimecode: timecode };
    return this.derive();
  }

  onClips(clips: ClipInfo[]): DevicePatch {
    this.#clips = new Map(clips.map((c) => [c.id, c]));
    return this.derive();
  }

  /** `107 timeline empty`: no clips (media removed or swapped): forget the clip list and the clip. */
  onTimelineEmpty(): DevicePatch {
    this.#clips = new Map();
    this.#transport = { ...this.#transport, clipId: null };
    return this.derive();
  }

  onDisconnected(reason: string): DevicePatch {
    return { state: 'offline', connected: false, reason };
  }

  derive(): DevicePatch {
    const t = this.#transport;
    const { fps, source } = this.frameRate();
    const raw = t.displayTimecode ?? t.timecode;
    const timecode = (raw !== undefined ? normaliseTimecode(raw) : undefined) ?? ZERO_TIMECODE;
    const clip = t.clipId != null ? this.#clips.get(t.clipId) : undefined;
    let positionMs: number | undefined;
    let durationMs: number | undefined;
    if (clip) {
      const dur = timecodeToFrames(clip.durationTimecode, fps);
      const start = timecodeToFrames(clip.startTimecode, fps);
      const tc = t.timecode !== undefined ? timecodeToFrames(t.timecode, fps) : undefined;
      if (dur !== undefined && dur > 0) durationMs = Math.round((dur * 1000) / fps);
      if (start !== undefined && tc !== undefined && tc >= start && dur !== undefined && tc - start <= dur) {
        positionMs = Math.round(((tc - start) * 1000) / fps);
      }
    }
    return {
      state: mapTransportStatus(t.status),
      connected: true,
      reason: undefined,
      timecode,
      filename: clip?.name ?? '',
      framerate: fps,
      framerateSource: source,
      positionMs,
      durationMs,
      remainingMs: remainingMs(positionMs, durationMs),
      loop: t.loop,
    };
  }
}
