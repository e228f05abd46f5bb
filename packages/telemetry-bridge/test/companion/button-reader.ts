/**
 * A raw WebSocket reader of Companion's button paths for the button-state tests: handshake, one `subscribe`
 * (filter `state`, snapshot, optionally resuming `since`), every message kept; `last()` is the resume position,
 * what this connection received (docs/protocol.md "Subscribe, snapshot and resume").
 */
import WebSocket from 'ws';
import { waitFor } from '@broadcast-ops/core/testing';

export interface Msg {
  type: string;
  path?: string;
  offset?: number;
  payload?: Record<string, unknown>;
}

export interface ButtonReader {
  msgs: Msg[];
  complete(): Msg | undefined;
  last(): number;
  /** The first `state` of `path` showing the button pressed among the messages after index `from`. */
  pressedAfter(from: number, path: string): Promise<Msg>;
  close(): void;
}

export async function buttonReader(
  url: string,
  patterns: string[],
  since?: { offset: number; epoch: string },
): Promise<ButtonReader> {
  const ws = new WebSocket(url);
  const msgs: Msg[] = [];
  ws.on('message', (d: Buffer) => msgs.push(JSON.parse(d.toString()) as Msg));
  await new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('error', rej);
  });
  ws.send(JSON.stringify({ type: 'handshake', name: 'button-reader', version: '1' }));
  await waitFor(() => msgs.some((m) => m.type === 'handshake_response') || undefined, { what: 'handshake' });
  ws.send(
    JSON.stringify({
      id: 'sub-buttons',
      type: 'subscribe',
      path: 'hub.subscriptions',
      payload: { patterns, filter: 'state', snapshot: true, ...(since ? { since } : {}) },
      timestamp: Date.now(),
    }),
  );
  const complete = (): Msg | undefined =>
    msgs.find((m) => m.type === 'event' && m.payload?.['event'] === 'snapshot_complete');
  await waitFor(() => complete(), { what: 'snapshot_complete' });
  return {
    msgs,
    complete,
    last: () =>
      Math.max(
        (complete()?.payload?.['data'] as { offset: number }).offset,
        ...msgs.filter((m) => m.type === 'state').map((m) => m.offset ?? 0),
      ),
    pressedAfter: (from, path) =>
      waitFor(
        () =>
          msgs
            .slice(from)
            .find(
              (m) =>
                m.type === 'state' &&
                m.path === path &&
                (m.payload?.['value'] as { pressed?: boolean }).pressed,
            ),
        { what: `${path} pressed, on the WebSocket` },
      ),
    close: () => ws.close(),
  };
}
