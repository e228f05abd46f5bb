/**
 * TSL UMD v5.0 sender: one UDP socket, unicast to every `settings.tslUmdDestinations` entry, screen
 * `settings.tslUmdScreen`, one display index per device (its configuration id), text = device name.
 * A device's message goes out at once when its tally or name changes; a background refresh sends one
 * device every `refreshMs` in turn, so a receiver that restarts or lost a datagram is right again within
 * one round (UDP has no delivery guarantee).
 *
 * One connected UDP socket per destination: a send on a connected socket goes straight to the kernel,
 * while a send with an address first resolves it (even an IP literal) on the next tick, after whatever
 * else the event loop is doing for the same change. A host name is resolved once, when the sender starts.
 * A destination that refuses (ICMP port unreachable) is reported on a later send and simply retried.
 */
import { createSocket, type Socket } from 'node:dgram';
import type { Logger } from '@broadcast-ops/core';
import type { OutputDevice, OutputView } from '../domain/output-view.ts';
import { encodeTslPackets, tallyForState, type TslMessage } from '../protocol/tsl-umd.ts';

export interface TslDestination {
  host: string;
  port: number;
}

export interface TslSenderOptions {
  view: OutputView;
  destinations: readonly TslDestination[];
  screen: number;
  logger: Logger;
  /** Round-robin refresh period (one device per period). */
  refreshMs?: number;
}

export function tslMessage(d: Readonly<OutputDevice>): TslMessage {
  return { index: d.id, display: tallyForState(d.state), text: d.name };
}

export class TslSender {
  readonly #o: TslSenderOptions;
  #sockets: Socket[] = [];
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  #next = 0;
  #unsubscribe: (() => void)[] = [];
  #sent = 0;
  #errors = 0;

  constructor(options: TslSenderOptions) {
    this.#o = options;
  }

  get enabled(): boolean {
    return this.#o.destinations.length > 0;
  }

  /** True once the sockets are connected (and destinations exist). */
  get running(): boolean {
    return this.#running;
  }

  get stats(): { sent: number; errors: number } {
    return { sent: this.#sent, errors: this.#errors };
  }

  async start(): Promise<void> {
    if (!this.enabled) return;
    for (const dest of this.#o.destinations) {
      const socket = createSocket('udp4');
      socket.on('error', (err) => {
        this.#errors++;
        this.#o.logger.debug({ err, dest }, 'TSL UMD socket error');
      });
      try {
        await new Promise<void>((resolve, reject) => {
          socket.once('error', reject);
          socket.connect(dest.port, dest.host, () => {
            socket.off('error', reject);
            resolve();
          });
        });
      } catch (err) {
        socket.close();
        for (const s of this.#sockets) s.close();
        this.#sockets = [];
        throw err;
      }
      this.#sockets.push(socket);
    }
    this.#running = true;
    this.#unsubscribe = [
      this.#o.view.onChange((d, fields) => {
        if (fields.includes('state') || fields.includes('name') || fields.includes('*')) this.#send([d]);
      }),
      this.#o.view.onReset(() => this.sendAll()),
    ];
    this.sendAll();
    this.#timer = setInterval(() => this.#refreshOne(), this.#o.refreshMs ?? 200);
    this.#timer.unref();
  }

  /** Every device, packed into as few packets as the 2048-byte limit allows. */
  sendAll(): void {
    this.#send(this.#o.view.list());
  }

  #refreshOne(): void {
    const list = this.#o.view.list();
    if (list.length === 0) return;
    this.#next = (this.#next + 1) % list.length;
    const d = list[this.#next];
    if (d) this.#send([d]);
  }

  #send(devices: readonly Readonly<OutputDevice>[]): void {
    if (this.#sockets.length === 0) return;
    for (const packet of encodeTslPackets(this.#o.screen, devices.map(tslMessage))) {
      for (const socket of this.#sockets) {
        socket.send(packet, (err) => {
          if (err) {
            this.#errors++;
            this.#o.logger.debug({ err }, 'TSL UMD send failed');
          } else this.#sent++;
        });
      }
    }
  }

  async close(): Promise<void> {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#running = false;
    const sockets = this.#sockets;
    this.#sockets = [];
    await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => socket.close(() => resolve()))));
  }
}
