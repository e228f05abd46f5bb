import { createSocket, type Socket } from 'node:dgram';
import { waitFor } from '@broadcast-ops/core/testing';

/**
 * A steady flow of small datagrams both ways across a relay allocation (docs/relay.md "Renewal" tests):
 * A sends to its relay port, B to its own, every `everyMs`, until `stop`. The datagrams are numbered
 * (`a1`, `b1`, ...) so that a receiver can tell a new one from an old one.
 */
export function steadyFlow(
  sa: Socket,
  sb: Socket,
  [portA, portB]: readonly [number, number],
  everyMs = 100,
): { stop: () => void } {
  let n = 0;
  const timer = setInterval(() => {
    n++;
    sa.send(`a${n}`, portA, '127.0.0.1');
    sb.send(`b${n}`, portB, '127.0.0.1');
  }, everyMs);
  return { stop: () => clearInterval(timer) };
}

/** Waits until `pastMs` after `sinceMs` (wall clock), then for 10 more datagrams at B: still forwarding. */
export async function stillForwardingAfter(
  sb: { got: unknown[] },
  sinceMs: number,
  pastMs: number,
): Promise<void> {
  await waitFor(() => Date.now() - sinceMs > pastMs, { timeoutMs: pastMs + 30_000, intervalMs: 250 });
  const late = sb.got.length;
  await waitFor(() => sb.got.length >= late + 10, {
    timeoutMs: 10_000,
    what: 'datagrams still crossing after the first lifetime',
  });
}

/** 60 datagrams of 1,200 bytes (72 kB) at once from `from` to a relay port: far above a small cap. */
export function burst(from: Socket, port: number): void {
  const payload = Buffer.alloc(1_200, 0x47);
  for (let k = 0; k < 60; k++) from.send(payload, port, '127.0.0.1');
}

/** A UDP socket bound on `address` that keeps what it receives as text in `got`; added to `owned` to close. */
export type RecordingSocket = Socket & { got: string[] };
export async function recordingSocket(address: string, owned: Socket[]): Promise<RecordingSocket> {
  const s = createSocket('udp4') as RecordingSocket;
  s.got = [];
  s.on('message', (m) => s.got.push(m.toString()));
  await new Promise<void>((resolve) => s.bind(0, address, resolve));
  owned.push(s);
  return s;
}
