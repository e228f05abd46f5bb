/**
 * A Bitfocus Companion Satellite API server for tests and demos (docs/companion.md "Simulator").
 *
 * Behaviour follows Companion's own source, by ApiVersion:
 * - ApiVersion < 1.8.0: the hand-written lines of Companion 3.x (`companion/lib/Service/Satellite.js` at
 *   bitfocus/companion v3.4.0 and commit 6de9ce428 for 1.6.0, `SatelliteApi.ts` at v3.5.0): `BEGIN` with
 *   unquoted values, `KEY-PRESS OK` without DEVICEID, `KEY-STATE DEVICEID=x KEY=n TYPE=BUTTON  … PRESSED=false`.
 * - ApiVersion ≥ 1.8.0: `SatelliteSocketWrapper.sendMessage` (v4.0.0 onwards): quoted strings, 1/0 booleans,
 *   a space before `\n`; `CAPS` after `BEGIN` from 1.10.0 (v4.3.0), `LOCATION` in `KEY-STATE` from 1.10.0.
 * - Idle timeout: TCP `socket.setTimeout(5000)`; WebSocket checked every 3 s, terminated after 5 s without
 *   an inbound message (`SatelliteTcp.ts`, `SatelliteWebsocket.ts`). Both configurable here.
 * - Error strings, "Device exists elsewhere" sent to the owning socket, unknown `SET-VARIABLE-VALUE` ids
 *   accepted, `CHANGE-PAGE` always OK, `ADD-SUB OK` followed by `SUB-STATE`: `SatelliteApi.ts` (v5.0.0+).
 *
 * Scripting (draws, pages, brightness, variables, locks) and fault injection (drop, stall, garbage, slow
 * replies) are methods; every received line is recorded in `received`.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { crc32, deflateSync } from 'node:zlib';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  LineSplitter,
  LineTooLongError,
  MAX_LINE_LENGTH,
  atLeast,
  formatLegacyLine,
  formatServerLine,
  fromBase64,
  isFalsey,
  isTruthy,
  splitLine,
  toBase64,
  type SatelliteLine,
  type SatelliteValue,
} from '@broadcast-ops/telemetry-bridge/protocol';

export const NEWEST_API_VERSION = '1.14.0';

export interface CompanionSimOptions {
  apiVersion?: string;
  companionVersion?: string;
  /** `satellite_subscriptions_enabled` (Companion's default: false). */
  subscriptions?: boolean;
  /** Override or add CAPS flags (≥ 1.10.0); by default they follow the ApiVersion. */
  caps?: Record<string, SatelliteValue>;
  /** Inbound silence after which a connection is dropped (Companion: 5000 ms). */
  idleTimeoutMs?: number;
  host?: string;
  maxLineLength?: number;
}

export interface ButtonStyle {
  text?: string;
  /** `#rrggbb` */
  color?: string;
  textColor?: string;
  pressed?: boolean;
  type?: 'BUTTON' | 'PAGEUP' | 'PAGEDOWN' | 'PAGENUM';
  fontSize?: number | 'auto';
}

export interface ReceivedLine {
  connection: number;
  transport: 'tcp' | 'ws';
  line: string;
  parsed: SatelliteLine;
  at: number;
}

interface Conn {
  id: number;
  transport: 'tcp' | 'ws';
  write(text: string): void;
  destroy(): void;
  splitter: LineSplitter;
  subs: Map<string, SimSub>;
  lastRx: number;
}

/** An ADD-SUB: where, and the bitmap asked for (size 0 = none; SatelliteApi.ts `#addSub`). */
interface SimSub {
  page: number;
  row: number;
  column: number;
  bitmaps: number;
  bitmapFormat: SimBitmapFormat;
}

/** What the simulator can encode; Companion also offers webp (no encoder here, so not advertised). */
type SimBitmapFormat = 'rgb' | 'png';

interface SimDevice {
  id: string;
  conn: Conn;
  keysTotal: number;
  keysPerRow: number;
  bitmaps: number;
  bitmapFormat: SimBitmapFormat;
  colors: 'hex' | 'rgb' | false;
  text: boolean;
  textStyle: boolean;
  brightness: boolean;
  pincodeLock: boolean;
  outputs: Set<string>;
  inputs: Set<string>;
  page: number;
  lastOutput: Map<string, string>;
}

const BLACK = '#000000';

export class CompanionSimulator {
  readonly received: ReceivedLine[] = [];
  /** Values written by SET-VARIABLE-VALUE, per declared input id (Companion maps them to custom variables). */
  readonly inputValues = new Map<string, string>();
  apiVersion: string;
  companionVersion: string;
  subscriptions: boolean;
  capsOverride: Record<string, SatelliteValue>;
  idleTimeoutMs: number;
  /** Bound of `received` (oldest lines dropped first). */
  maxRecorded = 100_000;
  /** Delay before each reply line (fault injection: slow replies). */
  replyDelayMs = 0;
  #stalled = false;
  #host: string;
  #maxLine: number;
  #tcp: Server | undefined;
  #ws: WebSocketServer | undefined;
  #conns = new Set<Conn>();
  #devices = new Map<string, SimDevice>();
  #buttons = new Map<string, ButtonStyle>();
  #outputs = new Map<string, string>();
  #brightness = 100;
  #locked = false;
  #seq = 0;
  #waiters = new Set<() => void>();
  #wsTimer: NodeJS.Timeout | undefined;

  constructor(options: CompanionSimOptions = {}) {
    this.apiVersion = options.apiVersion ?? NEWEST_API_VERSION;
    this.companionVersion = options.companionVersion ?? 'sim';
    this.subscriptions = options.subscriptions ?? false;
    this.capsOverride = { ...options.caps };
    this.idleTimeoutMs = options.idleTimeoutMs ?? 5000;
    this.#host = options.host ?? '127.0.0.1';
    this.#maxLine = options.maxLineLength ?? MAX_LINE_LENGTH;
  }

  // ------------------------------------------------------------------------------------------ listeners

  /** Listen; a port of 0 picks a free one, `null` disables that transport. */
  async listen(
    ports: { tcp?: number | null; ws?: number | null } = {},
  ): Promise<{ tcp?: number; ws?: number }> {
    const out: { tcp?: number; ws?: number } = {};
    if (ports.tcp !== null) {
      const srv = createServer((s) => this.#acceptTcp(s));
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(ports.tcp ?? 0, this.#host, () => resolve());
      });
      this.#tcp = srv;
      out.tcp = (srv.address() as { port: number }).port;
    }
    if (ports.ws !== null) {
      const wss = new WebSocketServer({
        host: this.#host,
        port: ports.ws ?? 0,
        perMessageDeflate: false,
        maxPayload: this.#maxLine + 1024,
      });
      await new Promise<void>((resolve, reject) => {
        wss.once('error', reject);
        wss.once('listening', () => resolve());
      });
      wss.on('connection', (ws) => this.#acceptWs(ws));
      this.#ws = wss;
      out.ws = (wss.address() as { port: number }).port;
      // Companion checks every 3 s; scaled down with a shortened idle timeout.
      this.#wsTimer = setInterval(
        () => this.#checkWsIdle(),
        Math.max(20, Math.min(3000, this.idleTimeoutMs / 2)),
      );
      this.#wsTimer.unref();
    }
    return out;
  }

  get connections(): number {
    return this.#conns.size;
  }
  get devices(): string[] {
    return [...this.#devices.keys()];
  }

  async close(): Promise<void> {
    if (this.#wsTimer) clearInterval(this.#wsTimer);
    for (const c of [...this.#conns]) c.destroy();
    const tcp = this.#tcp;
    const ws = this.#ws;
    await Promise.all([
      tcp && new Promise<void>((r) => tcp.close(() => r())),
      ws && new Promise<void>((r) => ws.close(() => r())),
    ]);
    this.#tcp = undefined;
    this.#ws = undefined;
  }

  #acceptTcp(socket: Socket): void {
    socket.setNoDelay(true);
    const decoder = new StringDecoder('utf8');
    const conn = this.#newConn(
      'tcp',
      (t) => socket.write(t),
      () => socket.destroy(),
    );
    socket.setTimeout(this.idleTimeoutMs, () => {
      if (!this.#stalled) socket.destroy();
    });
    socket.on('data', (d) => {
      conn.lastRx = Date.now();
      this.#input(conn, decoder.write(d));
    });
    socket.on('error', () => undefined);
    socket.on('close', () => this.#closed(conn));
  }

  #acceptWs(ws: WebSocket): void {
    const conn = this.#newConn(
      'ws',
      (t) => {
        if (ws.readyState === ws.OPEN) ws.send(t);
      },
      () => ws.terminate(),
    );
    ws.on('message', (data) => {
      conn.lastRx = Date.now();
      this.#input(
        conn,
        Buffer.isBuffer(data)
          ? data.toString('utf8')
          : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8'),
      );
    });
    ws.on('error', () => undefined);
    ws.on('close', () => this.#closed(conn));
  }

  #checkWsIdle(): void {
    if (this.#stalled) return;
    const limit = Date.now() - this.idleTimeoutMs;
    for (const c of this.#conns) if (c.transport === 'ws' && c.lastRx < limit) c.destroy();
  }

  #newConn(transport: 'tcp' | 'ws', write: (t: string) => void, destroy: () => void): Conn {
    const conn: Conn = {
      id: ++this.#seq,
      transport,
      write,
      destroy,
      splitter: new LineSplitter(this.#maxLine),
      subs: new Map(),
      lastRx: Date.now(),
    };
    this.#conns.add(conn);
    // A stalled server accepts the connection (the kernel does) but never speaks.
    this.#send(
      conn,
      this.#legacy
        ? formatLegacyLine([
            'BEGIN',
            `CompanionVersion=${this.companionVersion}`,
            `ApiVersion=${this.apiVersion}`,
          ])
        : formatServerLine('BEGIN', null, null, {
            CompanionVersion: this.companionVersion,
            ApiVersion: this.apiVersion,
          }),
    );
    if (atLeast(this.apiVersion, '1.10.0'))
      this.#send(conn, formatServerLine('CAPS', null, null, this.#caps()));
    this.#notify();
    return conn;
  }

  #caps(): Record<string, SatelliteValue> {
    const caps: Record<string, SatelliteValue> = { SUBSCRIPTIONS: this.subscriptions };
    if (atLeast(this.apiVersion, '1.11.0')) caps['NONSQUARE'] = true;
    // Companion 5.x sends rgb,png,webp; the simulator offers what it can encode (a client must fall back).
    if (atLeast(this.apiVersion, '1.12.0')) caps['BITMAP_FORMATS'] = 'rgb,png';
    if (atLeast(this.apiVersion, '1.14.0')) caps['ROTARY_AMOUNT'] = true;
    return { ...caps, ...this.capsOverride };
  }

  #closed(conn: Conn): void {
    if (!this.#conns.delete(conn)) return;
    for (const [id, d] of this.#devices) if (d.conn === conn) this.#devices.delete(id);
    this.#notify();
  }

  get #legacy(): boolean {
    return !atLeast(this.apiVersion, '1.8.0');
  }

  #input(conn: Conn, text: string): void {
    if (this.#stalled) return;
    let lines: string[];
    try {
      lines = conn.splitter.push(text);
    } catch (err) {
      if (!(err instanceof LineTooLongError)) throw err;
      conn.write(
        this.#legacy
          ? 'ERROR MESSAGE="Line too long"\n'
          : formatServerLine('ERROR', 'ERROR', null, { MESSAGE: 'Line too long' }),
      );
      conn.destroy();
      return;
    }
    for (const line of lines) {
      const parsed = splitLine(line);
      this.received.push({ connection: conn.id, transport: conn.transport, line, parsed, at: Date.now() });
      if (this.received.length > this.maxRecorded)
        this.received.splice(0, this.received.length - this.maxRecorded);
      this.#handle(conn, parsed);
    }
    this.#notify();
  }

  // ------------------------------------------------------------------------------------------ replies

  #send(conn: Conn, text: string): void {
    if (this.#stalled) return;
    if (this.replyDelayMs > 0) {
      const t = setTimeout(() => {
        if (this.#conns.has(conn) && !this.#stalled) conn.write(text);
      }, this.replyDelayMs);
      t.unref();
    } else conn.write(text);
  }

  #ok(conn: Conn, name: string, deviceId: string | null, args: Record<string, SatelliteValue> = {}): void {
    if (!this.#legacy) return this.#send(conn, formatServerLine(name, 'OK', deviceId, args));
    // Companion 3.x: ADD-DEVICE/REMOVE-DEVICE echo DEVICEID, the other OKs are bare.
    const withId = name === 'ADD-DEVICE' || name === 'REMOVE-DEVICE';
    this.#send(
      conn,
      formatLegacyLine(withId && deviceId ? [name, 'OK', `DEVICEID="${deviceId}"`] : [name, 'OK']),
    );
  }

  #error(conn: Conn, name: string, deviceId: string | undefined, message: string): void {
    if (!this.#legacy)
      return this.#send(conn, formatServerLine(name, 'ERROR', deviceId ?? null, { MESSAGE: message }));
    const t = [name, 'ERROR'];
    if (deviceId) t.push(`DEVICEID="${deviceId}"`);
    t.push(`MESSAGE="${message}"`);
    this.#send(conn, formatLegacyLine(t));
  }

  #handle(conn: Conn, msg: SatelliteLine): void {
    const p = msg.params;
    const v = (min: string): boolean => atLeast(this.apiVersion, min);
    switch (msg.name) {
      case 'PING':
        return this.#send(
          conn,
          this.#legacy ? `PONG ${msg.body}\n` : formatServerLine(`PONG ${msg.body}`, null, null),
        );
      case 'PONG':
        return;
      case 'QUIT':
        return conn.destroy();
      case 'ADD-DEVICE':
        return this.#addDevice(conn, p);
      case 'REMOVE-DEVICE': {
        const d = this.#device(conn, msg.name, p);
        if (!d) return;
        this.#devices.delete(d.id);
        return this.#ok(conn, msg.name, d.id);
      }
      case 'KEY-PRESS':
      case 'KEY-ROTATE': {
        if (msg.name === 'KEY-ROTATE' && !v('1.3.0')) break;
        const d = this.#device(conn, msg.name, p);
        if (!d) return;
        if (!p['KEY']) return this.#error(conn, msg.name, d.id, 'Missing KEY');
        const xy = this.#parseKey(d, String(p['KEY']));
        if (!xy) return this.#error(conn, msg.name, d.id, 'Invalid KEY');
        if (msg.name === 'KEY-PRESS') {
          if (!p['PRESSED']) return this.#error(conn, msg.name, d.id, 'Missing PRESSED');
          {
            // Companion answers OK synchronously; the redraw of the pushed button follows asynchronously.
            const down = !isFalsey(p['PRESSED']);
            setImmediate(() => this.#pushed(d.page, xy.row, xy.column, down));
          }
        } else if (!p['DIRECTION']) return this.#error(conn, msg.name, d.id, 'Missing DIRECTION');
        return this.#ok(conn, msg.name, d.id);
      }
      case 'SET-VARIABLE-VALUE': {
        if (!v('1.7.0')) break;
        const d = this.#device(conn, msg.name, p);
        if (!d) return;
        const name = p['VARIABLE'];
        if (!name || name === true) return this.#error(conn, msg.name, d.id, 'Missing VARIABLE');
        const value = p['VALUE'];
        if (value === undefined || value === true) return this.#error(conn, msg.name, d.id, 'Missing VALUE');
        // Unknown ids are accepted silently, as Companion does.
        if (d.inputs.has(name)) this.inputValues.set(name, fromBase64(value));
        return this.#ok(conn, msg.name, d.id, v('1.7.1') ? { VARIABLE: name } : {});
      }
      case 'PINCODE-KEY': {
        if (!v('1.8.0')) break;
        const d = this.#device(conn, msg.name, p);
        if (!d) return;
        if (!p['KEY']) return this.#error(conn, msg.name, d.id, 'Missing KEY');
        const k = Number(p['KEY']);
        if (isNaN(k) || k < 0 || k > 9) return this.#error(conn, msg.name, d.id, 'Invalid KEY');
        return this.#ok(conn, msg.name, d.id);
      }
      case 'CHANGE-PAGE': {
        if (!v('1.10.0')) break;
        const d = this.#device(conn, msg.name, p);
        if (!d) return;
        if (p['DIRECTION'] === undefined) return this.#error(conn, msg.name, d.id, 'Missing DIRECTION');
        return this.#ok(conn, msg.name, d.id);
      }
      case 'ADD-SUB':
      case 'REMOVE-SUB':
      case 'SUB-PRESS':
      case 'SUB-ROTATE':
        if (!v('1.10.0')) break;
        return this.#sub(conn, msg.name, p);
    }
    this.#send(
      conn,
      this.#legacy
        ? `ERROR MESSAGE="Unknown command: ${msg.name}"\n`
        : formatServerLine('ERROR', null, null, { MESSAGE: `Unknown command: ${msg.name}` }),
    );
  }

  #device(conn: Conn, name: string, p: Record<string, string | true>): SimDevice | undefined {
    if (!p['DEVICEID']) {
      this.#error(conn, name, undefined, 'Missing DEVICEID');
      return undefined;
    }
    const id = p['DEVICEID'] === true ? 'true' : p['DEVICEID'];
    const d = this.#devices.get(id);
    if (!d || d.conn !== conn) {
      this.#error(conn, name, id, 'Device not found');
      return undefined;
    }
    return d;
  }

  #parseKey(d: SimDevice, key: string): { row: number; column: number } | undefined {
    const rows = Math.ceil(d.keysTotal / d.keysPerRow);
    const m = atLeast(this.apiVersion, '1.6.0') ? /^\+?(\d+)\/\+?(\d+)$/.exec(key) : null;
    if (m && Number(m[1]) < rows && Number(m[2]) < d.keysPerRow)
      return { row: Number(m[1]), column: Number(m[2]) };
    const n = Number(key);
    if (!isNaN(n) && n >= 0 && n < d.keysPerRow * rows)
      return { row: Math.floor(n / d.keysPerRow), column: n % d.keysPerRow };
    return undefined;
  }

  #addDevice(conn: Conn, p: Record<string, string | true>): void {
    const name = 'ADD-DEVICE';
    if (!p['DEVICEID'] || p['DEVICEID'] === true)
      return this.#error(conn, name, undefined, 'Missing DEVICEID');
    const id = p['DEVICEID'];
    if (!p['PRODUCT_NAME']) return this.#error(conn, name, id, 'Missing PRODUCT_NAME');
    const serial = p['SERIAL'] && atLeast(this.apiVersion, '1.10.0') ? String(p['SERIAL']) : id;
    if (serial.startsWith('emulator:') || serial.startsWith('group:'))
      return this.#error(conn, name, id, serial === id ? 'Reserved DEVICEID' : 'Reserved SERIAL');
    const existing = this.#devices.get(id);
    if (existing) {
      if (existing.conn === conn) return this.#error(conn, name, id, 'Device already added');
      // Companion answers the socket that owns the id; the new socket gets no reply.
      return this.#error(existing.conn, name, id, 'Device exists elsewhere');
    }
    const keysTotal = p['KEYS_TOTAL'] ? Number(p['KEYS_TOTAL']) : 32;
    if (isNaN(keysTotal) || keysTotal <= 0 || keysTotal > 2000)
      return this.#error(conn, name, id, 'Invalid KEYS_TOTAL');
    const keysPerRow = p['KEYS_PER_ROW'] ? Number(p['KEYS_PER_ROW']) : 8;
    if (isNaN(keysPerRow) || keysPerRow <= 0 || keysPerRow > 1000)
      return this.#error(conn, name, id, 'Invalid KEYS_PER_ROW');
    const outputs = new Set<string>();
    const inputs = new Set<string>();
    if (atLeast(this.apiVersion, '1.7.0') && typeof p['VARIABLES'] === 'string') {
      try {
        const defs = JSON.parse(fromBase64(p['VARIABLES'])) as unknown;
        for (const f of Array.isArray(defs) ? (defs as Record<string, unknown>[]) : []) {
          if (
            (f['type'] !== 'input' && f['type'] !== 'output') ||
            typeof f['id'] !== 'string' ||
            typeof f['name'] !== 'string'
          )
            throw new Error('Invalid transferable value definition');
          (f['type'] === 'input' ? inputs : outputs).add(f['id']);
        }
      } catch {
        return this.#error(conn, name, id, 'Invalid VARIABLES');
      }
    }
    let bitmaps = 0;
    if (p['BITMAPS'] !== undefined && !isFalsey(p['BITMAPS'])) {
      bitmaps = Number(p['BITMAPS']);
      if (isNaN(bitmaps) || bitmaps < 5 || !atLeast(this.apiVersion, '1.5.0')) bitmaps = 72;
    }
    const c = p['COLORS'];
    const colors: SimDevice['colors'] =
      c === 'hex' || c === 'rgb'
        ? atLeast(this.apiVersion, '1.6.0')
          ? c
          : 'hex'
        : isTruthy(c)
          ? 'hex'
          : false;
    const d: SimDevice = {
      id,
      conn,
      keysTotal,
      keysPerRow,
      bitmaps,
      bitmapFormat: this.#bitmapFormat(p['BITMAP_FORMAT']),
      colors,
      text: p['TEXT'] !== undefined && isTruthy(p['TEXT']),
      textStyle:
        atLeast(this.apiVersion, '1.4.0') && p['TEXT_STYLE'] !== undefined && isTruthy(p['TEXT_STYLE']),
      brightness:
        !atLeast(this.apiVersion, '1.7.0') || p['BRIGHTNESS'] === undefined || isTruthy(p['BRIGHTNESS']),
      pincodeLock:
        atLeast(this.apiVersion, '1.8.0') &&
        (p['PINCODE_LOCK'] === 'FULL' || p['PINCODE_LOCK'] === 'PARTIAL'),
      outputs,
      inputs,
      page: 1,
      lastOutput: new Map(),
    };
    this.#devices.set(id, d);
    this.#ok(conn, name, id);
    // Companion: brightness on the next tick, then one KEY-STATE per key, then outputs after the debounce.
    setImmediate(() => {
      if (this.#devices.get(id) !== d) return;
      if (d.brightness) this.#sendBrightness(d);
      this.#redraw(d);
      const t = setTimeout(() => this.#sendOutputs(d), 5);
      t.unref();
    });
  }

  #sub(conn: Conn, name: string, p: Record<string, string | true>): void {
    if (!this.subscriptions) return this.#error(conn, name, undefined, 'Subscriptions not enabled');
    const subId = p['SUBID'];
    if (!subId || subId === true) return this.#error(conn, name, undefined, 'Missing SUBID');
    if (name === 'ADD-SUB') {
      if (!/^[a-zA-Z0-9\-/]+$/.test(subId)) return this.#error(conn, name, undefined, 'Invalid SUBID');
      if (conn.subs.has(subId)) return this.#error(conn, name, undefined, 'SUBID already in use');
      const loc = p['LOCATION'];
      if (!loc || loc === true) return this.#error(conn, name, undefined, 'Missing LOCATION');
      const m = /^(\d+)\/(\d+)\/(\d+)$/.exec(loc);
      if (!m) return this.#error(conn, name, undefined, 'Invalid LOCATION');
      let bitmaps = 0;
      if (p['BITMAP'] !== undefined && !isFalsey(p['BITMAP'])) {
        bitmaps = Number(p['BITMAP']);
        if (isNaN(bitmaps) || bitmaps < 5) bitmaps = 72;
      }
      const where: SimSub = {
        page: Number(m[1]),
        row: Number(m[2]),
        column: Number(m[3]),
        bitmaps,
        bitmapFormat: this.#bitmapFormat(p['BITMAP_FORMAT']),
      };
      conn.subs.set(subId, where);
      this.#send(conn, formatServerLine(name, 'OK', null, { SUBID: subId }));
      this.#sendSubState(conn, subId, where);
      return;
    }
    const where = conn.subs.get(subId);
    if (!where) return this.#error(conn, name, undefined, 'Unknown SUBID');
    if (name === 'REMOVE-SUB') conn.subs.delete(subId);
    else if (name === 'SUB-PRESS') {
      if (!p['PRESSED']) return this.#error(conn, name, undefined, 'Missing PRESSED');
      const down = !isFalsey(p['PRESSED']);
      setImmediate(() => this.#pushed(where.page, where.row, where.column, down));
    } else if (!p['DIRECTION']) return this.#error(conn, name, undefined, 'Missing DIRECTION');
    this.#send(conn, formatServerLine(name, 'OK', null, { SUBID: subId }));
  }

  // ------------------------------------------------------------------------------------------ drawing

  #style(page: number, row: number, column: number): ButtonStyle {
    return this.#buttons.get(`${page}/${row}/${column}`) ?? {};
  }

  #pushed(page: number, row: number, column: number, pressed: boolean): void {
    const k = `${page}/${row}/${column}`;
    const prev = this.#buttons.get(k) ?? {};
    if ((prev.pressed ?? false) === pressed) return;
    this.setButton(page, row, column, { ...prev, pressed });
  }

  #keyState(d: SimDevice, index: number): string {
    const row = Math.floor(index / d.keysPerRow);
    const column = index % d.keysPerRow;
    const s = this.#style(d.page, row, column);
    const type = s.type ?? 'BUTTON';
    const hex = (c: string | undefined): string => c ?? BLACK;
    const rgb = (c: string | undefined): string => {
      const n = parseInt(hex(c).slice(1), 16);
      return `rgb(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255})`;
    };
    const colour = (c: string | undefined): string => (d.colors === 'rgb' ? rgb(c) : hex(c));
    const bitmap = d.bitmaps ? this.#bitmap(d.bitmaps, s.color, d.bitmapFormat) : undefined;
    if (this.#legacy) {
      let params = '';
      if (d.colors) params += ` COLOR=${colour(s.color)} TEXTCOLOR=${colour(s.textColor)}`;
      if (bitmap) params += ` BITMAP=${bitmap}`;
      if (d.text) params += ` TEXT=${toBase64(s.text ?? '')}`;
      if (d.textStyle) params += ` FONT_SIZE=${s.fontSize ?? 'auto'}`;
      params += ` PRESSED=${s.pressed ? 'true' : 'false'}`;
      return `KEY-STATE DEVICEID=${d.id} KEY=${index} TYPE=${type} ${params}\n`;
    }
    const args: Record<string, SatelliteValue> = { KEY: index };
    if (atLeast(this.apiVersion, '1.10.0')) args['LOCATION'] = `${d.page}/${row}/${column}`;
    Object.assign(args, this.#styleArgs(s, d.colors, bitmap, d.text, d.textStyle));
    return formatServerLine('KEY-STATE', null, d.id, args);
  }

  #styleArgs(
    s: ButtonStyle,
    colors: 'hex' | 'rgb' | false,
    bitmap: string | undefined,
    text: boolean,
    textStyle: boolean,
  ): Record<string, SatelliteValue> {
    const args: Record<string, SatelliteValue> = { PRESSED: !!s.pressed, TYPE: s.type ?? 'BUTTON' };
    if (bitmap) args['BITMAP'] = bitmap;
    if (colors) {
      const conv = (c: string | undefined): string => {
        const h = c ?? BLACK;
        if (colors === 'hex') return h;
        const n = parseInt(h.slice(1), 16);
        return `rgb(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255})`;
      };
      args['COLOR'] = conv(s.color);
      args['TEXTCOLOR'] = conv(s.textColor);
    }
    if (text) args['TEXT'] = toBase64(s.text ?? '');
    if (textStyle) args['FONT_SIZE'] = s.fontSize ?? 'auto';
    return args;
  }

  /** BITMAP_FORMAT (1.12.0): one this simulator offers, else rgb (Companion's `parseSatelliteBitmapFormat`). */
  #bitmapFormat(v: string | true | undefined): SimBitmapFormat {
    return atLeast(this.apiVersion, '1.12.0') && v === 'png' ? 'png' : 'rgb';
  }

  /**
   * The button's bitmap for `BITMAPS=size`, filled with its colour: raw RGB (`size × size × 3` bytes), or
   * that image as a PNG (RFC 2083: IHDR 8-bit truecolour, one IDAT of filter-0 rows, IEND) in a data URL.
   */
  #bitmap(size: number, color: string | undefined, format: SimBitmapFormat = 'rgb'): string {
    if (format === 'png') {
      const raw = Buffer.from(this.#bitmap(size, color), 'base64');
      const rows = Buffer.alloc(size * (size * 3 + 1));
      for (let y = 0; y < size; y++) raw.copy(rows, y * (size * 3 + 1) + 1, y * size * 3, (y + 1) * size * 3);
      const chunk = (type: string, data: Buffer): Buffer => {
        const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
        const out = Buffer.alloc(body.length + 8);
        out.writeUInt32BE(data.length, 0);
        body.copy(out, 4);
        out.writeUInt32BE(crc32(body), body.length + 4);
        return out;
      };
      const ihdr = Buffer.alloc(13);
      ihdr.writeUInt32BE(size, 0);
      ihdr.writeUInt32BE(size, 4);
      ihdr[8] = 8;
      ihdr[9] = 2;
      // Companion sends compressed formats as a data URL (SatelliteRenderUtil.ts `buildSatelliteStyleArgs`).
      const png = Buffer.concat([
        Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
        chunk('IHDR', ihdr),
        chunk('IDAT', deflateSync(rows)),
        chunk('IEND', Buffer.alloc(0)),
      ]);
      return `data:image/png;base64,${png.toString('base64')}`;
    }
    const n = parseInt((color ?? BLACK).slice(1), 16);
    const buf = Buffer.alloc(size * size * 3);
    for (let i = 0; i < buf.length; i += 3) {
      buf[i] = (n >> 16) & 255;
      buf[i + 1] = (n >> 8) & 255;
      buf[i + 2] = n & 255;
    }
    return buf.toString('base64');
  }

  #redraw(d: SimDevice): void {
    if (this.#locked && d.pincodeLock) return this.#sendLocked(d);
    for (let i = 0; i < d.keysTotal; i++) this.#send(d.conn, this.#keyState(d, i));
  }

  #sendBrightness(d: SimDevice): void {
    this.#send(
      d.conn,
      this.#legacy
        ? formatLegacyLine(['BRIGHTNESS', `DEVICEID=${d.id}`, `VALUE=${this.#brightness}`])
        : formatServerLine('BRIGHTNESS', null, d.id, { VALUE: this.#brightness }),
    );
  }

  #sendLocked(d: SimDevice): void {
    const args: Record<string, SatelliteValue> = { LOCKED: this.#locked, CHARACTER_COUNT: 0 };
    if (atLeast(this.apiVersion, '1.10.1')) args['ROTATION'] = 0;
    this.#send(d.conn, formatServerLine('LOCKED-STATE', null, d.id, args));
  }

  #sendOutputs(d: SimDevice): void {
    if (this.#devices.get(d.id) !== d) return;
    for (const id of d.outputs) {
      const value = this.#outputs.get(id);
      if (value === undefined || d.lastOutput.get(id) === value) continue;
      d.lastOutput.set(id, value);
      this.#send(
        d.conn,
        this.#legacy
          ? formatLegacyLine([
              'VARIABLE-VALUE',
              `DEVICEID=${d.id}`,
              `VARIABLE="${id}"`,
              `VALUE="${toBase64(value)}"`,
            ])
          : formatServerLine('VARIABLE-VALUE', null, d.id, { VARIABLE: id, VALUE: toBase64(value) }),
      );
    }
  }

  #sendSubState(conn: Conn, subId: string, where: SimSub): void {
    const s = this.#style(where.page, where.row, where.column);
    const bitmap = where.bitmaps ? this.#bitmap(where.bitmaps, s.color, where.bitmapFormat) : undefined;
    this.#send(
      conn,
      formatServerLine('SUB-STATE', null, null, {
        SUBID: subId,
        ...this.#styleArgs(s, 'hex', bitmap, true, false),
      }),
    );
  }

  // ------------------------------------------------------------------------------------------ scripting

  /** Change the button at page/row/column (what a Companion user or a feedback does); redraws where shown. */
  setButton(page: number, row: number, column: number, style: ButtonStyle): void {
    this.#buttons.set(`${page}/${row}/${column}`, { ...style });
    for (const d of this.#devices.values()) {
      if (d.page !== page || column >= d.keysPerRow) continue;
      const index = row * d.keysPerRow + column;
      if (index >= d.keysTotal || (this.#locked && d.pincodeLock)) continue;
      this.#send(d.conn, this.#keyState(d, index));
    }
    for (const c of this.#conns)
      for (const [subId, w] of c.subs)
        if (w.page === page && w.row === row && w.column === column) this.#sendSubState(c, subId, w);
  }

  button(page: number, row: number, column: number): ButtonStyle {
    return { ...this.#style(page, row, column) };
  }

  /** Move a surface to another page: every key is redrawn (Companion behaviour). */
  setPage(deviceId: string, page: number): void {
    const d = this.#devices.get(deviceId);
    if (!d) throw new Error(`no device ${deviceId}`);
    d.page = page;
    this.#redraw(d);
  }

  setBrightness(value: number): void {
    this.#brightness = value;
    for (const d of this.#devices.values()) if (d.brightness) this.#sendBrightness(d);
  }

  /** The value of the expression a user mapped to output `id` changed (sent only on change, like Companion). */
  setOutput(id: string, value: string): void {
    this.#outputs.set(id, value);
    for (const d of this.#devices.values()) this.#sendOutputs(d);
  }

  setLocked(locked: boolean): void {
    this.#locked = locked;
    for (const d of this.#devices.values()) {
      if (d.pincodeLock) this.#sendLocked(d);
      if (!locked) this.#redraw(d);
    }
  }

  clearKeys(deviceId: string): void {
    const d = this.#devices.get(deviceId);
    if (!d) throw new Error(`no device ${deviceId}`);
    this.#send(
      d.conn,
      this.#legacy
        ? formatLegacyLine(['KEYS-CLEAR', `DEVICEID=${d.id}`])
        : formatServerLine('KEYS-CLEAR', null, d.id),
    );
  }

  // ------------------------------------------------------------------------------------------ faults

  /** Drop every connection (as a crash or a cable pull seen from Companion's side). */
  dropConnections(): void {
    for (const c of [...this.#conns]) c.destroy();
  }

  /** Stop reading and answering without closing anything (a hung peer); idle timeouts are suspended. */
  stall(on: boolean): void {
    this.#stalled = on;
  }

  /** Write raw text to every connection. */
  sendRaw(text: string): void {
    for (const c of this.#conns) c.write(text);
  }

  // ------------------------------------------------------------------------------------------ assertions

  linesNamed(name: string): ReceivedLine[] {
    return this.received.filter((r) => r.parsed.name === name);
  }

  /** Resolve when `predicate` holds (checked after every received line or connection change). */
  async waitFor(predicate: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
    if (predicate()) return;
    await new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!predicate()) return;
        cleanup();
        resolve();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`companion-sim: timed out waiting for ${what}`));
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
    });
  }

  #notify(): void {
    for (const w of [...this.#waiters]) w();
  }
}
