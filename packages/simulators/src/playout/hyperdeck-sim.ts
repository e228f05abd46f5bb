/**
 * HyperDeck TCP simulator: a real `net.Server` speaking the HyperDeck Ethernet protocol as Blackmagic's
 * manual describes it (docs/PROTOCOLS.md, "HyperDeck"): the `500 connection info` banner, one client at a
 * time (a second one gets `120 connection rejected` and is closed), `200 ok` to notify/watchdog/ping,
 * `208 transport info`, `205 clips info` (`107 timeline empty` when there are no clips), asynchronous
 * `508 transport info` blocks carrying only the changed keys, `502 slot info` when the media changes,
 * `513 display timecode` every frame when asked for and the protocol version is 1.11 or later, and
 * `100 syntax error` for unknown commands. Lines end CR LF.
 * Scriptable: play a clip, record, stop, eject or swap the media, lose one reply, go offline (close the
 * port), come back, send malformed lines, and split every write in two at a random byte.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { framesToTimecode, timecodeToFrames } from '@broadcast-ops/playout-monitor/domain';

export interface HyperdeckSimClip {
  id: number;
  name: string;
  /** Timecode of the clip's first frame in the timeline. */
  start: string;
  duration: string;
}

export interface HyperdeckSimOptions {
  host?: string;
  port?: number;
  model?: string;
  videoFormat?: string;
  fps?: number;
  clips?: HyperdeckSimClip[];
  /** Split each write in two (random cut) with a short gap. */
  splitWrites?: boolean;
  /** `protocol version` in the banner (default 1.11). */
  protocolVersion?: string;
}

type Status = 'preview' | 'stopped' | 'play' | 'record';

interface Transport {
  status: Status;
  speed: number;
  slotId: string;
  clipId: string;
  displayTimecode: string;
  timecode: string;
  videoFormat: string;
  loop: boolean;
}

export class HyperdeckSimulator {
  readonly fps: number;
  readonly #o: HyperdeckSimOptions;
  #server: Server | undefined;
  #client: Socket | undefined;
  readonly #others = new Set<Socket>();
  #boundPort = 0;
  #notifyTransport = false;
  #notifySlot = false;
  #notifyDisplayTimecode = false;
  #lastDisplayTimecode = '';
  /** Command names whose next reply is lost. */
  readonly #dropReplies: string[] = [];
  #clips: HyperdeckSimClip[];
  #status: Status = 'stopped';
  #clipId: number | null = 1;
  /** Timeline frame at `#since` (ms) while playing or recording. */
  #frame = 0;
  #since = 0;
  #lastSent: Transport | undefined;
  #timer: NodeJS.Timeout | undefined;
  #commands: string[] = [];
  #splitWrites: boolean;
  #frozen = false;

  constructor(options: HyperdeckSimOptions = {}) {
    this.#o = options;
    this.fps = options.fps ?? 25;
    this.#splitWrites = options.splitWrites ?? false;
    this.#clips = options.clips ?? [
      { id: 1, name: 'Interview_A.mov', start: '00:00:00:00', duration: '00:02:00:00' },
      { id: 2, name: 'B-Roll 02.mov', start: '00:02:00:00', duration: '00:00:30:00' },
    ];
    const first = this.#clips[0];
    this.#frame = first ? (timecodeToFrames(first.start, this.fps) ?? 0) : 0;
  }

  get port(): number {
    return this.#boundPort;
  }

  /** Commands received from clients, in order (tests check the monitor's conversation). */
  get commands(): readonly string[] {
    return this.#commands;
  }

  get hasClient(): boolean {
    return this.#client !== undefined;
  }

  set splitWrites(on: boolean) {
    this.#splitWrites = on;
  }

  async start(): Promise<number> {
    const server = createServer((socket) => this.#onConnection(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#boundPort || (this.#o.port ?? 0), this.#o.host ?? '127.0.0.1', () => {
        server.removeListener('error', reject);
        resolve();
      });
    });
    this.#server = server;
    const addr = server.address();
    if (addr && typeof addr === 'object') this.#boundPort = addr.port;
    // Timecode runs while playing/recording; the deck does not push it (only status changes).
    this.#timer ??= setInterval(() => this.#advance(), 1000 / this.fps);
    return this.#boundPort;
  }

  #onConnection(socket: Socket): void {
    socket.setNoDelay(true);
    socket.on('error', () => undefined);
    if (this.#client) {
      // Single-client decks reject the rest (the manual: "Only one client may connect to the server at a time").
      this.#others.add(socket);
      socket.on('close', () => this.#others.delete(socket));
      socket.end('120 connection rejected\r\n');
      return;
    }
    this.#client = socket;
    this.#notifyTransport = false;
    this.#notifySlot = false;
    this.#notifyDisplayTimecode = false;
    this.#lastSent = undefined;
    socket.on('close', () => {
      if (this.#client === socket) this.#client = undefined;
    });
    let buffer = '';
    // Multi-line form `name:` + `key: value` lines + blank line (as hyperdeck-connection sends it).
    let multi: { name: string; params: string[] } | undefined;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      if (buffer.length > 65536) {
        socket.destroy();
        return;
      }
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, '');
        buffer = buffer.slice(nl + 1);
        if (multi) {
          if (line === '') {
            this.#onCommand(socket, `${multi.name}: ${multi.params.join(' ')}`);
            multi = undefined;
          } else if (multi.params.length < 100) multi.params.push(line);
          continue;
        }
        const header = /^([a-z ]+):$/.exec(line);
        if (header) multi = { name: header[1] ?? '', params: [] };
        else this.#onCommand(socket, line);
      }
    });
    this.#write(
      socket,
      `500 connection info:\r\nprotocol version: ${this.#version}\r\nmodel: ${this.#o.model ?? 'HyperDeck Studio Mini'}\r\n\r\n`,
    );
  }

  #write(socket: Socket, text: string): void {
    if (this.#frozen) return;
    if (!this.#splitWrites && this.#splitQueue.length === 0) {
      socket.write(text);
      return;
    }
    // Split mode: each write goes out in two parts with a gap; later writes wait their turn so the
    // byte stream stays in order (only the segmentation changes).
    this.#splitQueue.push({ socket, text });
    if (this.#splitQueue.length === 1) this.#drainSplit();
  }

  #splitQueue: { socket: Socket; text: string }[] = [];

  #drainSplit(): void {
    const head = this.#splitQueue[0];
    if (!head) return;
    const { socket, text } = head;
    const done = (): void => {
      this.#splitQueue.shift();
      this.#drainSplit();
    };
    if (socket.destroyed || text.length < 2) {
      if (!socket.destroyed) socket.write(text);
      done();
      return;
    }
    const cut = 1 + Math.floor(Math.random() * (text.length - 1));
    socket.write(text.slice(0, cut));
    setTimeout(() => {
      if (!socket.destroyed) socket.write(text.slice(cut));
      done();
    }, 2);
  }

  get #version(): string {
    return this.#o.protocolVersion ?? '1.11';
  }

  #versionAtLeast(major: number, minor: number): boolean {
    const [a = 0, b = 0] = this.#version.split('.').map(Number);
    return a > major || (a === major && b >= minor);
  }

  #onCommand(socket: Socket, line: string): void {
    if (line.trim() === '') return;
    this.#commands.push(line);
    if (this.#commands.length > 1000) this.#commands.splice(0, 500);
    const name = (line.split(':')[0] ?? '').trim();
    const drop = this.#dropReplies.indexOf(name);
    if (drop >= 0) {
      // A lost reply: the command was received, its answer never arrives (asynchronous pushes go on).
      this.#dropReplies.splice(drop, 1);
      if (name === 'notify') this.#applyNotify(line);
      return;
    }
    switch (name) {
      case 'ping':
      case 'watchdog':
        this.#write(socket, '200 ok\r\n');
        return;
      case 'notify':
        if (/display timecode: true/.test(line) && !this.#versionAtLeast(1, 11)) {
          this.#write(socket, '101 unsupported parameter\r\n');
          return;
        }
        this.#applyNotify(line);
        this.#write(socket, '200 ok\r\n');
        return;
      case 'transport info':
        this.#write(socket, `208 transport info:\r\n${this.#block(this.#transport())}\r\n`);
        return;
      case 'clips get': {
        if (this.#clips.length === 0) {
          this.#write(socket, '107 timeline empty\r\n');
          return;
        }
        const lines = this.#clips.map((c) => `${c.id}: ${c.name} ${c.start} ${c.duration}`);
        this.#write(
          socket,
          `205 clips info:\r\nclip count: ${this.#clips.length}\r\n${lines.map((l) => l + '\r\n').join('')}\r\n`,
        );
        return;
      }
      case 'quit':
        socket.end('200 ok\r\n');
        return;
      default:
        this.#write(socket, '100 syntax error\r\n');
    }
  }

  #applyNotify(line: string): void {
    const flag = (key: string): boolean | undefined =>
      new RegExp(`${key}: true`).test(line)
        ? true
        : new RegExp(`${key}: false`).test(line)
          ? false
          : undefined;
    this.#notifyTransport = flag('transport') ?? this.#notifyTransport;
    this.#notifySlot = flag('slot') ?? this.#notifySlot;
    this.#notifyDisplayTimecode = flag('display timecode') ?? this.#notifyDisplayTimecode;
    if (this.#notifyTransport) this.#lastSent = this.#transport();
  }

  /** Report clip id `id` in transport info even when the clip list does not have it. */
  forceClipId(id: number): void {
    this.#clipId = id;
    this.#notify();
  }

  /** Lose the next reply to command `name` (e.g. `transport info`): the deck stays up and keeps pushing. */
  dropNextReply(name: string): void {
    this.#dropReplies.push(name);
  }

  /** The media is ejected or swapped: a new clip list (empty: the timeline is empty), `502` to the client. */
  swapMedia(clips: HyperdeckSimClip[] = []): void {
    this.#clips = clips;
    this.#status = 'stopped';
    const first = clips[0];
    this.#clipId = first ? first.id : null;
    this.#frame = first ? (timecodeToFrames(first.start, this.fps) ?? 0) : 0;
    const socket = this.#client;
    if (socket && this.#notifySlot) {
      this.#write(socket, `502 slot info:\r\nslot id: 1\r\nstatus: ${first ? 'mounted' : 'empty'}\r\n\r\n`);
    }
    this.#notify();
  }

  #currentFrame(): number {
    if (this.#status !== 'play' && this.#status !== 'record') return this.#frame;
    return this.#frame + Math.floor(((Date.now() - this.#since) * this.fps) / 1000);
  }

  #transport(): Transport {
    const tc = framesToTimecode(this.#currentFrame(), this.fps);
    return {
      status: this.#status,
      speed: this.#status === 'play' ? 100 : 0,
      slotId: '1',
      clipId: this.#clipId === null ? 'none' : String(this.#clipId),
      displayTimecode: tc,
      timecode: tc,
      videoFormat: this.#o.videoFormat ?? '1080i50',
      loop: false,
    };
  }

  #block(t: Partial<Transport>): string {
    const names: Record<keyof Transport, string> = {
      status: 'status',
      speed: 'speed',
      slotId: 'slot id',
      clipId: 'clip id',
      displayTimecode: 'display timecode',
      timecode: 'timecode',
      videoFormat: 'video format',
      loop: 'loop',
    };
    let out = '';
    for (const [k, v] of Object.entries(t) as [keyof Transport, string | number | boolean][]) {
      out += `${names[k]}: ${String(v)}\r\n`;
    }
    return out;
  }

  /** Push a 508 with only the keys that changed since the last one (as real decks do). */
  #notify(): void {
    const socket = this.#client;
    if (!socket || !this.#notifyTransport) return;
    const now = this.#transport();
    const changed: Partial<Transport> = {};
    for (const k of Object.keys(now) as (keyof Transport)[]) {
      if (k === 'displayTimecode' || k === 'timecode') continue;
      if (this.#lastSent?.[k] !== now[k]) (changed as Record<string, unknown>)[k] = now[k];
    }
    this.#lastSent = now;
    if (Object.keys(changed).length === 0) return;
    // Timecode accompanies a status change so the state and the position arrive together.
    changed.displayTimecode = now.displayTimecode;
    changed.timecode = now.timecode;
    this.#write(socket, `508 transport info:\r\n${this.#block(changed)}\r\n`);
  }

  #pushDisplayTimecode(): void {
    const socket = this.#client;
    if (!socket || !this.#notifyDisplayTimecode) return;
    const tc = framesToTimecode(this.#currentFrame(), this.fps);
    if (tc === this.#lastDisplayTimecode) return;
    this.#lastDisplayTimecode = tc;
    this.#write(socket, `513 display timecode:\r\ndisplay timecode: ${tc}\r\n\r\n`);
  }

  #advance(): void {
    this.#pushDisplayTimecode();
    if (this.#status !== 'play') return;
    const clip = this.#clips.find((c) => c.id === this.#clipId);
    if (!clip) return;
    const end =
      (timecodeToFrames(clip.start, this.fps) ?? 0) + (timecodeToFrames(clip.duration, this.fps) ?? 0) - 1;
    if (this.#currentFrame() >= end) {
      this.#frame = end;
      this.#status = 'stopped';
      this.#notify();
    }
  }

  /** Play clip `clipId` from `offsetFrames` into it. */
  play(clipId = 1, offsetFrames = 0): void {
    const clip = this.#clips.find((c) => c.id === clipId);
    if (!clip) throw new Error(`no clip ${clipId}`);
    this.#clipId = clipId;
    this.#frame = (timecodeToFrames(clip.start, this.fps) ?? 0) + offsetFrames;
    this.#since = Date.now();
    this.#status = 'play';
    this.#notify();
  }

  /** Stop where it is (or at `offsetFrames` into the current clip, for frame-exact checks). */
  stop(offsetFrames?: number): void {
    const clip = this.#clips.find((c) => c.id === this.#clipId);
    this.#frame =
      offsetFrames !== undefined && clip
        ? (timecodeToFrames(clip.start, this.fps) ?? 0) + offsetFrames
        : this.#currentFrame();
    this.#status = 'stopped';
    this.#notify();
  }

  /** Record a new clip (it joins the clip list; the clip id moves to it). */
  record(name = `Capture_${String(this.#clips.length + 1).padStart(4, '0')}.mov`): void {
    const last = this.#clips[this.#clips.length - 1];
    const startFrame = last
      ? (timecodeToFrames(last.start, this.fps) ?? 0) + (timecodeToFrames(last.duration, this.fps) ?? 0)
      : 0;
    const id = (last?.id ?? 0) + 1;
    this.#clips.push({ id, name, start: framesToTimecode(startFrame, this.fps), duration: '00:00:00:00' });
    this.#clipId = id;
    this.#frame = startFrame;
    this.#since = Date.now();
    this.#status = 'record';
    this.#notify();
  }

  /** Send a line the protocol does not know (robustness of the monitor). */
  sendMalformed(kind: 'unknown-line' | 'long-line' | 'bad-block' = 'unknown-line'): void {
    const socket = this.#client;
    if (!socket) return;
    if (kind === 'unknown-line') this.#write(socket, 'this is not a hyperdeck line\r\n');
    else if (kind === 'long-line') this.#write(socket, 'x'.repeat(10_000) + '\r\n');
    else
      this.#write(
        socket,
        '508 transport info:\r\nnot a parameter line\r\nstatus: ' + this.#status + '\r\n\r\n',
      );
  }

  /** Keep the TCP connection open but answer nothing (a hung deck or a dead network path). */
  freeze(on = true): void {
    this.#frozen = on;
  }

  /** Close the port and the connections: the deck powered off or unplugged. */
  async offline(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    this.#client?.destroy();
    this.#client = undefined;
    for (const s of this.#others) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async online(): Promise<void> {
    if (!this.#server) await this.start();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.offline();
  }
}
