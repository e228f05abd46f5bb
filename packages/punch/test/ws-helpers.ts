import assert from 'node:assert/strict';
import { WebSocket } from 'ws';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- messages are checked field by field
export type Msg = Record<string, any>;

/** A real `ws` client that records every message and close, for the signalling tests. */
export interface WsClient {
  ws: WebSocket;
  messages: Msg[];
  /** Resolves with the close code and reason once the server (or the test) closed the socket. */
  closed: Promise<{ code: number; reason: string }>;
  send(message: unknown): void;
  sendRaw(data: string | Buffer, binary?: boolean): void;
  /** The next not-yet-taken message of `type` (any type when omitted), waiting up to `timeoutMs`. */
  next(type?: string, timeoutMs?: number): Promise<Msg>;
  /** Messages received so far and not taken by `next`. */
  pending(): Msg[];
  close(): void;
}

export interface ConnectOptions {
  token?: string | undefined;
  /** Send the token as `?token=` instead of the Authorization header. */
  query?: boolean;
  headers?: Record<string, string>;
  ca?: Buffer;
  /** false: never answer pings (a frozen or half-open peer, as the server sees it). */
  autoPong?: boolean;
  /** Source address (another loopback address such as 127.0.0.2: a peer that moved). */
  localAddress?: string;
}

export function wsUrl(httpUrl: string, session: string): string {
  return `${httpUrl.replace(/^http/, 'ws')}/api/ws/${encodeURIComponent(session)}`;
}

export async function connect(httpUrl: string, session: string, o: ConnectOptions = {}): Promise<WsClient> {
  let url = wsUrl(httpUrl, session);
  const headers: Record<string, string> = { ...o.headers };
  if (o.token !== undefined) {
    if (o.query) url += `?token=${encodeURIComponent(o.token)}`;
    else headers['authorization'] = `Bearer ${o.token}`;
  }
  const ws = new WebSocket(url, {
    headers,
    perMessageDeflate: false,
    autoPong: o.autoPong ?? true,
    ...(o.localAddress ? { localAddress: o.localAddress } : {}),
    ...(o.ca ? { ca: o.ca } : {}),
  });
  const messages: Msg[] = [];
  let taken = 0;
  const waiters = new Set<() => void>();
  ws.on('message', (data) => {
    messages.push(JSON.parse((data as Buffer).toString('utf8')) as Msg);
    for (const w of waiters) w();
  });
  ws.on('error', () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('error', reject);
  });
  const taker = new Set<number>();
  const find = (type: string | undefined): Msg | undefined => {
    for (let i = taken; i < messages.length; i++) {
      if (taker.has(i)) continue;
      const m = messages[i];
      if (m && (type === undefined || m['type'] === type)) {
        taker.add(i);
        while (taker.has(taken)) taken++;
        return m;
      }
    }
    return undefined;
  };
  return {
    ws,
    messages,
    closed,
    send: (m) => ws.send(JSON.stringify(m)),
    sendRaw: (d, binary = false) => ws.send(d, { binary }),
    next: (type, timeoutMs = 3000) =>
      new Promise<Msg>((resolve, reject) => {
        const hit = find(type);
        if (hit) return resolve(hit);
        const check = (): void => {
          const m = find(type);
          if (m) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(m);
          } else if (ws.readyState === ws.CLOSED) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`socket closed while waiting for ${type ?? 'a message'}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`no ${type ?? 'message'} within ${timeoutMs} ms; got ${JSON.stringify(messages)}`),
          );
        }, timeoutMs);
        waiters.add(check);
      }),
    pending: () => messages.filter((_m, i) => i >= taken && !taker.has(i)),
    close: () => ws.close(),
  };
}

/** Wait `ms`, then assert that `client` received nothing new (other peers notice nothing). */
export async function assertQuiet(client: WsClient, ms = 150): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
  assert.deepEqual(client.pending(), [], 'expected no messages');
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
