/**
 * A subscriber process of bench/bridge-fanout/vs-nats.ts (forked with an IPC channel): opens `count`
 * subscribers on the hub or nats-server, counts deliveries and records publish→receive latency from the `t`
 * field (µs of the monotonic clock, shared by all processes of the machine) with no JSON parsing. With
 * `ranks` (the steady phase) it also records each delivery's message index, so that the parent can order a
 * message's deliveries from first to last.
 */
import { openSubscriber, readNumberField, type LiteSocket, type TargetKind } from './ws-lite.ts';

interface Connect {
  cmd: 'connect';
  kind: TargetKind;
  host: string;
  port: number;
  count: number;
  base: number;
  subject: string;
}
type Command =
  | Connect
  | { cmd: 'window'; from: number; to: number; keep?: boolean; ranks?: boolean }
  | { cmd: 'report' }
  | { cmd: 'exit' };

const T = Buffer.from('"t":');
const I = Buffer.from('"i":');
let from = Number.MAX_SAFE_INTEGER;
let to = Number.MAX_SAFE_INTEGER;
let delivered = 0;
let lat: number[] = [];
let ranks = false;
let idx: number[] = [];
const socks: LiteSocket[] = [];

function onMsg(buf: Buffer, start: number, end: number): void {
  const i = readNumberField(buf, start, end, I);
  if (i < from || i >= to) return;
  delivered++;
  const t = readNumberField(buf, start, end, T);
  lat.push(Number(process.hrtime.bigint() / 1000n) - t);
  if (ranks) idx.push(i);
}

async function connectAll(c: Connect): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < c.count) {
      const k = c.base + next++;
      socks.push(await openSubscriber(c.kind, c.host, c.port, `sub${k}`, c.subject, onMsg));
    }
  };
  await Promise.all(Array.from({ length: Math.min(32, c.count) }, lane));
}

process.on('message', (m: Command) => {
  const send = (x: unknown): void => void process.send?.(x);
  if (m.cmd === 'connect') {
    connectAll(m).then(
      () => send({ ev: 'ready' }),
      (err: unknown) => send({ ev: 'error', message: String(err) }),
    );
  } else if (m.cmd === 'window') {
    from = m.from;
    to = m.to;
    if (m.keep) return; // narrowing the window of the measurement under way
    ranks = m.ranks === true;
    delivered = 0;
    lat = [];
    idx = [];
  } else if (m.cmd === 'report') {
    send({ ev: 'report', delivered, lat, idx });
    lat = [];
    idx = [];
    delivered = 0;
  } else {
    for (const s of socks) s.close();
    process.exit(0);
  }
});
