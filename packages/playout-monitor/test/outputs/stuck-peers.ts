// Peers of the stuck-consumer test (not a test file itself), run as a separate process inside the test's
// network namespace:
//   decks <dir> <n>      n HyperDeck simulators playing; writes <dir>/config.json for the monitor, then idles
//   consumers <port>     one Ember+ consumer that subscribes to everything and never reads, and one healthy
//                        consumer that reads, answers keep-alives and counts the messages it receives;
//                        prints `STATS {...}` every second
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import { encodeEmberFrames, encodeKeepalive, S101Decoder } from '../../src/protocol/s101.ts';

const [mode, a, b] = process.argv.slice(2);

function tlv(tag: number, body: Buffer): Buffer {
  if (body.length >= 0x80) throw new Error('short form only');
  return Buffer.concat([Buffer.from([tag, body.length]), body]);
}
const GET_DIR = tlv(0x62, tlv(0xa0, Buffer.from([0x02, 0x01, 0x20])));
/** GetDirectory on the root, on Devices and on every device node. */
function requests(ids: number[]): Buffer {
  const frames = [encodeEmberFrames(tlv(0x60, tlv(0x6b, tlv(0xa0, GET_DIR))))];
  for (const path of [[2], ...ids.map((id) => [2, id])]) {
    const node = tlv(
      0x6a,
      Buffer.concat([tlv(0xa0, tlv(0x0d, Buffer.from(path))), tlv(0xa2, tlv(0x64, tlv(0xa0, GET_DIR)))]),
    );
    frames.push(encodeEmberFrames(tlv(0x60, tlv(0x6b, tlv(0xa0, node)))));
  }
  return Buffer.concat(frames);
}

async function open(port: number): Promise<Socket> {
  const s = connect({ host: '127.0.0.1', port });
  s.on('error', () => undefined);
  await new Promise<void>((resolve) => s.once('connect', () => resolve()));
  return s;
}

if (mode === 'decks') {
  const n = Number(b);
  const servers = [];
  for (let id = 1; id <= n; id++) {
    const sim = new HyperdeckSimulator({ port: 0 });
    const port = await sim.start();
    sim.play(1);
    servers.push({
      id,
      name: `Deck ${id}`,
      type: 'tcp_recorder',
      ip: '127.0.0.1',
      port,
      pollIntervalMs: 40,
      pingIntervalMs: 500,
    });
  }
  const config = {
    settings: { webSocketPort: 0, emberPlusPort: 0, listenAddress: '127.0.0.1', bindAddress: '127.0.0.1' },
    servers,
  };
  writeFileSync(join(a ?? '.', 'config.json'), JSON.stringify(config));
  process.stdout.write('DECKS READY\n');
  setInterval(() => undefined, 1 << 30);
} else if (mode === 'consumers') {
  const port = Number(a);
  const ids = Array.from({ length: Number(b ?? 12) }, (_, i) => i + 1);
  const stuck = await open(port);
  stuck.pause(); // never reads
  let stuckClosed = false;
  stuck.on('close', () => (stuckClosed = true));
  stuck.write(requests(ids));
  const healthy = await open(port);
  const decoder = new S101Decoder();
  let messages = 0;
  let healthyClosed = false;
  healthy.on('close', () => (healthyClosed = true));
  healthy.on('data', (d: Buffer) => {
    for (const m of decoder.push(d)) {
      if (m.kind === 'keepalive-request') healthy.write(encodeKeepalive('response'));
      else if (m.kind === 'ember') messages++;
    }
  });
  healthy.write(requests(ids));
  setInterval(() => {
    process.stdout.write(`STATS ${JSON.stringify({ messages, stuckClosed, healthyClosed })}\n`);
  }, 1000);
} else {
  process.stderr.write('usage: stuck-peers.ts decks <dir> <n> | consumers <port> <n>\n');
  process.exit(2);
}
