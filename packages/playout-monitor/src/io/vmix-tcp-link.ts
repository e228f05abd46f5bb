/**
 * One connection to vMix's TCP API (port 8099; protocol/vmix-tcp.ts): `SUBSCRIBE TALLY` on open, then
 * `TALLY OK` pushes to `onTally`, and `XML` requests answered in order. One request is on the wire at a time
 * (vMix help, "TCP API": send one command and wait for its answer); each is bounded by `timeoutMs`, and a
 * request unanswered in time closes the link (the byte stream is no longer known to be in step). The link
 * reports its end once, with the reason, through `onClose` (not called after `close()`).
 */
import { connect, type Socket } from 'node:net';
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import type { TallyDigit } from '../domain/mixer-tally.ts';
import { deadlineUnlessSettled } from './deadline.ts';
import {
  parseTallyDigits,
  VmixTcpFramer,
  vmixTcpCommand,
  type VmixTcpMessage,
} from '../protocol/vmix-tcp.ts';

export interface VmixTcpLinkOptions {
  host: string;
  port: number;
  timeoutMs: number;
  clock: Clock;
  onTally: (digits: TallyDigit[]) => void;
  onClose: (reason: string) => void;
  /** A message that does not follow the protocol (counted by the caller). */
  onMalformed: (error: string) => void;
}

interface Request {
  command: 'SUBSCRIBE' | 'XML';
  line: 'SUBSCRIBE TALLY' | 'XML';
  resolve: (m: VmixTcpMessage) => void;
  reject: (e: Error) => void;
}

export class VmixTcpLink {
  readonly #o: VmixTcpLinkOptions;
  readonly #socket: Socket;
  readonly #framer = new VmixTcpFramer();
  readonly #queue: Request[] = [];
  #timer: TimerHandle | undefined;
  #closed = false;

  private constructor(o: VmixTcpLinkOptions, socket: Socket) {
    this.#o = o;
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err) => this.#end(err.message));
    socket.on('close', () => this.#end('vMix closed the TCP connection'));
  }

  /** Connect and subscribe to tally; rejects (naming the cause) when either fails within `timeoutMs`. */
  static async open(o: VmixTcpLinkOptions): Promise<VmixTcpLink> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect({ host: o.host, port: o.port, noDelay: true });
      // No timer when the connect is refused within this turn (an absent mixer; io/deadline.ts).
      const timer = deadlineUnlessSettled(
        o.clock,
        o.timeoutMs,
        () => !s.connecting,
        () => {
          s.destroy();
          reject(new Error(`TCP API: no connection within ${o.timeoutMs} ms`));
        },
      );
      s.once('connect', () => {
        timer.cancel();
        s.removeAllListeners('error');
        resolve(s);
      });
      s.once('error', (err) => {
        timer.cancel();
        s.destroy();
        reject(new Error(`TCP API: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
      });
    });
    const link = new VmixTcpLink(o, socket);
    try {
      const answer = await link.#request('SUBSCRIBE', 'SUBSCRIBE TALLY');
      if (answer.status !== 'OK') throw new Error(`TCP API: SUBSCRIBE TALLY answered ${answer.status}`);
    } catch (err) {
      link.close();
      throw err;
    }
    return link;
  }

  get open(): boolean {
    return !this.#closed;
  }

  /** The `/api` document over the link. */
  async xml(): Promise<string> {
    const m = await this.#request('XML', 'XML');
    if (m.status !== 'data') throw new Error(`TCP API: XML answered ${m.status} ${m.text}`);
    return m.data;
  }

  #request(command: Request['command'], line: Request['line']): Promise<VmixTcpMessage> {
    if (this.#closed) return Promise.reject(new Error('TCP API link closed'));
    return new Promise((resolve, reject) => {
      this.#queue.push({ command, line, resolve, reject });
      if (this.#queue.length === 1) this.#sendHead();
    });
  }

  #sendHead(): void {
    const head = this.#queue[0];
    if (!head || this.#closed) return;
    this.#socket.write(vmixTcpCommand(head.line));
    this.#timer = this.#o.clock.setTimer(this.#o.timeoutMs, () =>
      this.#end(`TCP API: no answer to ${head.line} within ${this.#o.timeoutMs} ms`),
    );
  }

  #onData(chunk: Buffer): void {
    const r = this.#framer.push(chunk);
    if ('error' in r) {
      this.#o.onMalformed(r.error);
      this.#end(`TCP API: ${r.error}`);
      return;
    }
    for (const m of r.messages) {
      if (this.#closed) return;
      // A TALLY line is the subscription's push (this link never sends the one-shot TALLY).
      if (m.command === 'TALLY' && m.status === 'OK') {
        const digits = parseTallyDigits(m.text);
        if (!digits.ok) {
          this.#o.onMalformed(digits.error.message);
          continue;
        }
        this.#o.onTally(digits.value);
        continue;
      }
      const head = this.#queue[0];
      if (!head || m.command.toUpperCase() !== head.command) continue; // e.g. an ACTS line: not asked for
      this.#queue.shift();
      this.#timer?.cancel();
      head.resolve(m);
      this.#sendHead();
    }
  }

  #end(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#timer?.cancel();
    this.#socket.destroy();
    for (const r of this.#queue.splice(0)) r.reject(new Error(reason));
    this.#o.onClose(reason);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#timer?.cancel();
    this.#socket.destroy();
    for (const r of this.#queue.splice(0)) r.reject(new Error('TCP API link closed'));
  }
}
