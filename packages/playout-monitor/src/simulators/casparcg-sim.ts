/**
 * CasparCG OSC sender simulator: a real UDP peer sending what CasparCG sends every channel frame
 * (reference §3.1), in either address layout:
 *   '2.0'  2.0.4–2.0.7/2.1: `…/file/time ff`, `…/file/frame hh`, `…/file/fps f`, `…/file/path s`,
 *          `…/paused T|F`, `…/loop T|F`, int32 values as `h`; bundles with timetag "immediate" split below
 *          508 bytes (2.0.7 `protocol/osc/client.cpp`).
 *   '2.2'  2.2+/2.3 LTS: the whole channel state each tick: `/channel/C/framerate ii`, `/channel/C/format s`,
 *          `…/foreground/{file/name,file/path,file/time,file/clip,file/streams/0/fps,loop,paused,producer}`,
 *          `…/background/producer`; bundles with a counter timetag, each under 2048 bytes.
 * Scriptable: play (with a start frame), pause, resume, stop (empty producer), clear (layer goes quiet),
 * offline (stops sending), online, malformed datagrams.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIP } from 'node:net';
import { encodeOsc, oscBundle, oscMessage, type OscArg, type OscMessage } from '../protocol/osc.ts';

export type CasparLayout = '2.0' | '2.2';

export interface CasparSimOptions {
  /** Where the monitor listens. */
  targetHost: string;
  targetPort: number;
  /** Source address to send from (several simulated servers on loopback: 127.0.0.2, 127.0.0.3, …). */
  sourceAddress?: string;
  layout?: CasparLayout;
  fps?: number;
  channel?: number;
  layer?: number;
  mediaFolder?: string;
}

interface Clip {
  name: string;
  totalFrames: number;
  frame: number;
  paused: boolean;
  loop: boolean;
  producer: 'ffmpeg' | 'empty';
}

export type CasparMalformedKind =
  'garbage' | 'truncated' | 'unknown-tag' | 'bad-arguments' | 'oversized-element';

export class CasparcgSimulator {
  readonly layout: CasparLayout;
  readonly fps: number;
  readonly channel: number;
  readonly layer: number;
  readonly #o: CasparSimOptions;
  #socket: Socket | undefined;
  #timer: NodeJS.Timeout | undefined;
  #clip: Clip | undefined;
  #sending = true;
  #tickCount = 0n;
  #startedAt = 0;
  #framesSent = 0;
  #datagramsSent = 0;
  #layerQuiet = true;

  constructor(options: CasparSimOptions) {
    this.#o = options;
    this.layout = options.layout ?? '2.2';
    this.fps = options.fps ?? 50;
    this.channel = options.channel ?? 1;
    this.layer = options.layer ?? 10;
  }

  get datagramsSent(): number {
    return this.#datagramsSent;
  }

  /** The current frame of the loaded clip (what the monitor should show once it settles). */
  get frame(): number {
    return this.#clip?.frame ?? 0;
  }

  async start(): Promise<void> {
    const family = isIP(this.#o.sourceAddress ?? this.#o.targetHost) === 6 ? 'udp6' : 'udp4';
    const socket = createSocket(family);
    this.#socket = socket;
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.bind(0, this.#o.sourceAddress, () => resolve()));
    this.#startedAt = performance.now();
    this.#framesSent = 0;
    this.#schedule();
  }

  /** Drift-free frame clock: each timer callback sends every frame that is due. */
  #schedule(): void {
    const period = 1000 / this.fps;
    const due = this.#startedAt + (this.#framesSent + 1) * period;
    this.#timer = setTimeout(
      () => {
        const now = performance.now();
        let n = 0;
        while (this.#startedAt + (this.#framesSent + 1) * period <= now && n < 10) {
          this.#framesSent++;
          n++;
          this.#tick();
        }
        if (n === 10) this.#framesSent = Math.floor((now - this.#startedAt) / period); // fell behind: skip
        if (this.#socket) this.#schedule();
      },
      Math.max(0, due - performance.now()),
    );
  }

  play(name: string, options: { durationSec?: number; startFrame?: number; loop?: boolean } = {}): void {
    this.#clip = {
      name,
      totalFrames: Math.round((options.durationSec ?? 60) * this.fps),
      frame: options.startFrame ?? 0,
      paused: false,
      loop: options.loop ?? false,
      producer: 'ffmpeg',
    };
    this.#layerQuiet = false;
  }

  pause(): void {
    if (this.#clip) this.#clip.paused = true;
  }

  resume(): void {
    if (this.#clip) this.#clip.paused = false;
  }

  /** CasparCG STOP: the foreground producer becomes `empty` (2.2+); on 2.0 the layer goes quiet. */
  stop(): void {
    if (this.#clip) this.#clip = { ...this.#clip, producer: 'empty', frame: 0 };
    if (this.layout === '2.0') this.#layerQuiet = true;
  }

  /** CasparCG CLEAR: the layer disappears from the state and goes quiet (channel messages continue). */
  clear(): void {
    this.#clip = undefined;
    this.#layerQuiet = true;
  }

  /** Stop sending anything (server gone or OSC client removed). */
  offline(): void {
    this.#sending = false;
  }

  online(): void {
    this.#sending = true;
  }

  #tick(): void {
    this.#tickCount++;
    const clip = this.#clip;
    if (clip && clip.producer === 'ffmpeg' && !clip.paused) {
      if (clip.frame + 1 < clip.totalFrames) clip.frame++;
      else if (clip.loop) clip.frame = 0;
    }
    if (!this.#sending) return;
    for (const d of this.datagramsForFrame()) this.#send(d);
  }

  #send(d: Uint8Array): void {
    this.#datagramsSent++;
    this.#socket?.send(d, this.#o.targetPort, this.#o.targetHost);
  }

  /** The datagrams of the current frame (public for fixtures and tests). */
  datagramsForFrame(): Uint8Array[] {
    const messages = this.layout === '2.0' ? this.#messages20() : this.#messages22();
    return this.layout === '2.0'
      ? packBundles(messages, 508, () => 1n)
      : packBundles(messages, 2048, () => this.#tickCount);
  }

  #messages20(): OscMessage[] {
    const c = `/channel/${this.channel}`;
    const l = `${c}/stage/layer/${this.layer}`;
    const out: OscMessage[] = [oscMessage(`${c}/mixer/audio/nb_channels`, [{ type: 'h', value: 2n }])];
    const clip = this.#clip;
    if (clip && !this.#layerQuiet && clip.producer === 'ffmpeg') {
      out.push(
        oscMessage(`${l}/file/time`, [
          { type: 'f', value: clip.frame / this.fps },
          { type: 'f', value: clip.totalFrames / this.fps },
        ]),
        oscMessage(`${l}/file/frame`, [
          { type: 'h', value: BigInt(clip.frame) },
          { type: 'h', value: BigInt(clip.totalFrames) },
        ]),
        oscMessage(`${l}/file/fps`, [{ type: 'f', value: this.fps }]),
        oscMessage(`${l}/file/path`, [{ type: 's', value: clip.name }]),
        oscMessage(`${l}/loop`, [{ type: clip.loop ? 'T' : 'F' }]),
        oscMessage(`${l}/paused`, [{ type: clip.paused ? 'T' : 'F' }]),
      );
    }
    out.push(oscMessage(`${c}/mixer/audio/1/dBFS`, [{ type: 'f', value: -20 }]));
    return out;
  }

  #messages22(): OscMessage[] {
    const c = `/channel/${this.channel}`;
    const l = `${c}/stage/layer/${this.layer}`;
    const fpsInt = Math.round(this.fps);
    const out: OscMessage[] = [
      oscMessage(`${c}/framerate`, [
        { type: 'i', value: fpsInt },
        { type: 'i', value: 1 },
      ]),
      oscMessage(`${c}/format`, [{ type: 's', value: `1080p${fpsInt * 100}` }]),
    ];
    const clip = this.#clip;
    if (clip && !this.#layerQuiet) {
      if (clip.producer === 'ffmpeg') {
        const media = this.#o.mediaFolder ?? 'C:/casparcg/media/';
        const args = (a: number, b: number): OscArg[] => [
          { type: 'f', value: a },
          { type: 'f', value: b },
        ];
        out.push(
          oscMessage(`${l}/foreground/file/name`, [{ type: 's', value: clip.name }]),
          oscMessage(`${l}/foreground/file/path`, [{ type: 's', value: media + clip.name }]),
          oscMessage(`${l}/foreground/file/time`, args(clip.frame / this.fps, clip.totalFrames / this.fps)),
          oscMessage(`${l}/foreground/file/clip`, args(0, clip.totalFrames / this.fps)),
          oscMessage(`${l}/foreground/file/streams/0/fps`, [
            { type: 'i', value: fpsInt },
            { type: 'i', value: 1 },
          ]),
          oscMessage(`${l}/foreground/loop`, [{ type: clip.loop ? 'T' : 'F' }]),
          oscMessage(`${l}/foreground/paused`, [{ type: clip.paused ? 'T' : 'F' }]),
          oscMessage(`${l}/foreground/producer`, [{ type: 's', value: 'ffmpeg' }]),
        );
      } else {
        out.push(oscMessage(`${l}/foreground/producer`, [{ type: 's', value: 'empty' }]));
      }
      out.push(oscMessage(`${l}/background/producer`, [{ type: 's', value: 'empty' }]));
    }
    out.push(
      oscMessage(`${c}/mixer/audio/volume`, [
        { type: 'i', value: 0 },
        { type: 'i', value: 0 },
      ]),
    );
    return out;
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

/** Pack messages into bundles each at most `maxBytes` (a single oversized message gets a bundle alone). */
export function packBundles(messages: OscMessage[], maxBytes: number, timetag: () => bigint): Uint8Array[] {
  const out: Uint8Array[] = [];
  let current: Uint8Array[] = [];
  let size = 16;
  for (const m of messages) {
    const bytes = encodeOsc(m);
    if (current.length > 0 && size + 4 + bytes.length > maxBytes) {
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
