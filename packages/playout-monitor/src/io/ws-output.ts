/**
 * WebSocket output on the HTTP server's own port (same origin as the pages), path `/ws` (and `/`).
 *
 * Server → client (JSON text frames):
 *   {type:"playoutStates", timestamp, data:[device…], protocols}  on connect (and after a reset or a
 *                                                                 skipped update): the whole state
 *   {type:"event", timestamp, data:{at,id,name,kind,from?,to?,reason?}} a state change or link loss
 *                                                                 (the snapshot's `events` holds the last 50)
 *   {type:"deviceState", timestamp, data: device}                 a device changed; per device at most
 *                                                                 one every `updateIntervalMs` (the
 *                                                                 first change goes at once, later ones
 *                                                                 are coalesced to the latest state)
 *   {type:"heartbeat", timestamp, updated:{<id>: epoch ms}}       every second: the pages age the data
 *                                                                 and notice a dead connection
 *   {type:"config", data:{settings, servers}}                     answer to {type:"getConfig"}
 *   {type:"error", error:{code, message}}                         answer to anything else
 * Client → server: {type:"getConfig"}. Frames over 4 KiB close the connection (1009).
 *
 * The heartbeat (1 s) and the protocol ping (15 s) run while a client is connected; with none both timers
 * are stopped and the next client starts them (docs/OUTPUTS.md "WebSocket").
 * A browser's `Origin`, when sent, must name the same host as the request (close 1008 otherwise).
 * A client whose send buffer holds over 1 MiB is skipped and gets a full `playoutStates` once it drains.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Server } from 'node:http';
import { WebSocketServer, WebSocket } from 'ws';
import { rejectUpgrade, type Logger } from '@broadcast-ops/core';
import { fail } from '../errors.ts';
import type { OutputDevice, OutputView } from '../domain/output-view.ts';

export const WS_PATHS = ['/ws', '/'] as const;
export const WS_MAX_PAYLOAD = 4096;
export const WS_MAX_BUFFERED = 1 << 20;
export const WS_MAX_CLIENTS = 256;
export const HEARTBEAT_MS = 1000;

export interface WsOutputOptions {
  view: OutputView;
  updateIntervalMs: number;
  logger: Logger;
  /** Protocol status for the snapshot message. */
  protocols: () => unknown;
  /** The configuration for `getConfig` (secrets already removed). */
  config: () => unknown;
  heartbeatMs?: number;
  pingMs?: number;
  /** The Host allow-list (io/access.ts): an upgrade naming another host gets 421. */
  hostAllowed?: (host: string | undefined) => boolean;
}

interface Client {
  ws: WebSocket;
  needsSnapshot: boolean;
  alive: boolean;
}

/** Same-origin rule: no Origin (not a browser) or an Origin whose host equals the Host header. */
export function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

export class WsOutput {
  readonly #o: WsOutputOptions;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: WS_MAX_PAYLOAD,
  });
  readonly #clients = new Set<Client>();
  readonly #lastSent = new Map<number, number>();
  readonly #pending = new Map<number, NodeJS.Timeout>();
  #updateIntervalMs: number;
  #timers: NodeJS.Timeout[] = [];
  #unsubscribe: (() => void)[] = [];
  #server: Server | undefined;
  readonly #onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.#upgrade(req, socket, head);
  };

  constructor(options: WsOutputOptions) {
    this.#o = options;
    this.#updateIntervalMs = options.updateIntervalMs;
  }

  get clients(): number {
    return this.#clients.size;
  }

  set updateIntervalMs(ms: number) {
    this.#updateIntervalMs = ms;
  }

  attach(server: Server): void {
    this.#server = server;
    server.on('upgrade', this.#onUpgrade);
    this.#unsubscribe = [
      this.#o.view.onEvent((e) => {
        const text = JSON.stringify({ type: 'event', timestamp: Date.now(), data: e });
        for (const c of this.#clients) this.#send(c, text);
      }),
      this.#o.view.onChange((d) => {
        this.#onChange(d.id);
      }),
      this.#o.view.onReset(() => {
        for (const c of this.#clients) c.needsSnapshot = true;
        this.#flushSnapshots();
      }),
    ];
  }

  /** True while the heartbeat and ping timers run (a client connected); tests. */
  get beating(): boolean {
    return this.#timers.length > 0;
  }

  #startTimers(): void {
    if (this.#timers.length > 0 || !this.#server) return;
    const heartbeat = setInterval(() => this.#heartbeat(), this.#o.heartbeatMs ?? HEARTBEAT_MS);
    const ping = setInterval(() => this.#ping(), this.#o.pingMs ?? 15_000);
    heartbeat.unref();
    ping.unref();
    this.#timers = [heartbeat, ping];
  }

  #stopTimers(): void {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (!(WS_PATHS as readonly string[]).includes(path)) {
      rejectUpgrade(socket, fail('NOT_FOUND', `no WebSocket at ${path}`));
      return;
    }
    if (this.#o.hostAllowed && !this.#o.hostAllowed(req.headers.host)) {
      rejectUpgrade(socket, fail('HOST_NOT_ALLOWED'));
      return;
    }
    if (this.#clients.size >= WS_MAX_CLIENTS) {
      rejectUpgrade(socket, fail('CLIENTS_FULL'));
      return;
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      if (!sameOrigin(req)) {
        ws.close(1008, 'cross-origin WebSocket refused');
        return;
      }
      this.#connected(ws);
    });
  }

  #connected(ws: WebSocket): void {
    const client: Client = { ws, needsSnapshot: false, alive: true };
    this.#clients.add(client);
    this.#startTimers();
    ws.on('pong', () => (client.alive = true));
    ws.on('close', () => this.#clients.delete(client));
    ws.on('error', () => ws.terminate());
    ws.on('message', (data, isBinary) => {
      this.#message(client, isBinary ? '' : Buffer.from(data as Buffer).toString('utf8'));
    });
    this.#send(client, this.#snapshot());
  }

  #message(client: Client, text: string): void {
    let type: unknown;
    try {
      type = (JSON.parse(text) as { type?: unknown }).type;
    } catch {
      type = undefined;
    }
    if (type === 'getConfig') {
      this.#send(client, JSON.stringify({ type: 'config', data: this.#o.config() }));
    } else {
      this.#send(
        client,
        JSON.stringify({
          type: 'error',
          error: { code: 'unsupported', message: 'only {"type":"getConfig"} is understood' },
        }),
      );
    }
  }

  #snapshot(): string {
    return JSON.stringify({
      type: 'playoutStates',
      timestamp: Date.now(),
      data: this.#o.view.list(),
      events: this.#o.view.events(),
      protocols: this.#o.protocols(),
    });
  }

  #onChange(id: number): void {
    if (this.#pending.has(id)) return; // a send is already due; it will carry the latest state
    const now = performance.now();
    const wait = (this.#lastSent.get(id) ?? -Infinity) + this.#updateIntervalMs - now;
    if (wait <= 0) {
      this.#sendDevice(id);
      return;
    }
    const t = setTimeout(() => {
      this.#pending.delete(id);
      this.#sendDevice(id);
    }, wait);
    this.#pending.set(id, t);
  }

  #sendDevice(id: number): void {
    const d: Readonly<OutputDevice> | undefined = this.#o.view.get(id);
    if (!d) return;
    this.#lastSent.set(id, performance.now());
    if (this.#clients.size === 0) return;
    const text = JSON.stringify({ type: 'deviceState', timestamp: Date.now(), data: d });
    for (const c of this.#clients) this.#send(c, text);
  }

  #send(client: Client, text: string): void {
    if (client.ws.readyState !== WebSocket.OPEN) return;
    if (client.ws.bufferedAmount > WS_MAX_BUFFERED) {
      client.needsSnapshot = true;
      return;
    }
    client.ws.send(text);
  }

  #flushSnapshots(): void {
    let snapshot: string | undefined;
    for (const c of this.#clients) {
      if (!c.needsSnapshot || c.ws.bufferedAmount > WS_MAX_BUFFERED) continue;
      c.needsSnapshot = false;
      snapshot ??= this.#snapshot();
      this.#send(c, snapshot);
    }
  }

  #heartbeat(): void {
    this.#flushSnapshots();
    if (this.#clients.size === 0) {
      // The last client gone: both timers sleep until the next one connects.
      this.#stopTimers();
      return;
    }
    const updated: Record<number, number> = {};
    for (const d of this.#o.view.list()) updated[d.id] = d.updated;
    const text = JSON.stringify({ type: 'heartbeat', timestamp: Date.now(), updated });
    for (const c of this.#clients) this.#send(c, text);
  }

  #ping(): void {
    for (const c of this.#clients) {
      if (!c.alive) {
        c.ws.terminate();
        continue;
      }
      c.alive = false;
      c.ws.ping();
    }
  }

  async close(): Promise<void> {
    for (const u of this.#unsubscribe) u();
    this.#stopTimers();
    for (const t of this.#pending.values()) clearTimeout(t);
    this.#pending.clear();
    this.#server?.off('upgrade', this.#onUpgrade);
    this.#server = undefined; // no timer starts after close
    for (const c of this.#clients) c.ws.terminate();
    this.#clients.clear();
    await new Promise<void>((resolve) => this.#wss.close(() => resolve()));
  }
}
