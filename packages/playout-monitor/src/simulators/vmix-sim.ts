/**
 * vMix HTTP API simulator: a real `node:http` server answering `GET /api` (and `/api/`) with vMix XML in
 * the layout of vMix 27 (docs/PROTOCOLS.md, "vMix"): `<version>`, `<edition>`, `<inputs>` with `key`,
 * `number`, `type`, `title`, `shortTitle`, `state`, `position`, `duration`, `loop`, `markIn`/`markOut`
 * (title inputs with their `<text>` fields), then `<overlays>`, `<preview>`, `<active>`, `<fadeToBlack>`,
 * `<recording duration=…>`, `<streaming>`. Characters outside ASCII in titles go out as numeric character
 * references. Scriptable: play a clip on the program input, pause, stop, preview, overlays, fade to black,
 * record, stream, go offline (close the port), come back, hang (no answer), answer 500, or answer garbage.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export type VmixSimMode = 'ok' | 'hang' | 'error500' | 'garbage' | 'truncated';

interface SimInput {
  number: number;
  key: string;
  type: string;
  title: string;
  state: 'Running' | 'Paused' | 'Completed';
  /** Position at `since` (ms) and the wall time it was taken. */
  positionMs: number;
  since: number;
  durationMs: number;
  markOutMs?: number;
  loop: boolean;
  /** Title inputs: their text fields. */
  fields?: string[];
}

function esc(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/[^\x20-\x7e]/gu, (c) => `&#${c.codePointAt(0) ?? 63};`);
}

export class VmixSimulator {
  readonly #host: string;
  readonly #port: number;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #hung = new Set<ServerResponse>();
  #boundPort = 0;
  #mode: VmixSimMode = 'ok';
  #inputs: SimInput[];
  #active = 1;
  #preview = 1;
  #fadeToBlack = false;
  readonly #overlays = new Map<number, number>();
  #recording = false;
  #recordingSince = 0;
  #streaming = false;
  #requests = 0;
  readonly version: string;

  readonly #auth: string | undefined;

  constructor(
    options: {
      host?: string;
      port?: number;
      version?: string;
      auth?: { username: string; password: string };
      /** Extra title (GT) inputs after the three standard ones, as a large show has. */
      titleInputs?: number;
    } = {},
  ) {
    this.#auth = options.auth
      ? `Basic ${Buffer.from(`${options.auth.username}:${options.auth.password}`).toString('base64')}`
      : undefined;
    this.#host = options.host ?? '127.0.0.1';
    this.#port = options.port ?? 0;
    this.version = options.version ?? '27.0.0.49';
    const now = Date.now();
    this.#inputs = [
      {
        number: 1,
        key: '6b5e1f7c-1f1d-4a55-9d3f-3f1c7c9d0a01',
        type: 'Capture',
        title: 'Camera 1',
        state: 'Running',
        positionMs: 0,
        since: now,
        durationMs: 0,
        loop: false,
      },
      {
        number: 2,
        key: '0c7b9f52-8e6a-4b1e-a2c4-52f5e0b8d602',
        type: 'Video',
        title: 'opener.mp4',
        state: 'Paused',
        positionMs: 0,
        since: now,
        durationMs: 30_000,
        loop: false,
      },
      {
        number: 3,
        key: 'c2d43a7e-95a0-4d0d-8f0b-9a4e5d6b7c03',
        type: 'Colour',
        title: 'Black',
        state: 'Paused',
        positionMs: 0,
        since: now,
        durationMs: 0,
        loop: false,
      },
    ];
    for (let i = 0; i < (options.titleInputs ?? 0); i++) {
      this.#inputs.push({
        number: 4 + i,
        key: `0000${String(i).padStart(4, '0')}-1f1d-4a55-9d3f-3f1c7c9d0a${String(i % 100).padStart(2, '0')}`,
        type: 'GT',
        title: `Lower third ${i + 1} - Zoë Müller`,
        state: 'Paused',
        positionMs: 0,
        since: now,
        durationMs: 0,
        loop: false,
        fields: [`Zoë Müller ${i + 1}`, 'Correspondent, Zürich'],
      });
    }
  }

  get port(): number {
    return this.#boundPort;
  }

  get requests(): number {
    return this.#requests;
  }

  async start(): Promise<number> {
    const server = createServer((req, res) => this.#handle(req, res));
    server.keepAliveTimeout = 5000;
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#boundPort || this.#port, this.#host, () => {
        server.removeListener('error', reject);
        resolve();
      });
    });
    this.#server = server;
    const addr = server.address();
    if (addr && typeof addr === 'object') this.#boundPort = addr.port;
    return this.#boundPort;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    this.#requests++;
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || (path !== '/api' && path !== '/api/')) {
      res.writeHead(404).end();
      return;
    }
    // The Web Controller may require HTTP Basic auth (Settings → Web Controller → password).
    if (this.#auth !== undefined && req.headers.authorization !== this.#auth) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="vMix"' }).end();
      return;
    }
    switch (this.#mode) {
      case 'hang':
        this.#hung.add(res);
        res.on('close', () => this.#hung.delete(res));
        return;
      case 'error500':
        res.writeHead(500, { 'content-type': 'text/plain' }).end('Internal Server Error');
        return;
      case 'garbage':
        res
          .writeHead(200, { 'content-type': 'text/xml' })
          .end('<vmix><version>27.0<inputs><input number="1"></vmix');
        return;
      case 'truncated': {
        const xml = this.xml();
        res.writeHead(200, { 'content-type': 'text/xml' }).end(xml.slice(0, Math.floor(xml.length / 2)));
        return;
      }
      case 'ok':
        res.writeHead(200, { 'content-type': 'text/xml' }).end(this.xml());
    }
  }

  #position(i: SimInput, now: number): number {
    if (i.state !== 'Running' || i.durationMs === 0) return i.state === 'Running' ? 0 : i.positionMs;
    const p = i.positionMs + (now - i.since);
    if (p < i.durationMs) return p;
    return i.loop ? p % i.durationMs : i.durationMs;
  }

  /** The XML document vMix would answer now. */
  xml(now = Date.now()): string {
    const inputs = this.#inputs
      .map((i) => {
        const position = Math.floor(this.#position(i, now));
        const ended = i.state === 'Running' && i.durationMs > 0 && !i.loop && position >= i.durationMs;
        const markOut = i.markOutMs !== undefined ? ` markOut="${i.markOutMs}"` : '';
        const fields = (i.fields ?? [])
          .map((f, n) => `<text index="${n}" name="Headline${n}.Text">${esc(f)}</text>`)
          .join('');
        return (
          `<input key="${i.key}" number="${i.number}" type="${i.type}" title="${esc(i.title)}" shortTitle="${esc(i.title)}" ` +
          `state="${ended ? 'Completed' : i.state}" position="${position}" duration="${i.durationMs}" loop="${i.loop ? 'True' : 'False'}"${markOut} ` +
          `muted="False" volume="100" balance="0" solo="False" audiobusses="M" meterF1="${(Math.random() * 0.3).toFixed(4)}" meterF2="0" gainDb="0">${esc(i.title)}${fields}</input>`
        );
      })
      .join('\r\n');
    const overlays = [1, 2, 3, 4, 5, 6, 7, 8]
      .map((n) => {
        const input = this.#overlays.get(n);
        return input === undefined
          ? `<overlay number="${n}" />`
          : `<overlay number="${n}">${input}</overlay>`;
      })
      .join('\r\n');
    const recording = this.#recording
      ? `<recording duration="${Math.floor((now - this.#recordingSince) / 1000)}" filename1="C:\\Users\\vmix\\Documents\\vMixStorage\\capture.mp4">True</recording>`
      : '<recording>False</recording>';
    return (
      `<vmix>\r\n<version>${this.version}</version>\r\n<edition>4K</edition>\r\n<preset>C:\\Users\\vmix\\AppData\\Roaming\\last.vmix</preset>\r\n` +
      `<inputs>\r\n${inputs}\r\n</inputs>\r\n<overlays>\r\n${overlays}\r\n</overlays>\r\n` +
      `<preview>${this.#preview}</preview>\r\n<active>${this.#active}</active>\r\n<fadeToBlack>${this.#fadeToBlack ? 'True' : 'False'}</fadeToBlack>\r\n` +
      `<transitions>\r\n<transition number="1" effect="Fade" duration="500" />\r\n</transitions>\r\n` +
      `${recording}\r\n<external>False</external>\r\n<streaming>${this.#streaming ? 'True' : 'False'}</streaming>\r\n` +
      `<playList>False</playList>\r\n<multiCorder>False</multiCorder>\r\n<fullscreen>False</fullscreen>\r\n</vmix>`
    );
  }

  #clipInput(): SimInput {
    const clip = this.#inputs[1];
    if (!clip) throw new Error('simulator has no clip input');
    return clip;
  }

  /** Put the clip input on program and play it from `positionMs`. */
  play(
    title: string,
    options: { durationSec?: number; positionMs?: number; loop?: boolean; markOutMs?: number } = {},
  ): void {
    const clip = this.#clipInput();
    clip.title = title;
    clip.durationMs = Math.round((options.durationSec ?? 30) * 1000);
    clip.positionMs = options.positionMs ?? 0;
    clip.since = Date.now();
    clip.state = 'Running';
    clip.loop = options.loop ?? false;
    if (options.markOutMs !== undefined) clip.markOutMs = options.markOutMs;
    else delete clip.markOutMs;
    this.#active = clip.number;
  }

  /** Pause the program input where it is (optionally at an exact position, for frame-exact checks). */
  pause(positionMs?: number): void {
    const clip = this.#inputs.find((i) => i.number === this.#active);
    if (!clip) return;
    clip.positionMs = positionMs ?? this.#position(clip, Date.now());
    clip.state = 'Paused';
  }

  /** Stop: program cut to the black colour input (nothing playing). */
  stop(): void {
    const clip = this.#clipInput();
    clip.state = 'Paused';
    clip.positionMs = 0;
    this.#active = 3;
  }

  /** Put input `number` on preview. */
  previewInput(number: number): void {
    this.#preview = number;
  }

  /** Fade to black on or off. */
  fadeToBlack(on = true): void {
    this.#fadeToBlack = on;
  }

  /** Put input `input` on overlay channel `number` (1–8), or take it off with undefined. */
  overlay(number: number, input: number | undefined): void {
    if (input === undefined) this.#overlays.delete(number);
    else this.#overlays.set(number, input);
  }

  /** Rename an input (titles with non-ASCII characters go out as numeric references). */
  rename(number: number, title: string): void {
    const i = this.#inputs.find((x) => x.number === number);
    if (i) i.title = title;
  }

  record(on = true): void {
    if (on && !this.#recording) this.#recordingSince = Date.now();
    this.#recording = on;
  }

  stream(on = true): void {
    this.#streaming = on;
  }

  setMode(mode: VmixSimMode): void {
    this.#mode = mode;
    if (mode !== 'hang') for (const res of this.#hung) res.destroy();
  }

  /** Close the port and every connection: vMix closed or the machine gone. */
  async offline(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const res of this.#hung) res.destroy();
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listen again on the same port. */
  async online(): Promise<void> {
    if (!this.#server) await this.start();
  }

  async close(): Promise<void> {
    await this.offline();
  }
}
