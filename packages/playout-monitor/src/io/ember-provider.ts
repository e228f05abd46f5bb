/**
 * Ember+ provider (S101 framing over TCP, EmBER encoding, Glow DTD; Lawo "Ember+ Documentation", 2.x)
 * on `settings.emberPlusPort`, with exactly the spec's tree and nothing else:
 *
 *   Info [1]                Version [1.1] String
 *   Devices [2]
 *     Device_<id> [2.<id>]  State [.1] String, Timecode [.2] String, Filename [.3] String,
 *                           Connected [.4] Boolean, Type [.5] String
 *                           and, for a vision mixer (`http_mixer`) only, Tally [.6] String: the tally
 *                           of every input as `<key>=<program|preview|off|unknown>` joined by `;`
 *                           (docs/TALLY.md, "Outputs"); the other kinds' nodes are exactly the spec's
 *
 * `<id>` is the device's configuration id, used as the node number too, so paths stay the same when other
 * devices are added or removed. Every parameter has access `read`; a consumer's write is refused (the
 * provider answers with the unchanged value, as the Ember+ documentation prescribes for a rejected set).
 *
 * The consumer side is this module's own: consumer bytes go through the bounded S101 decoder
 * (`protocol/s101.ts`) and the bounded Glow request decoder (`protocol/glow.ts`); emberplus-connection is
 * used only to *encode* the provider's own tree (`berEncode`, public API). Why: docs/EMBERPLUS.md.
 *
 * Per consumer:
 * - malformed input (S101 or Glow) disconnects it, counted by reason;
 * - outgoing value changes are coalesced: a consumer whose socket holds more than
 *   `EMBER_SEND_HIGH_WATER` unsent bytes gets nothing new until it drains, then only the latest value of
 *   each changed parameter; one that stays blocked for `stallMs`, or whose unsent bytes exceed
 *   `EMBER_SEND_HARD_LIMIT`, is disconnected;
 * - a consumer silent for `probeAfterMs` gets an S101 keep-alive request and is disconnected when it
 *   stays silent `probeTimeoutMs` longer.
 * These checks run every 250 ms while a consumer is connected; with none the timer is stopped (the next
 * consumer starts it), so a provider nobody reads wakes nothing (docs/EMBERPLUS.md).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { berEncode, Model, Types } from 'emberplus-connection';
import type { Logger } from '@broadcast-ops/core';
import type { OutputDevice, OutputView } from '../domain/output-view.ts';
import { decodeGlowRequests, type GlowRequest } from '../protocol/glow.ts';
import { encodeEmberFrames, encodeKeepalive, S101Decoder, S101Error } from '../protocol/s101.ts';

type Node = Model.NumberedTreeNode<Model.EmberElement>;

export const EMBER_MAX_CONSUMERS = 64;
/** Unsent bytes above which value updates for a consumer are held back (and coalesced). */
export const EMBER_SEND_HIGH_WATER = 64 * 1024;
/** Unsent bytes at which a consumer is disconnected at once (replies it asked for and never read). */
export const EMBER_SEND_HARD_LIMIT = 1024 * 1024;
/** Period of the stall and keep-alive checks while a consumer is connected (docs/EMBERPLUS.md). */
const HOUSEKEEPING_MS = 250;

const PARAMS = [
  { number: 1, identifier: 'State', type: Model.ParameterType.String, value: (d: OutputDevice) => d.state },
  {
    number: 2,
    identifier: 'Timecode',
    type: Model.ParameterType.String,
    value: (d: OutputDevice) => d.timecode,
  },
  {
    number: 3,
    identifier: 'Filename',
    type: Model.ParameterType.String,
    value: (d: OutputDevice) => d.filename,
  },
  {
    number: 4,
    identifier: 'Connected',
    type: Model.ParameterType.Boolean,
    value: (d: OutputDevice) => d.connected,
  },
  { number: 5, identifier: 'Type', type: Model.ParameterType.String, value: (d: OutputDevice) => d.type },
] as const;

/** A mixer's per-input tally, keyed by vMix GUID (docs/TALLY.md, "Outputs"). */
const TALLY_PARAM = {
  number: 6,
  identifier: 'Tally',
  type: Model.ParameterType.String,
  value: (d: OutputDevice) => (d.inputs ?? []).map((i) => `${i.key}=${i.tally}`).join(';'),
} as const;

const MIXER_PARAMS = [...PARAMS, TALLY_PARAM] as const;

/** The parameters of a device's node: the spec's five, and Tally for a mixer. */
function paramsOf(d: OutputDevice): readonly (typeof MIXER_PARAMS)[number][] {
  return d.type === 'http_mixer' ? MIXER_PARAMS : PARAMS;
}

// The library's model classes do not satisfy `exactOptionalPropertyTypes`; build them here, cast once.
function treeNode(number: number, contents: unknown, children?: Record<number, Node>): Node {
  return new Model.NumberedTreeNodeImpl(number, contents as Model.EmberElement, children) as unknown as Node;
}

function qualified(path: number[], contents: unknown, children?: Record<number, Node>): Node {
  return new Model.QualifiedElementImpl(
    path.join('.'),
    contents as Model.EmberElement,
    children,
  ) as unknown as Node;
}

function paramContents(identifier: string, type: Model.ParameterType, value: string | boolean): unknown {
  return new Model.ParameterImpl(
    type,
    identifier,
    undefined,
    value,
    undefined,
    undefined,
    Model.ParameterAccess.Read,
  );
}

function encodeRoot(elements: Node[]): Buffer {
  const collection: Record<number, Node> = {};
  elements.forEach((e, i) => (collection[i] = e));
  return encodeEmberFrames(berEncode(collection, Types.RootType.Elements));
}

export type DropReason = 'malformed' | 'stalled' | 'overflow' | 'silent';

export interface EmberProviderOptions {
  view: OutputView;
  port: number;
  address: string;
  version: string;
  logger: Logger;
  /** A consumer blocked (unsent bytes over the high water) this long is disconnected. */
  stallMs?: number;
  /** Silence after which a consumer gets a keep-alive request. */
  probeAfterMs?: number;
  /** Further silence after the keep-alive request before the consumer is disconnected. */
  probeTimeoutMs?: number;
}

interface Consumer {
  socket: Socket;
  decoder: S101Decoder;
  /** Paths (dotted) this consumer asked for (GetDirectory or Subscribe). */
  subscriptions: Set<string>;
  /** Parameters whose latest value is still to be sent: dotted path -> [device id, param number]. */
  pending: Map<string, [number, number]>;
  /** Device nodes whose description is still to be sent. */
  pendingNodes: Set<number>;
  blockedSinceMs: number | undefined;
  lastRxMs: number;
  probeSentMs: number | undefined;
}

export class EmberProvider {
  readonly #o: EmberProviderOptions;
  #server: Server | undefined;
  readonly #consumers = new Set<Consumer>();
  #unsubscribe: (() => void)[] = [];
  #port = 0;
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  /** The devices as last published, by id. */
  #devices = new Map<number, OutputDevice>();
  readonly #droppedCounts: Record<DropReason, number> = { malformed: 0, stalled: 0, overflow: 0, silent: 0 };

  constructor(options: EmberProviderOptions) {
    this.#o = options;
  }

  get running(): boolean {
    return this.#running;
  }

  /** The bound TCP port (differs from the configured one when 0 was configured). */
  get port(): number {
    return this.#port;
  }

  get consumers(): number {
    return this.#consumers.size;
  }

  get dropped(): Readonly<Record<DropReason, number>> {
    return this.#droppedCounts;
  }

  async start(): Promise<number> {
    this.#devices = new Map(this.#o.view.list().map((d) => [d.id, d]));
    const server = createServer({ noDelay: true }, (socket) => this.#accept(socket));
    server.maxConnections = EMBER_MAX_CONSUMERS;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#o.port, this.#o.address, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => this.#o.logger.warn({ err }, 'Ember+ provider error'));
    const addr = server.address();
    this.#port = typeof addr === 'object' && addr ? addr.port : this.#o.port;
    this.#server = server;
    this.#unsubscribe = [
      this.#o.view.onChange((d, fields) => this.#onChange(d, fields)),
      this.#o.view.onReset(() => this.#onReset()),
    ];
    this.#running = true;
    return this.#port;
  }

  #accept(socket: Socket): void {
    const c: Consumer = {
      socket,
      decoder: new S101Decoder(),
      subscriptions: new Set(),
      pending: new Map(),
      pendingNodes: new Set(),
      blockedSinceMs: undefined,
      lastRxMs: performance.now(),
      probeSentMs: undefined,
    };
    this.#consumers.add(c);
    if (!this.#timer) {
      this.#timer = setInterval(() => this.#housekeeping(), HOUSEKEEPING_MS);
      this.#timer.unref();
    }
    socket.on('data', (chunk: Buffer) => this.#receive(c, chunk));
    socket.on('drain', () => this.#flush(c));
    socket.on('error', (err) => this.#o.logger.debug({ err }, 'Ember+ consumer socket error'));
    socket.on('close', () => this.#consumers.delete(c));
  }

  #drop(c: Consumer, reason: DropReason, detail: string): void {
    if (c.socket.destroyed) return;
    this.#droppedCounts[reason]++;
    this.#o.logger.warn({ remote: c.socket.remoteAddress, reason, detail }, 'Ember+ consumer disconnected');
    c.socket.destroy();
    this.#consumers.delete(c);
  }

  #receive(c: Consumer, chunk: Buffer): void {
    if (c.socket.destroyed) return;
    c.lastRxMs = performance.now();
    c.probeSentMs = undefined;
    try {
      for (const m of c.decoder.push(chunk)) {
        if (m.kind === 'keepalive-request') this.#write(c, encodeKeepalive('response'));
        else if (m.kind === 'ember') {
          const requests = decodeGlowRequests(m.payload);
          if (!requests.ok) {
            this.#drop(c, 'malformed', requests.error.message);
            return;
          }
          for (const r of requests.value) this.#handle(c, r);
        }
        if (c.socket.destroyed) return;
      }
    } catch (err) {
      if (err instanceof S101Error) this.#drop(c, 'malformed', err.message);
      else throw err;
    }
  }

  /** Replies go out at once (the consumer asked); only the hard limit applies to them. */
  #write(c: Consumer, data: Buffer): void {
    if (c.socket.destroyed) return;
    if (c.socket.writableLength + data.length > EMBER_SEND_HARD_LIMIT) {
      this.#drop(c, 'overflow', `${c.socket.writableLength} bytes unsent`);
      return;
    }
    c.socket.write(data);
  }

  #handle(c: Consumer, r: GlowRequest): void {
    const key = r.path.join('.');
    switch (r.kind) {
      case 'getDirectory':
        c.subscriptions.add(key);
        this.#directory(c, r.path);
        return;
      case 'subscribe':
        c.subscriptions.add(key);
        return;
      case 'unsubscribe':
        c.subscriptions.delete(key);
        return;
      case 'invoke':
        return; // no functions in this tree
      case 'setValue': {
        const el = this.#parameter(r.path);
        if (!el) return;
        this.#o.logger.warn({ path: key }, 'Ember+ write refused (read-only tree)');
        this.#write(c, encodeRoot([el]));
        return;
      }
    }
  }

  #parameter(path: number[]): Node | undefined {
    if (path.length === 2 && path[0] === 1 && path[1] === 1)
      return qualified(path, paramContents('Version', Model.ParameterType.String, this.#o.version));
    if (path.length === 3 && path[0] === 2) {
      const d = this.#devices.get(path[1] ?? -1);
      const p = d && paramsOf(d).find((x) => x.number === path[2]);
      if (d && p) return qualified(path, paramContents(p.identifier, p.type, p.value(d)));
    }
    return undefined;
  }

  #deviceNodeContents(d: OutputDevice): unknown {
    return new Model.EmberNodeImpl(`Device_${d.id}`, d.name);
  }

  #directory(c: Consumer, path: number[]): void {
    const key = path.join('.');
    let answer: Node | Node[] | undefined;
    if (path.length === 0) {
      answer = [
        treeNode(1, new Model.EmberNodeImpl('Info')),
        treeNode(2, new Model.EmberNodeImpl('Devices')),
      ];
    } else if (key === '1') {
      answer = qualified(path, new Model.EmberNodeImpl('Info'), {
        1: treeNode(1, paramContents('Version', Model.ParameterType.String, this.#o.version)),
      });
    } else if (key === '2') {
      const kids: Record<number, Node> = {};
      for (const d of this.#devices.values()) kids[d.id] = treeNode(d.id, this.#deviceNodeContents(d));
      answer = qualified(path, new Model.EmberNodeImpl('Devices'), kids);
    } else if (path.length === 2 && path[0] === 2) {
      const d = this.#devices.get(path[1] ?? -1);
      if (d) {
        const kids: Record<number, Node> = {};
        for (const p of paramsOf(d))
          kids[p.number] = treeNode(p.number, paramContents(p.identifier, p.type, p.value(d)));
        answer = qualified(path, this.#deviceNodeContents(d), kids);
      }
    } else {
      answer = this.#parameter(path);
    }
    if (!answer) return;
    // A directory answer carries every current value of what it covers: nothing of it is pending any more.
    for (const p of [...c.pending.keys()])
      if (p.startsWith(`${key}.`) || p === key || key === '') c.pending.delete(p);
    this.#write(c, encodeRoot(Array.isArray(answer) ? answer : [answer]));
  }

  #wants(c: Consumer, path: string, parent: string): boolean {
    return c.subscriptions.has(path) || c.subscriptions.has(parent);
  }

  #onChange(d: Readonly<OutputDevice>, fields: readonly string[]): void {
    const prev = this.#devices.get(d.id);
    this.#devices.set(d.id, { ...d });
    const nodePath = `2.${d.id}`;
    const renamed = !prev || prev.name !== d.name || fields.includes('*');
    const changed = paramsOf(d).filter((p) => !prev || p.value(prev) !== p.value(d));
    if (changed.length === 0 && !renamed) return;
    for (const c of this.#consumers) {
      if (renamed && this.#wants(c, nodePath, '2')) c.pendingNodes.add(d.id);
      for (const p of changed) {
        const path = `${nodePath}.${p.number}`;
        if (this.#wants(c, path, nodePath)) c.pending.set(path, [d.id, p.number]);
      }
      this.#flushSoon(c);
    }
  }

  #flushScheduled = new WeakSet<Consumer>();

  #flushSoon(c: Consumer): void {
    if (this.#flushScheduled.has(c) || (c.pending.size === 0 && c.pendingNodes.size === 0)) return;
    this.#flushScheduled.add(c);
    setImmediate(() => {
      this.#flushScheduled.delete(c);
      this.#flush(c);
    });
  }

  /** Send the latest value of everything pending, unless the consumer is not reading. */
  #flush(c: Consumer): void {
    if (c.socket.destroyed) return;
    if (c.socket.writableLength > EMBER_SEND_HIGH_WATER) {
      c.blockedSinceMs ??= performance.now();
      return;
    }
    c.blockedSinceMs = undefined;
    if (c.pending.size === 0 && c.pendingNodes.size === 0) return;
    const elements: Node[] = [];
    for (const id of c.pendingNodes) {
      const d = this.#devices.get(id);
      if (d) elements.push(qualified([2, id], this.#deviceNodeContents(d)));
    }
    c.pendingNodes.clear();
    for (const [, [id, number]] of c.pending) {
      const d = this.#devices.get(id);
      const p = d && paramsOf(d).find((x) => x.number === number);
      if (d && p) elements.push(qualified([2, id, number], paramContents(p.identifier, p.type, p.value(d))));
    }
    c.pending.clear();
    if (elements.length > 0) this.#write(c, encodeRoot(elements));
  }

  /** The set of devices changed: update values and descriptions in place; announce the new Devices list. */
  #onReset(): void {
    const devices = this.#o.view.list();
    const before = [...this.#devices.keys()].sort().join(',');
    const after = devices
      .map((d) => d.id)
      .sort()
      .join(',');
    for (const d of devices) this.#onChange(d, []);
    for (const id of [...this.#devices.keys()])
      if (!devices.some((d) => d.id === id)) this.#devices.delete(id);
    if (before === after) return;
    for (const c of this.#consumers) if (c.subscriptions.has('2')) this.#directory(c, [2]);
  }

  /** True while the housekeeping timer runs (a consumer connected); tests. */
  get housekeeping(): boolean {
    return this.#timer !== undefined;
  }

  #housekeeping(): void {
    if (this.#consumers.size === 0) {
      // The last consumer gone: sleep until the next one connects (#accept).
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const now = performance.now();
    const stallMs = this.#o.stallMs ?? 10_000;
    const probeAfterMs = this.#o.probeAfterMs ?? 15_000;
    const probeTimeoutMs = this.#o.probeTimeoutMs ?? 15_000;
    for (const c of [...this.#consumers]) {
      if (c.socket.destroyed) continue;
      if (c.socket.writableLength > EMBER_SEND_HIGH_WATER) c.blockedSinceMs ??= now;
      else if (c.blockedSinceMs !== undefined) this.#flush(c);
      if (c.blockedSinceMs !== undefined && now - c.blockedSinceMs > stallMs) {
        this.#drop(
          c,
          'stalled',
          `${c.socket.writableLength} bytes unsent for ${Math.round(now - c.blockedSinceMs)} ms`,
        );
        continue;
      }
      if (c.probeSentMs !== undefined) {
        if (now - c.probeSentMs > probeTimeoutMs)
          this.#drop(c, 'silent', 'no answer to a keep-alive request');
      } else if (now - c.lastRxMs > probeAfterMs) {
        c.probeSentMs = now;
        this.#write(c, encodeKeepalive('request'));
      }
    }
  }

  /** Close and open again on the same port (a new port setting is a new provider). */
  async restart(): Promise<number> {
    const port = this.#port || this.#o.port;
    await this.close();
    this.#o.port = port;
    return this.start();
  }

  async close(): Promise<void> {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    const server = this.#server;
    this.#server = undefined;
    this.#running = false;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const c of this.#consumers) c.socket.destroy();
    this.#consumers.clear();
    await closed;
  }
}
