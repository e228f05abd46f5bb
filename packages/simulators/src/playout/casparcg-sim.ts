/**
 * CasparCG OSC sender simulator: a real UDP peer sending, for one channel and layer, what a CasparCG server
 * of a given version sends every channel tick (docs/PROTOCOLS.md, "CasparCG", with the source files):
 *   '2.0'  2.0.7: the layer sends `/paused T|F` every tick, also after STOP (its empty producer sends
 *          nothing); the ffmpeg producer sends `/profiler/time ff`, `/file/time ff`, `/file/frame hh`,
 *          `/file/fps f`, `/file/path s`, `/loop T|F` on every frame it renders (none while paused); the
 *          mixer sends audio levels; int32 values go out as `h`; messages coalesced per path and packed
 *          into bundles with timetag 1 ("immediately"), split below 508 bytes.
 *   '2.1'  as 2.0.7, plus `/channel/C/format s` and `/channel/C/profiler/time` every tick.
 *   '2.2', '2.3'  the whole channel state each tick, keys sorted: `/channel/C/framerate ii` (the field rate
 *          on interlaced channels: 1080i5000 → 50 1), `/channel/C/mixer/audio/volume i…`,
 *          `…/background/producer`, `…/foreground/{file/clip, file/name, file/path, file/streams/N/fps,
 *          file/time, loop, paused, producer}` with one video stream (`25 1`) and one audio stream (`0 0`);
 *          no `/format`. Bundles with a counter timetag, filled while under 2048 bytes. Interlaced channels
 *          tick once per field.
 *   '2.4'  as 2.3, plus `/channel/C/format s` and `…/output/port/0/consumer s`; `framerate` is the frame rate
 *          × field count; the channel ticks once per frame.
 * Scriptable: play (with a start frame), pause, resume, stop, clear (the layer goes quiet), offline (stops
 * sending), online, malformed datagrams.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIP } from 'node:net';
import { casparcgFormat, type VideoFormat } from '@broadcast-ops/playout-monitor/domain';
import {
  encodeOsc,
  oscBundle,
  oscMessage,
  type OscArg,
  type OscMessage,
} from '@broadcast-ops/playout-monitor/protocol';

export type CasparLayout = '2.0' | '2.1' | '2.2' | '2.3' | '2.4';
export const CASPAR_LAYOUTS: readonly CasparLayout[] = ['2.0', '2.1', '2.2', '2.3', '2.4'];

export interface CasparSimOptions {
  /** Where the monitor listens. */
  targetHost: string;
  targetPort: number;
  /** Source address to send from (several simulated servers on loopback: 127.0.0.2, 127.0.0.3, …). */
  sourceAddress?: string;
  layout?: CasparLayout;
  /** The channel's video-mode (`1080i5000`, `1080p5000`, `720p5994`, …). Default from `fps`, else 1080p5000. */
  videoFormat?: string;
  /** Shortcut for a progressive format at this rate (`1080p<fps×100>`). */
  fps?: number;
  channel?: number;
  layer?: number;
  mediaFolder?: string;
}

interface Clip {
  name: string;
  /** Position and length in the producer's time units (frames, or fields where the server counts fields). */
  units: number;
  totalUnits: number;
  paused: boolean;
  loop: boolean;
  producer: 'ffmpeg' | 'empty';
}

export type CasparMalformedKind =
  'garbage' | 'truncated' | 'unknown-tag' | 'bad-arguments' | 'oversized-element';

const f = (value: number): OscArg => ({ type: 'f', value });
const s = (value: string): OscArg => ({ type: 's', value });
const b = (value: boolean): OscArg => ({ type: value ? 'T' : 'F' });

export class CasparcgSimulator {
  readonly layout: CasparLayout;
  readonly format: VideoFormat;
  /** Frames per second of the channel. */
  readonly fps: number;
  readonly channel: number;
  readonly layer: number;
  /** Channel ticks (OSC bundle sets) per second, and producer time units per second. */
  readonly tickRate: number;
  readonly unitRate: number;
  readonly #o: CasparSimOptions;
  #socket: Socket | undefined;
  #timer: NodeJS.Timeout | undefined;
  #clip: Clip | undefined;
  #sending = true;
  #tickCount = 0n;
  #startedAt = 0;
  #ticksSent = 0;
  #datagramsSent = 0;
  /** The layer exists in the stage (PLAY/LOAD made it; CLEAR removes it). */
  #layerExists = false;

  constructor(options: CasparSimOptions) {
    this.#o = options;
    this.layout = options.layout ?? '2.3';
    const name = options.videoFormat ?? `1080p${Math.round((options.fps ?? 50) * 100)}`;
    const format = casparcgFormat(name);
    if (!format) throw new Error(`not a CasparCG video-mode: ${name}`);
    this.format = format;
    this.fps = format.fps;
    this.channel = options.channel ?? 1;
    this.layer = options.layer ?? 10;
    const fieldRate = format.interlaced ? format.fps * 2 : format.fps;
    const old = this.layout === '2.0' || this.layout === '2.1';
    // 2.2/2.3 run interlaced channels at the field rate; 2.4 ticks per frame but counts fields.
    this.tickRate = old || this.layout === '2.4' ? format.fps : fieldRate;
    this.unitRate = old ? format.fps : fieldRate;
  }

  get datagramsSent(): number {
    return this.#datagramsSent;
  }

  /** The current frame of the loaded clip (what the monitor should show once it settles). */
  get frame(): number {
    const c = this.#clip;
    return c ? Math.floor((c.units * this.fps) / this.unitRate + 1e-9) : 0;
  }

  async start(): Promise<void> {
    const family = isIP(this.#o.sourceAddress ?? this.#o.targetHost) === 6 ? 'udp6' : 'udp4';
    const socket = createSocket(family);
    this.#socket = socket;
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.bind(0, this.#o.sourceAddress, () => resolve()));
    this.#startedAt = performance.now();
    this.#ticksSent = 0;
    this.#schedule();
  }

  /** Drift-free tick clock: each timer callback sends every tick that is due. */
  #schedule(): void {
    const period = 1000 / this.tickRate;
    const due = this.#startedAt + (this.#ticksSent + 1) * period;
    this.#timer = setTimeout(
      () => {
        const now = performance.now();
        let n = 0;
        while (this.#startedAt + (this.#ticksSent + 1) * period <= now && n < 10) {
          this.#ticksSent++;
          n++;
          this.#tick();
        }
        if (n === 10) this.#ticksSent = Math.floor((now - this.#startedAt) / period); // fell behind: skip
        if (this.#socket) this.#schedule();
      },
      Math.max(0, due - performance.now()),
    );
  }

  play(name: string, options: { durationSec?: number; startFrame?: number; loop?: boolean } = {}): void {
    const perFrame = this.unitRate / this.fps;
    this.#clip = {
      name,
      totalUnits: Math.round((options.durationSec ?? 60) * this.unitRate),
      units: Math.round((options.startFrame ?? 0) * perFrame),
      paused: false,
      loop: options.loop ?? false,
      producer: 'ffmpeg',
    };
    this.#layerExists = true;
  }

  pause(): void {
    if (this.#clip) this.#clip.paused = true;
  }

  resume(): void {
    if (this.#clip) this.#clip.paused = false;
  }

  /** CasparCG STOP: the foreground producer becomes `empty`; the layer stays (2.0.7 keeps sending `/paused F`). */
  stop(): void {
    if (this.#clip) this.#clip = { ...this.#clip, producer: 'empty', units: 0, paused: false };
  }

  /** CasparCG CLEAR: the layer disappears from the stage and goes quiet (channel messages continue). */
  clear(): void {
    this.#clip = undefined;
    this.#layerExists = false;
  }

  /** Stop sending anything (server gone or OSC client removed). */
  offline(): void {
    this.#sending = false;
  }

  online(): void {
    this.#sending = true;
  }

  #tick(): void {
    const datagrams = this.nextTick();
    if (!this.#sending) return;
    for (const d of datagrams) this.#send(d);
  }

  /** Advance one channel tick and return what the server sends for it, without sending (for tests). */
  nextTick(): Uint8Array[] {
    this.#tickCount++;
    const clip = this.#clip;
    if (clip && clip.producer === 'ffmpeg' && !clip.paused) {
      const step = this.unitRate / this.tickRate;
      if (clip.units + step < clip.totalUnits) clip.units += step;
      else if (clip.loop) clip.units = 0;
    }
    return this.datagramsForFrame();
  }

  #send(d: Uint8Array): void {
    this.#datagramsSent++;
    this.#socket?.send(d, this.#o.targetPort, this.#o.targetHost);
  }

  /** The datagrams of the current tick (public for fixtures and tests). */
  datagramsForFrame(): Uint8Array[] {
    if (this.layout === '2.0' || this.layout === '2.1') return packBundles(this.#messages20(), 508, () => 1n);
    return packWhileUnder(this.#messages22(), 2048, this.#tickCount);
  }

  #messages20(): OscMessage[] {
    const c = `/channel/${this.channel}`;
    const l = `${c}/stage/layer/${this.layer}`;
    const h = (v: number): OscArg => ({ type: 'h', value: BigInt(v) });
    const period = 1 / this.fps;
    const out: OscMessage[] = [
      oscMessage(`${c}/mixer/audio/nb_channels`, [h(2)]),
      oscMessage(`${c}/mixer/audio/1/pFS`, [f(0.1)]),
      oscMessage(`${c}/mixer/audio/1/dBFS`, [f(-20)]),
      oscMessage(`${c}/mixer/audio/2/pFS`, [f(0.1)]),
      oscMessage(`${c}/mixer/audio/2/dBFS`, [f(-20)]),
      oscMessage(`${c}/output/consume_time`, [f(0.004)]),
    ];
    if (this.layout === '2.1') {
      out.push(
        oscMessage(`${c}/profiler/time`, [f(0.012), f(period)]),
        oscMessage(`${c}/format`, [s(this.format.name)]),
      );
    }
    const clip = this.#clip;
    if (this.#layerExists) {
      out.push(oscMessage(`${l}/paused`, [b(clip?.paused ?? false)]));
      if (this.layout === '2.1') out.push(oscMessage(`${l}/profiler/time`, [f(0.002), f(period)]));
    }
    if (clip && this.#layerExists && clip.producer === 'ffmpeg' && !clip.paused) {
      out.push(
        oscMessage(`${l}/profiler/time`, [f(0.003), f(period)]),
        oscMessage(`${l}/file/time`, [f(clip.units / this.unitRate), f(clip.totalUnits / this.unitRate)]),
        oscMessage(`${l}/file/frame`, [h(clip.units), h(clip.totalUnits)]),
        oscMessage(`${l}/file/fps`, [f(this.unitRate)]),
        oscMessage(`${l}/file/path`, [s(clip.name)]),
        oscMessage(`${l}/loop`, [b(clip.loop)]),
      );
    }
    return out;
  }

  #messages22(): OscMessage[] {
    const c = `/channel/${this.channel}`;
    const l = `${c}/stage/layer/${this.layer}`;
    const i = (value: number): OscArg => ({ type: 'i', value });
    const fieldRate = this.format.interlaced ? this.format.fps * 2 : this.format.fps;
    // framerate: 2.2/2.3 the format's time scale (fields for interlaced); 2.4 frames × field count. Both
    // give the field rate; the 1000/1001 rates as n/1001.
    const ntsc = Math.abs(fieldRate - Math.round(fieldRate)) > 0.001;
    const rate = ntsc ? [Math.round(fieldRate * 1.001) * 1000, 1001] : [Math.round(fieldRate), 1];
    const out: OscMessage[] = [
      oscMessage(`${c}/framerate`, [i(rate[0] ?? 50), i(rate[1] ?? 1)]),
      oscMessage(`${c}/mixer/audio/volume`, [i(12_345_678), i(12_000_000)]),
    ];
    if (this.layout === '2.4') {
      out.push(
        oscMessage(`${c}/format`, [s(this.format.name)]),
        oscMessage(`${c}/output/port/0/consumer`, [s('decklink')]),
      );
    }
    const clip = this.#clip;
    if (this.#layerExists) {
      out.push(oscMessage(`${l}/background/producer`, [s('empty')]));
      if (clip && clip.producer === 'ffmpeg') {
        const media = this.#o.mediaFolder ?? '/opt/casparcg/media/';
        const total = clip.totalUnits / this.unitRate;
        const video = ntsc ? [Math.round(this.fps * 1.001) * 1000, 1001] : [Math.round(this.fps), 1];
        out.push(
          oscMessage(`${l}/foreground/file/clip`, [f(0), f(total)]),
          oscMessage(`${l}/foreground/file/name`, [s(clip.name)]),
          oscMessage(`${l}/foreground/file/path`, [s(media + clip.name)]),
          oscMessage(`${l}/foreground/file/streams/0/fps`, [i(video[0] ?? 25), i(video[1] ?? 1)]),
          oscMessage(`${l}/foreground/file/streams/1/fps`, [i(0), i(0)]),
          oscMessage(`${l}/foreground/file/time`, [f(clip.units / this.unitRate), f(total)]),
          oscMessage(`${l}/foreground/loop`, [b(clip.loop)]),
          oscMessage(`${l}/foreground/paused`, [b(clip.paused)]),
          oscMessage(`${l}/foreground/producer`, [s('ffmpeg')]),
        );
      } else {
        out.push(
          oscMessage(`${l}/foreground/paused`, [b(false)]),
          oscMessage(`${l}/foreground/producer`, [s('empty')]),
        );
      }
    }
    // The server's state is a map sorted by address (boost flat_map of std::string).
    return out.sort((x, y) => (x.address < y.address ? -1 : x.address > y.address ? 1 : 0));
  }

  /** Send one malformed datagram of a kind (tests of the monitor's robustness). */
  sendMalformed(kind: CasparMalformedKind): void {
    const l = `/channel/${this.channel}/stage/layer/${this.layer}`;
    let d: Uint8Array;
    switch (kind) {
      case 'garbage':
        d = new TextEncoder().encode('this is not OSC at all!!');
        break;
      case 'truncated': {
        const full = encodeOsc(
          oscBundle([
            oscMessage(`${l}/file/time`, [
              { type: 'f', value: 1 },
              { type: 'f', value: 2 },
            ]),
          ]),
        );
        d = full.subarray(0, full.length - 4);
        break;
      }
      case 'unknown-tag': {
        const m = encodeOsc(oscMessage(`${l}/file/time`, [{ type: 'f', value: 1 }]));
        const comma = m.indexOf(0x2c);
        m[comma + 1] = 0x7a; // 'z'
        d = concatBundle([m], 1n);
        break;
      }
      case 'bad-arguments':
        d = encodeOsc(oscBundle([oscMessage(`${l}/foreground/file/time`, [{ type: 's', value: 'soon' }])]));
        break;
      case 'oversized-element': {
        const b = encodeOsc(oscBundle([oscMessage(`${l}/paused`, [{ type: 'T' }])]));
        new DataView(b.buffer, b.byteOffset).setInt32(16, 1_000_000);
        d = b;
        break;
      }
    }
    this.#send(d);
  }

  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    const s = this.#socket;
    this.#socket = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

function concatBundle(elements: Uint8Array[], timetag: bigint): Uint8Array {
  const head = encodeOsc(oscBundle([], timetag));
  let len = head.length;
  for (const e of elements) len += 4 + e.length;
  const out = new Uint8Array(len);
  out.set(head);
  let o = head.length;
  for (const e of elements) {
    new DataView(out.buffer).setInt32(o, e.length);
    out.set(e, o + 4);
    o += 4 + e.length;
  }
  return out;
}

/**
 * 2.2+ packing (src/protocol/osc/client.cpp): messages are added to a bundle while it is under `limit`
 * bytes, so a bundle may end a little over it; the timetag is the tick counter.
 */
export function packWhileUnder(messages: OscMessage[], limit: number, timetag: bigint): Uint8Array[] {
  const out: Uint8Array[] = [];
  let current: Uint8Array[] = [];
  let size = 16;
  for (const m of messages) {
    if (size >= limit) {
      out.push(concatBundle(current, timetag));
      current = [];
      size = 16;
    }
    const bytes = encodeOsc(m);
    current.push(bytes);
    size += 4 + bytes.length;
  }
  if (current.length > 0) out.push(concatBundle(current, timetag));
  return out;
}

/** 2.0.7 packing: flush before an element would reach `maxBytes` (a single oversized message goes alone). */
export function packBundles(messages: OscMessage[], maxBytes: number, timetag: () => bigint): Uint8Array[] {
  const out: Uint8Array[] = [];
  let current: Uint8Array[] = [];
  let size = 16;
  for (const m of messages) {
    const bytes = encodeOsc(m);
    if (current.length > 0 && size + 4 + bytes.length >= maxBytes) {
      out.push(concatBundle(current, timetag()));
      current = [];
      size = 16;
    }
    current.push(bytes);
    size += 4 + bytes.length;
  }
  if (current.length > 0) out.push(concatBundle(current, timetag()));
  return out;
}
