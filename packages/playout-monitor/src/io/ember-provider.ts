/**
 * Ember+ provider (S101 framing over TCP, EmBER encoding, Glow DTD; Lawo "Ember+ Documentation", 2.x)
 * on `settings.emberPlusPort`, with exactly the spec's tree and nothing else:
 *
 *   Info [1]                Version [1.1] String
 *   Devices [2]
 *     Device_<id> [2.<id>]  State [.1] String, Timecode [.2] String, Filename [.3] String,
 *                           Connected [.4] Boolean, Type [.5] String
 *
 * `<id>` is the device's configuration id, used as the node number too, so paths stay the same when other
 * devices are added or removed. Every parameter has access `read`; a consumer's write is refused (the
 * provider answers with the unchanged value, as the Ember+ documentation prescribes for a rejected set).
 * Values are pushed to consumers that asked for the parent node's directory (GetDirectory or Subscribe),
 * only when they change.
 */
import type { Socket } from 'node:net';
import { EmberServer, Model } from 'emberplus-connection';
import type { Logger } from '@broadcast-ops/core';
import type { OutputDevice, OutputView } from '../domain/output-view.ts';

type Node = Model.NumberedTreeNode<Model.EmberElement>;
type ParamNode = Model.NumberedTreeNode<Model.Parameter>;

/** A consumer sending this many bytes without an S101 end-of-frame is cut off. */
export const EMBER_MAX_UNFRAMED_BYTES = 1 << 20;
export const EMBER_MAX_CONSUMERS = 64;

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

// The library's model classes do not satisfy `exactOptionalPropertyTypes`; build them here, cast once.
function treeNode(number: number, contents: unknown, children?: Record<number, Node>): Node {
  return new Model.NumberedTreeNodeImpl(number, contents as Model.EmberElement, children) as unknown as Node;
}

function param(number: number, identifier: string, type: Model.ParameterType, value: string | boolean): Node {
  return treeNode(
    number,
    new Model.ParameterImpl(
      type,
      identifier,
      undefined,
      value,
      undefined,
      undefined,
      Model.ParameterAccess.Read,
    ),
  );
}

export function deviceNode(d: OutputDevice): Node {
  const children: Record<number, Node> = {};
  for (const p of PARAMS) children[p.number] = param(p.number, p.identifier, p.type, p.value(d));
  return treeNode(d.id, new Model.EmberNodeImpl(`Device_${d.id}`, d.name), children);
}

export function buildEmberTree(version: string, devices: readonly OutputDevice[]): Record<number, Node> {
  const info = treeNode(1, new Model.EmberNodeImpl('Info'), {
    1: param(1, 'Version', Model.ParameterType.String, version),
  });
  const deviceChildren: Record<number, Node> = {};
  for (const d of devices) deviceChildren[d.id] = deviceNode(d);
  return { 1: info, 2: treeNode(2, new Model.EmberNodeImpl('Devices'), deviceChildren) };
}

/**
 * emberplus-connection 0.3.1 decodes a consumer's set-value (a QualifiedParameter with a value) with an
 * empty `children` collection, and its server only treats a parameter *without* children as a set, so
 * the write is silently dropped and the consumer waits until its request times out. Treat an empty
 * collection as none, so the server answers with the unchanged value (the write is refused visibly).
 */
function answerEmptySets(server: EmberServer): void {
  type HandleNode = (path: string, el: { children?: Record<string, unknown> }, client: unknown) => void;
  const target = server as unknown as { _handleNode: HandleNode };
  const original = target._handleNode.bind(server);
  target._handleNode = (path, el, client) => {
    if (el.children && Object.keys(el.children).length === 0) delete el.children;
    original(path, el, client);
  };
}

export interface EmberProviderOptions {
  view: OutputView;
  port: number;
  address: string;
  version: string;
  logger: Logger;
}

export class EmberProvider {
  readonly #o: EmberProviderOptions;
  #server: EmberServer | undefined;
  readonly #sockets = new Set<Socket>();
  #unsubscribe: (() => void)[] = [];
  #port = 0;
  #running = false;
  #deviceIds = '';

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
    return this.#sockets.size;
  }

  async start(): Promise<number> {
    const devices = this.#o.view.list();
    this.#deviceIds = devices.map((d) => d.id).join(',');
    const server = new EmberServer(this.#o.port, this.#o.address);
    server.onSetValue = (parameter) => {
      this.#o.logger.warn({ path: parameter.contents.identifier }, 'Ember+ write refused (read-only tree)');
      return Promise.resolve(false);
    };
    answerEmptySets(server);
    server.on('error', (err) => this.#o.logger.warn({ err }, 'Ember+ provider error'));
    server.on('clientError', (_c, err) => this.#o.logger.debug({ err }, 'Ember+ consumer error'));
    await server.init(buildEmberTree(this.#o.version, devices));
    const net = (server as unknown as { _server: { server: import('node:net').Server } })._server.server;
    net.maxConnections = EMBER_MAX_CONSUMERS;
    net.on('connection', (socket) => this.#track(socket));
    const addr = net.address();
    this.#port = typeof addr === 'object' && addr ? addr.port : this.#o.port;
    this.#server = server;
    this.#unsubscribe = [
      this.#o.view.onChange((d, fields) => {
        this.#onChange(d, fields);
      }),
      this.#o.view.onReset(() => {
        void this.#onReset();
      }),
    ];
    this.#running = true;
    return this.#port;
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    let unframed = 0;
    socket.on('data', (chunk: Buffer) => {
      const eof = chunk.lastIndexOf(0xff);
      unframed = eof >= 0 ? chunk.length - eof - 1 : unframed + chunk.length;
      if (unframed > EMBER_MAX_UNFRAMED_BYTES) {
        this.#o.logger.warn({ remote: socket.remoteAddress }, 'Ember+ consumer sent an oversized frame');
        socket.destroy();
      }
    });
    socket.on('close', () => this.#sockets.delete(socket));
  }

  #onChange(d: Readonly<OutputDevice>, fields: readonly string[]): void {
    const server = this.#server;
    if (!server) return;
    const node = server.getElementByPath(`2.${d.id}`);
    if (!node) return;
    if (fields.includes('name') || fields.includes('*')) {
      const contents = node.contents as Model.EmberNode;
      if (contents.description !== d.name) server.update(node, { description: d.name });
    }
    for (const p of PARAMS) {
      const el = node.children?.[p.number] as ParamNode | undefined;
      const value = p.value(d);
      if (el && el.contents.value !== value) server.update(el, { value });
    }
  }

  /** The set of devices changed: values of kept devices update in place; a new set of ids rebuilds. */
  async #onReset(): Promise<void> {
    const devices = this.#o.view.list();
    const ids = devices.map((d) => d.id).join(',');
    if (ids === this.#deviceIds) {
      for (const d of devices) this.#onChange(d, ['*']);
      return;
    }
    this.#o.logger.info({ devices: ids }, 'Ember+ tree rebuilt for a new set of devices');
    await this.restart();
  }

  /** Close and open again (a new port or a new set of devices); consumers reconnect. */
  async restart(): Promise<number> {
    // Keep the bound port when 0 (any) was configured, so consumers find the provider again.
    const port = this.#port || this.#o.port;
    await this.close();
    this.#o.port = port;
    return this.start();
  }

  async close(): Promise<void> {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
    const server = this.#server;
    this.#server = undefined;
    this.#running = false;
    if (!server) return;
    const net = (server as unknown as { _server: { server: import('node:net').Server | null } })._server
      .server;
    const closed = new Promise<void>((resolve) => {
      if (!net) resolve();
      else net.once('close', () => resolve());
    });
    // discard() closes the listener but leaves consumers connected: destroy their sockets too.
    server.discard();
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    await closed;
  }
}
