/**
 * vMix HTTP API simulator: a real `node:http` server answering `GET /api` (and `/api/`) with vMix XML in
 * the layout of vMix 27 (docs/PROTOCOLS.md, "vMix"): `<version>`, `<edition>`, `<inputs>` with `key`,
 * `number`, `type`, `title`, `shortTitle`, `state`, `position`, `duration`, `loop`, `markIn`/`markOut`
 * (title inputs with their `<text>` fields), then `<overlays>`, `<preview>`, `<active>`, `<fadeToBlack>`,
 * `<recording duration=…>`, `<streaming>`. Characters outside ASCII in titles go out as numeric character
 * references. Scriptable: play a clip on the program input, pause, stop, preview, overlays, fade to black,
 * record, stream, go offline (close the port), come back, hang (no answer), answer 500, or answer garbage.
 *
 * It also speaks the TCP API (vMix help, "TCP API"; port 8099 on a real vMix, `tcpPort` here, 0 = any):
 * `SUBSCRIBE TALLY` → `SUBSCRIBE OK TALLY` and then `TALLY OK <digits>` pushed on every tally change,
 * `TALLY` → `TALLY OK <digits>`, `XML` → `XML <bytes>\r\n<the /api document>\r\n`; anything else gets
 * `<COMMAND> ER`. Its digits are vMix's own per-number tally: 1 for the `<active>` input, 2 for `<preview>`
 * (layers and overlay channels are left to the monitor's rule, docs/TALLY.md). Inputs can be cut to program,
 * given layers, and moved (renumbered, keys kept).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';

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
  /** Keys of the inputs shown as its layers, by layer index. */
  layers?: (string | undefined)[];
}

/** Listen on `port` (0 = any) and return the bound port. */
async function listen(server: TcpServer, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  return addr && typeof addr === 'object' ? addr.port : 0;
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
  readonly #tcpHost: string;
  readonly #tcpPortOption: number | undefined;
  #tcpServer: TcpServer | undefined;
  #tcpBoundPort = 0;
  readonly #tcpSockets = new Set<Socket>();
  readonly #tallySubscribers = new Set<Socket>();
  #lastDigits = '';
  #tallyPushes = 0;

  readonly #auth: string | undefined;

  constructor(
    options: {
      host?: string;
      port?: number;
      version?: string;
      auth?: { username: string; password: string };
      /** Extra title (GT) inputs after the three standard ones, as a large show has. */
      titleInputs?: number;
      /** Listen for the TCP API on this port (0 = any free port); absent = no TCP API. */
      tcpPort?: number;
    } = {},
  ) {
    this.#tcpHost = options.host ?? '127.0.0.1';
    this.#tcpPortOption = options.tcpPort;
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

  /** The TCP API's bound port (0 before it listens). */
  get tcpPort(): number {
    return this.#tcpBoundPort;
  }

  /** `TALLY OK` lines pushed to subscribers so far. */
  get tallyPushes(): number {
    return this.#tallyPushes;
  }

  /** vMix's own per-number tally digits: 1 program (`<active>`), 2 preview, 0 off. */
  tallyDigits(): string {
    return this.#inputs
      .map((i) => (i.number === this.#active ? '1' : i.number === this.#preview ? '2' : '0'))
      .join('');
  }

  /** The key (GUID) of input `number`. */
  keyOf(number: number): string {
    const i = this.#inputs.find((x) => x.number === number);
    if (!i) throw new Error(`no input ${number}`);
    return i.key;
  }

  /** Push `TALLY OK` to the subscribers when the digits changed (vMix pushes on every tally change). */
  #tallyChanged(): void {
    const digits = this.tallyDigits();
    if (digits === this.#lastDigits) return;
    this.#lastDigits = digits;
    for (const s of this.#tallySubscribers) {
      this.#tallyPushes++;
      s.write(`TALLY OK ${digits}\r\n`);
    }
  }

  async #startTcp(): Promise<void> {
    if (this.#tcpPortOption === undefined || this.#tcpServer) return;
    const server = createTcpServer((socket) => this.#tcpSession(socket));
    this.#tcpBoundPort = await listen(server, this.#tcpBoundPort || this.#tcpPortOption, this.#tcpHost);
    this.#tcpServer = server;
    this.#lastDigits = this.tallyDigits();
  }

  #tcpSession(socket: Socket): void {
    this.#tcpSockets.add(socket);
    socket.on('close', () => {
      this.#tcpSockets.delete(socket);
      this.#tallySubscribers.delete(socket);
    });
    socket.on('error', () => socket.destroy());
    let pending = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      pending += chunk;
      if (pending.length > 65_536) {
        socket.destroy();
        return;
      }
      let lf: number;
      while ((lf = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, lf).replace(/\r$/, '').trim();
        pending = pending.slice(lf + 1);
        if (line !== '') this.#tcpCommand(socket, line);
      }
    });
  }

  #tcpCommand(socket: Socket, line: string): void {
    if (this.#mode === 'hang') return;
    const [command = ''] = line.split(' ');
    const upper = line.toUpperCase();
    if (upper === 'SUBSCRIBE TALLY') {
      this.#tallySubscribers.add(socket);
      socket.write('SUBSCRIBE OK TALLY\r\n');
    } else if (upper === 'UNSUBSCRIBE TALLY') {
      this.#tallySubscribers.delete(socket);
      socket.write('UNSUBSCRIBE OK TALLY\r\n');
    } else if (upper === 'TALLY') {
      socket.write(`TALLY OK ${this.tallyDigits()}\r\n`);
    } else if (upper === 'XML') {
      const xml = Buffer.from(this.xml(), 'utf8');
      socket.write(Buffer.concat([Buffer.from(`XML ${xml.length}\r\n`), xml, Buffer.from('\r\n')]));
    } else {
      socket.write(`${command.toUpperCase()} ER Unsupported\r\n`);
    }
  }

  /** Close the TCP API port and drop its connections (the HTTP API keeps answering). */
  async tcpOffline(): Promise<void> {
    const server = this.#tcpServer;
    this.#tcpServer = undefined;
    for (const s of this.#tcpSockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listen for the TCP API again on the same port. */
  async tcpOnline(): Promise<void> {
    await this.#startTcp();
  }

  async start(): Promise<number> {
    const server = createServer((req, res) => this.#handle(req, res));
    server.keepAliveTimeout = 5000;
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    this.#boundPort = await listen(server, this.#boundPort || this.#port, this.#host);
    this.#server = server;
    await this.#startTcp();
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
        const layers = (i.layers ?? [])
          .map((key, n) => (key === undefined ? '' : `<overlay index="${n}" key="${key}" />`))
          .join('');
        return (
          `<input key="${i.key}" number="${i.number}" type="${i.type}" title="${esc(i.title)}" shortTitle="${esc(i.title)}" ` +
          `state="${ended ? 'Completed' : i.state}" position="${position}" duration="${i.durationMs}" loop="${i.loop ? 'True' : 'False'}"${markOut} ` +
          `muted="False" volume="100" balance="0" solo="False" audiobusses="M" meterF1="${(Math.random() * 0.3).toFixed(4)}" meterF2="0" gainDb="0">${esc(i.title)}${fields}${layers}</input>`
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
    this.#tallyChanged();
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
    this.#tallyChanged();
  }

  /** Put input `number` on preview. */
  previewInput(number: number): void {
    this.#preview = number;
    this.#tallyChanged();
  }

  /** Cut input `number` to program (the previous program input goes to preview, as vMix's Cut does). */
  cut(number: number): void {
    if (number !== this.#active) this.#preview = this.#active;
    this.#active = number;
    this.#tallyChanged();
  }

  /** Show input `layerInput` as layer `index` (0–9) of input `number`, or clear that layer. */
  layer(number: number, index: number, layerInput: number | undefined): void {
    const i = this.#inputs.find((x) => x.number === number);
    if (!i) throw new Error(`no input ${number}`);
    const layers = [...(i.layers ?? [])];
    layers[index] = layerInput === undefined ? undefined : this.keyOf(layerInput);
    i.layers = layers;
  }

  /** Move input `from` to position `to` (1-based): vMix renumbers every input, keys stay. */
  moveInput(from: number, to: number): void {
    const activeKey = this.keyOf(this.#active);
    const previewKey = this.keyOf(this.#preview);
    const overlayKeys = new Map([...this.#overlays].map(([n, input]) => [n, this.keyOf(input)]));
    const idx = this.#inputs.findIndex((x) => x.number === from);
    const [moved] = this.#inputs.splice(idx, 1);
    if (!moved) throw new Error(`no input ${from}`);
    this.#inputs.splice(to - 1, 0, moved);
    this.#inputs.forEach((x, n) => (x.number = n + 1));
    const numberOf = (key: string): number => this.#inputs.find((x) => x.key === key)?.number ?? 0;
    this.#active = numberOf(activeKey);
    this.#preview = numberOf(previewKey);
    for (const [n, key] of overlayKeys) this.#overlays.set(n, numberOf(key));
    this.#tallyChanged();
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

  /** Close the ports and every connection: vMix closed or the machine gone. */
  async offline(): Promise<void> {
    await this.tcpOffline();
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
