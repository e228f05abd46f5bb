/**
 * CasparCG OSC addresses (pure): one decoded OSC message in, one typed CasparCG event out.
 * Both address families are matched whatever the server version (reference §3.1, defect P2):
 *   2.0.4–2.0.7 / 2.1: /channel/C/stage/layer/L/{file/time, file/frame, file/fps, file/path, paused, loop}
 *   2.2+ (2.3 LTS, 2.4, 2.5): /channel/C/stage/layer/L/foreground/{file/time, file/name, file/path,
 *        file/clip, file/streams/N/fps, paused, loop, producer, frames_left}, /channel/C/framerate, .../format
 * Argument types vary by version (int32 arrives as `h` on 2.0.x; doubles as `f`), so numbers are read
 * from any numeric tag.
 */
import { oscBool, oscNumber, oscString, type OscMessage } from './osc.ts';
import { formatFrameRate, MAX_FPS } from './timecode.ts';

export type CasparField =
  | { field: 'time'; elapsed: number; total: number | undefined }
  | { field: 'frame'; frame: number; total: number | undefined }
  | { field: 'fileFps'; fps: number }
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

export type CasparParseResult =
  { ok: true; event: CasparEvent } | { ok: false; reason: 'not-casparcg' | 'bad-arguments'; address: string };

const CHANNEL = /^\/channel\/(\d{1,4})(\/.*)?$/;
const LAYER = /^\/stage\/layer\/(-?\d{1,6})(\/.*)?$/;
const STREAM_FPS = /^\/foreground\/file\/streams\/\d+\/fps$/;

function rate(num: number | undefined, den: number | undefined): number | undefined {
  if (num === undefined || !Number.isFinite(num) || num <= 0) return undefined;
  // "Accept a single framerate value as well as the pair"; anything outside 1..100 fps is refused.
  const fps = den === undefined ? num : Number.isFinite(den) && den > 0 ? num / den : undefined;
  return fps !== undefined && fps >= 1 && fps <= MAX_FPS ? fps : undefined;
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
      if (STREAM_FPS.test(rest)) {
        const fps = rate(oscNumber(a0), oscNumber(a1));
        return fps === undefined ? 'bad' : { field: 'fileFps', fps };
      }
      return { field: 'layerOther' };
  }
}

export function parseCasparMessage(m: OscMessage): CasparParseResult {
  const ch = CHANNEL.exec(m.address);
  if (!ch) return { ok: false, reason: 'not-casparcg', address: m.address };
  const channel = Number(ch[1]);
  const rest = ch[2] ?? '';
  const ly = LAYER.exec(rest);
  if (ly) {
    const layer = Number(ly[1]);
    const sub = ly[2] ?? '';
    const f = layerField(sub, m);
    if (f === 'bad') return { ok: false, reason: 'bad-arguments', address: m.address };
    const layout =
      sub.startsWith('/foreground/') || sub.startsWith('/background/')
        ? '2.2'
        : f.field === 'layerOther'
          ? undefined
          : '2.0';
    return { ok: true, event: { ...f, channel, layer, layout } };
  }
  if (rest === '/framerate') {
    const fps = rate(oscNumber(m.args[0]), oscNumber(m.args[1]));
    if (fps === undefined) return { ok: false, reason: 'bad-arguments', address: m.address };
    return { ok: true, event: { field: 'channelFramerate', fps, channel, layer: undefined, layout: '2.2' } };
  }
  if (rest === '/format') {
    const format = oscString(m.args[0]);
    if (format === undefined) return { ok: false, reason: 'bad-arguments', address: m.address };
    return {
      ok: true,
      event: { field: 'channelFormat', format, channel, layer: undefined, layout: undefined },
    };
  }
  return { ok: true, event: { field: 'channelOther', channel, layer: undefined, layout: undefined } };
}

/** CasparCG video format names (`1080i5000`, `720p5994`, `PAL`, …) to frames per second. */
export function casparFormatFps(format: string): number | undefined {
  const f = format.toLowerCase();
  if (f === 'pal') return 25;
  if (f === 'ntsc') return 30000 / 1001;
  const m = /^\d+([pi])(\d{4})$/.exec(f);
  if (!m) return undefined;
  return formatFrameRate(Number(m[2]) / 100, m[1] === 'i');
}
