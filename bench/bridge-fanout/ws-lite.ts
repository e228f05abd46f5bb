/**
 * A minimal WebSocket client for the load generator of bench/bridge-fanout/vs-nats.ts: the HTTP upgrade
 * (RFC 6455 §4.1), masked client frames (§5.3) and a frame reader that hands each server frame's payload as
 * a slice of the received chunk, without copying, decoding or validating it. Hand-written rather than the
 * `ws` client so that the subscribers cost as little as possible per delivery (the point of the bench is the
 * server's cost, not the client's); it is bench code, never used by a service.
 */
import { connect, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';

export interface LiteSocket {
  socket: Socket;
  sendText(text: string): void;
  close(): void;
}

/**
 * Opens a WebSocket to ws://host:port/path. `onFrame(opcode, buf, start, end)` gets every server frame
 * (server frames are unmasked, §5.1); pings are answered with pongs here.
 */
export function openLite(
  host: string,
  port: number,
  path: string,
  onFrame: (opcode: number, buf: Buffer, start: number, end: number) => void,
): Promise<LiteSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true });
    const key = randomBytes(16).toString('base64');
    let upgraded = false;
    let rest: Buffer | undefined;
    const lite: LiteSocket = {
      socket,
      sendText: (text) => socket.write(clientFrame(0x1, Buffer.from(text, 'utf8'))),
      close: () => socket.destroy(),
    };
    const parse = (chunk: Buffer): void => {
      const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
      rest = undefined;
      let at = 0;
      for (;;) {
        if (buf.length - at < 2) break;
        const op = buf[at]! & 0x0f;
        let len = buf[at + 1]! & 0x7f;
        let head = 2;
        if (len === 126) {
          if (buf.length - at < 4) break;
          len = buf.readUInt16BE(at + 2);
          head = 4;
        } else if (len === 127) {
          if (buf.length - at < 10) break;
          len = buf.readUInt32BE(at + 2) * 2 ** 32 + buf.readUInt32BE(at + 6);
          head = 10;
        }
        if (buf.length - at < head + len) break;
        const start = at + head;
        const end = start + len;
        if (op === 0x9) socket.write(clientFrame(0xa, buf.subarray(start, end)));
        else if (op !== 0xa) onFrame(op, buf, start, end);
        at = end;
      }
      if (at < buf.length) rest = buf.subarray(at);
      if (rest && at > 0) rest = Buffer.from(rest); // do not pin a large chunk for a small remainder
    };
    socket.once('error', reject);
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      if (upgraded) return parse(chunk);
      const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        rest = buf;
        return;
      }
      rest = undefined;
      const head = buf.subarray(0, end).toString('latin1');
      if (!/^HTTP\/1\.1 101/.test(head)) {
        reject(new Error(`upgrade refused: ${head.split('\r\n')[0] ?? ''}`));
        socket.destroy();
        return;
      }
      upgraded = true;
      resolve(lite);
      // Frames that came with the 101 are read once the caller holds the socket (it may answer them).
      if (end + 4 < buf.length) {
        rest = Buffer.from(buf.subarray(end + 4));
        setImmediate(() => parse(Buffer.alloc(0)));
      }
    });
    socket.once('connect', () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
  });
}

/** A final, masked client frame (RFC 6455 §5.2, §5.3). */
export function clientFrame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(head + 4 + n);
  frame[0] = 0x80 | opcode;
  if (n < 126) frame[1] = 0x80 | n;
  else if (n < 65_536) {
    frame[1] = 0x80 | 126;
    frame.writeUInt16BE(n, 2);
  } else {
    frame[1] = 0x80 | 127;
    frame.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    frame.writeUInt32BE(n >>> 0, 6);
  }
  const mask = randomBytes(4);
  mask.copy(frame, head);
  const at = head + 4;
  for (let i = 0; i < n; i++) frame[at + i] = payload[i]! ^ mask[i & 3]!;
  return frame;
}

/** Reads the unsigned integer after `"<name>":` in buf[start, end), or -1 (the bench's `t` and `i`). */
export function readNumberField(buf: Buffer, start: number, end: number, needle: Buffer): number {
  const at = buf.indexOf(needle, start);
  if (at < 0 || at >= end) return -1;
  let v = 0;
  for (let k = at + needle.length; k < end; k++) {
    const c = buf[k]!;
    if (c < 48 || c > 57) break;
    v = v * 10 + (c - 48);
  }
  return v;
}

/**
 * The NATS client protocol's server→client stream, reduced to what a subscriber needs: each
 * `MSG <subject> <sid> [reply] <#bytes>\r\n<payload>\r\n` calls onMsg with the payload's range; `PING` is
 * answered with `PONG`; INFO, +OK, PONG are passed to onLine. nats-server packs several protocol messages
 * into one WebSocket frame and may split one across frames, so frames are joined into a byte stream here.
 */
export class NatsStream {
  #rest: Buffer | undefined;
  readonly #onMsg: (buf: Buffer, start: number, end: number) => void;
  readonly #onLine: (line: string) => void;
  readonly #send: (text: string) => void;

  constructor(
    onMsg: (buf: Buffer, start: number, end: number) => void,
    onLine: (line: string) => void,
    send: (text: string) => void,
  ) {
    this.#onMsg = onMsg;
    this.#onLine = onLine;
    this.#send = send;
  }

  push(chunk: Buffer, start: number, end: number): void {
    let buf: Buffer;
    let at: number;
    if (this.#rest) {
      buf = Buffer.concat([this.#rest, chunk.subarray(start, end)]);
      at = 0;
      end = buf.length;
      this.#rest = undefined;
    } else {
      buf = chunk;
      at = start;
    }
    while (at < end) {
      const nl = buf.indexOf(10, at); // '\n'
      if (nl < 0 || nl >= end) break;
      if (buf[at] === 77 /* M */) {
        // MSG line: the last token is the payload length.
        let k = nl - 2; // before '\r'
        let len = 0;
        let mul = 1;
        while (k > at && buf[k] !== 32) {
          len += (buf[k]! - 48) * mul;
          mul *= 10;
          k--;
        }
        const p = nl + 1;
        if (p + len + 2 > end) break;
        this.#onMsg(buf, p, p + len);
        at = p + len + 2;
        continue;
      }
      const line = buf.subarray(at, nl - 1).toString('latin1');
      at = nl + 1;
      if (line === 'PING') this.#send('PONG\r\n');
      else this.#onLine(line);
    }
    if (at < end) this.#rest = Buffer.from(buf.subarray(at, end));
  }
}

export type TargetKind = 'hub' | 'nats';

/**
 * One subscriber, resolved once it receives broadcasts: on the hub a handshake and a subscription to
 * `app.pub.custom.**` (docs/protocol.md), on nats-server CONNECT, SUB and a PING answered (so the SUB is
 * in place). Afterwards onMsg(buf, start, end) gets each delivered message's bytes (the hub's envelope, or
 * the NATS payload) with no decoding.
 */
export function openSubscriber(
  kind: TargetKind,
  host: string,
  port: number,
  name: string,
  subject: string,
  onMsg: (buf: Buffer, start: number, end: number) => void,
): Promise<LiteSocket> {
  return new Promise((resolve, reject) => {
    let ready = false;
    let lite: LiteSocket | undefined;
    let step = 0;
    const done = (): void => {
      ready = true;
      resolve(lite!);
    };
    const nats = new NatsStream(
      onMsg,
      (line) => {
        if (ready) return;
        if (line.startsWith('INFO') && step === 0) {
          step = 1;
          lite!.sendText(
            `CONNECT {"verbose":false,"pedantic":false,"protocol":1,"name":"${name}"}\r\nSUB ${subject} 1\r\nPING\r\n`,
          );
        } else if (line === 'PONG' && step === 1) done();
        else if (line.startsWith('-ERR')) reject(new Error(line));
      },
      (text) => lite?.sendText(text),
    );
    const onFrame = (op: number, buf: Buffer, start: number, end: number): void => {
      if (kind === 'nats') return nats.push(buf, start, end);
      if (ready) return onMsg(buf, start, end);
      if (op === 0x8) return reject(new Error(`closed during setup: ${buf.subarray(start, end).toString()}`));
      const m = JSON.parse(buf.subarray(start, end).toString('utf8')) as { type?: string; code?: string };
      if (m.type === 'handshake_response' && step === 0) {
        step = 1;
        lite!.sendText(
          JSON.stringify({
            id: `sub-${name}`,
            type: 'subscribe',
            path: 'hub.subscriptions',
            payload: { patterns: [subject] },
            timestamp: Date.now(),
          }),
        );
      } else if (m.type === 'ack' && step === 1) done();
      else if (m.type === 'error') reject(new Error(JSON.stringify(m)));
    };
    openLite(host, port, '/', onFrame).then((l) => {
      lite = l;
      l.socket.once('close', () => {
        if (!ready) reject(new Error(`${name}: closed during setup`));
      });
      if (kind === 'hub') l.sendText(JSON.stringify({ type: 'handshake', name, version: '1' }));
    }, reject);
  });
}
