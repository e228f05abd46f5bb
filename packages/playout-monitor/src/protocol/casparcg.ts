/**
 * CasparCG OSC addresses (pure): one decoded OSC message in, one typed CasparCG event out.
 * Both address families are matched whatever the server version (docs/PROTOCOLS.md, "CasparCG"):
 *   2.0.7 / 2.1: /channel/C/stage/layer/L/{file/time, file/frame, file/fps, file/path, loop, paused}
 *        (modules/ffmpeg/producer/ffmpeg_producer.cpp and core/producer/layer.cpp at those tags);
 *        2.1 adds /channel/C/format (core/video_channel.cpp).
 *   2.2 to 2.5: /channel/C/stage/layer/L/foreground/{file/time, file/name, file/path, file/clip,
 *        file/streams/N/fps, loop, paused, producer, frames_left} (src/core/producer/layer.cpp,
 *        src/modules/ffmpeg/producer/av_producer.cpp), /channel/C/framerate; /channel/C/format from 2.4.
 * Argument types vary by version (int32 goes out as `h` on 2.0.x/2.1; doubles as `f`), so numbers are read
 * from any numeric tag.
 */
import { decoded, rejected, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';
import { oscBool, oscNumber, oscString, type OscMessage } from './osc.ts';

export type CasparField =
  | { field: 'time'; elapsed: number; total: number | undefined }
  | { field: 'frame'; frame: number; total: number | undefined }
  | { field: 'fileFps'; fps: number }
  /** 2.2+: one per stream of the file; audio and data streams report `0 0` (fps undefined). */
  | { field: 'streamFps'; stream: number; fps: number | undefined }
  | { field: 'path'; path: string }
  | { field: 'name'; name: string }
  | { field: 'clip'; start: number; duration: number }
  | { field: 'paused'; paused: boolean }
  | { field: 'loop'; loop: boolean }
  | { field: 'producer'; producer: string }
  | { field: 'framesLeft'; frames: number }
  | { field: 'channelFramerate'; fps: number }
  | { field: 'channelFormat'; format: string }
  /** Any other address under the layer (2.2+ sends the whole state each tick): liveness only. */
  | { field: 'layerOther' }
  /** Any other address under the channel (mixer, output, other layers): liveness only. */
  | { field: 'channelOther' };

export type CasparEvent = CasparField & {
  channel: number;
  /** The layer the message is about; undefined for channel-level messages. */
  layer: number | undefined;
  /** Which address family it came from (2.0/2.1 layout or 2.2+ `foreground`). */
  layout: '2.0' | '2.2' | undefined;
};

/** Why a message is not a CasparCG event: `address` is the OSC address it came on (for the malformed log). */
export interface CasparError extends DecodeError<'not-casparcg' | 'bad-arguments'> {
  address: string;
}

export type CasparParseResult = Decoded<CasparEvent, CasparError>;

function refuse(code: CasparError['code'], address: string): { ok: false; error: CasparError } {
  const message =
    code === 'not-casparcg' ? 'not a CasparCG channel address' : 'arguments do not fit the address';
  return rejected({ code, message, address });
}

const CHANNEL = /^\/channel\/(\d{1,4})(\/.*)?$/;
const LAYER = /^\/stage\/layer\/(-?\d{1,6})(\/.*)?$/;
const STREAM_FPS = /^\/foreground\/file\/streams\/(\d{1,4})\/fps$/;

/** A positive rate: `num den` or a single `num`; undefined when not a positive finite number. */
function rate(num: number | undefined, den: number | undefined): number | undefined {
  if (num === undefined || !Number.isFinite(num) || num <= 0) return undefined;
  if (den === undefined) return num;
  return Number.isFinite(den) && den > 0 ? num / den : undefined;
}

function layerField(rest: string, m: OscMessage): CasparField | 'bad' {
  const a0 = m.args[0];
  const a1 = m.args[1];
  // Strip the 2.2+ "foreground" level so both families share one table; background state is ignored.
  switch (rest) {
    case '/file/time':
    case '/foreground/file/time': {
      const elapsed = oscNumber(a0);
      if (elapsed === undefined || !Number.isFinite(elapsed)) return 'bad';
      const total = oscNumber(a1);
      return {
        field: 'time',
        elapsed,
        total: total !== undefined && Number.isFinite(total) ? total : undefined,
      };
    }
    case '/file/frame': {
      const frame = oscNumber(a0);
      if (frame === undefined || !Number.isFinite(frame)) return 'bad';
      return { field: 'frame', frame, total: oscNumber(a1) };
    }
    case '/file/fps': {
      const fps = rate(oscNumber(a0), oscNumber(a1));
      return fps === undefined ? 'bad' : { field: 'fileFps', fps };
    }
    case '/file/path':
    case '/foreground/file/path': {
      const path = oscString(a0);
      return path === undefined ? 'bad' : { field: 'path', path };
    }
    case '/foreground/file/name': {
      const name = oscString(a0);
      return name === undefined ? 'bad' : { field: 'name', name };
    }
    case '/foreground/file/clip': {
      const start = oscNumber(a0);
      const duration = oscNumber(a1);
      if (start === undefined || duration === undefined) return 'bad';
      return { field: 'clip', start, duration };
    }
    case '/paused':
    case '/foreground/paused': {
      const paused = oscBool(a0);
      return paused === undefined ? 'bad' : { field: 'paused', paused };
    }
    case '/loop':
    case '/foreground/loop': {
      const loop = oscBool(a0);
      return loop === undefined ? 'bad' : { field: 'loop', loop };
    }
    case '/foreground/producer': {
      const producer = oscString(a0);
      return producer === undefined ? 'bad' : { field: 'producer', producer };
    }
    case '/foreground/frames_left': {
      const frames = oscNumber(a0);
      return frames === undefined ? 'bad' : { field: 'framesLeft', frames };
    }
    default:
      {
        const stream = STREAM_FPS.exec(rest);
        if (stream) {
          const num = oscNumber(a0);
          const den = oscNumber(a1);
          if (num === undefined || den === undefined || !Number.isInteger(num) || !Number.isInteger(den))
            return 'bad';
          // av_guess_frame_rate gives 0/0 or 0/1 for audio and data streams: normal, not malformed.
          if (num === 0) return { field: 'streamFps', stream: Number(stream[1]), fps: undefined };
          const fps = rate(num, den);
          return fps === undefined ? 'bad' : { field: 'streamFps', stream: Number(stream[1]), fps };
        }
      }
      return { field: 'layerOther' };
  }
}

export function parseCasparMessage(m: OscMessage): CasparParseResult {
  const ch = CHANNEL.exec(m.address);
  if (!ch) return refuse('not-casparcg', m.address);
  const channel = Number(ch[1]);
  const rest = ch[2] ?? '';
  const ly = LAYER.exec(rest);
  if (ly) {
    const layer = Number(ly[1]);
    const sub = ly[2] ?? '';
    const f = layerField(sub, m);
    if (f === 'bad') return refuse('bad-arguments', m.address);
    const layout =
      sub.startsWith('/foreground/') || sub.startsWith('/background/')
        ? '2.2'
        : f.field === 'layerOther'
          ? undefined
          : '2.0';
    return decoded({ ...f, channel, layer, layout });
  }
  if (rest === '/framerate') {
    const fps = rate(oscNumber(m.args[0]), oscNumber(m.args[1]));
    if (fps === undefined) return refuse('bad-arguments', m.address);
    return decoded({ field: 'channelFramerate', fps, channel, layer: undefined, layout: '2.2' });
  }
  if (rest === '/format') {
    const format = oscString(m.args[0]);
    if (format === undefined) return refuse('bad-arguments', m.address);
    return decoded({ field: 'channelFormat', format, channel, layer: undefined, layout: undefined });
  }
  return decoded({ field: 'channelOther', channel, layer: undefined, layout: undefined });
}
