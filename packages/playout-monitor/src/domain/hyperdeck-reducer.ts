/**
 * HyperDeck (`tcp_recorder`) reducer: connection events, transport info (208 and merged partial 508) and
 * clip lists (205) in, DevicePatches out (reference §1.5, defects P5, P6, P13).
 *   play     status `play`;  rec  status `record`;
 *   stop     `preview`, `stopped`, `forward`, `rewind`, `jog`, `shuttle`, unknown, or connected with no data yet;
 *   offline  socket closed, `120 connection rejected`, or the keep-alive timed out (with the reason).
 * Timecode: `display timecode`, falling back to `timecode`; file name from `clips get` by `clip id`.
 */
import { hyperdeckFormatFps, type ClipInfo, type TransportInfo } from '../protocol/hyperdeck.ts';
import { normaliseTimecode, timecodeToFrames, ZERO_TIMECODE } from '../protocol/timecode.ts';
import { remainingMs, type DevicePatch, type PlayState } from './device-state.ts';

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

  get framerate(): number {
    if (this.#configuredFps !== undefined) return this.#configuredFps;
    const fromFormat = this.#transport.videoFormat
      ? hyperdeckFormatFps(this.#transport.videoFormat)
      : undefined;
    return fromFormat ?? this.#defaultFps;
  }

  /** The `500 connection info` banner arrived: connected, `stop` until transport info says more (P13). */
  onConnected(): DevicePatch {
    this.#transport = {};
    return this.derive();
  }

  /**
   * 208 replaces the transport facts; 508 may carry only the changed keys, so it is merged.
   * Returns whether the clip or slot changed (then the clip list should be fetched again).
   */
  onTransport(info: TransportInfo, merge: boolean): { patch: DevicePatch; clipChanged: boolean } {
    const before = this.#transport;
    this.#transport = merge ? { ...before, ...info } : info;
    const clipChanged =
      this.#transport.clipId !== before.clipId ||
      this.#transport.slotId !== before.slotId ||
      (this.#transport.clipId != null && !this.#clips.has(this.#transport.clipId));
    return { patch: this.derive(), clipChanged };
  }

  onClips(clips: ClipInfo[]): DevicePatch {
    this.#clips = new Map(clips.map((c) => [c.id, c]));
    return this.derive();
  }

  onDisconnected(reason: string): DevicePatch {
    return { state: 'offline', connected: false, reason };
  }

  derive(): DevicePatch {
    const t = this.#transport;
    const fps = this.framerate;
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
      positionMs,
      durationMs,
      remainingMs: remainingMs(positionMs, durationMs),
      loop: t.loop,
    };
  }
}
