/**
 * The peer client of the punch WebSocket benches (bench/punch-ws, bench/punch-scale): a connection that
 * waits for message types, a JSON POST that expects 201, and a percentile of sorted samples.
 */
import { WebSocket } from 'ws';

export interface Peer {
  ws: WebSocket;
  waitFor(type: string): Promise<void>;
}

export function open(url: string, token?: string): Promise<Peer> {
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
  });
  const waiting = new Map<string, () => void>();
  const seen = new Set<string>();
  ws.on('message', (data) => {
    const s = (data as Buffer).toString('utf8');
    // Only the type matters here; a prefix test keeps the client's cost out of the measurement.
    const type = /^\{"type":"([a-z_]+)"/.exec(s)?.[1] ?? '';
    seen.add(type);
    const w = waiting.get(type);
    if (w) {
      waiting.delete(type);
      w();
    }
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () =>
      resolve({
        ws,
        waitFor: (type) =>
          seen.has(type) ? Promise.resolve() : new Promise<void>((r) => waiting.set(type, r)),
      }),
    );
    ws.once('error', reject);
  });
}

export async function json(url: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}
