import assert from 'node:assert/strict';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { requireTool, startProcess, waitFor, type RunningProcess } from '@broadcast-ops/core/testing';
import { startTestServer, type TestServer } from './helpers.ts';

/**
 * Real peers: the strings that GET /connect generates are run as they are (only the placeholders
 * <IN_PORT>, <OUT_PORT>, <INPUT>, <OUTPUT> are filled in) by the real srt-live-transmit and ffmpeg, as two
 * rendezvous peers on loopback on different local ports, and data must arrive through the encrypted link.
 */

function shellWords(cmd: string): string[] {
  return [...cmd.matchAll(/(?:[^\s"]+|"[^"]*")+/g)].map((m) => m[0].replaceAll('"', ''));
}

async function freeUdpPort(): Promise<number> {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const peer = (port: number, label: string) => ({
  ip: '127.0.0.1',
  port,
  label,
  role: null,
  meta: {},
  clientId: null,
});

/** Create a session, register both peers on loopback, fetch the strings. */
async function connectStrings(t: TestServer, name: string, role: 'sender' | 'receiver') {
  const created = await t.call('POST', '/api/session', { body: { name, latency: 120 } });
  assert.equal(created.status, 201);
  const portA = await freeUdpPort();
  let portB = await freeUdpPort();
  while (portB === portA) portB = await freeUdpPort();
  assert.ok((await t.server.broker.claim(name, undefined, peer(portA, 'A'))).ok);
  assert.ok((await t.server.broker.claim(name, undefined, peer(portB, 'B'))).ok);
  const r = await t.call('GET', `/api/session/${name}/connect?role=${role}`, { token: created.json.token });
  assert.equal(r.status, 200, r.text);
  return r.json as { for_peer_a: Record<string, string>; for_peer_b: Record<string, string> };
}

/** A shell pipeline in its own process group, so the test can end the whole group by its id. */
interface Group {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  signal: (s: NodeJS.Signals) => void;
}
function startGroup(cmd: string, cwd: string): Group {
  const child = spawn('sh', ['-c', cmd], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const collect = (d: Buffer) => {
    out = (out + d.toString()).slice(-64 * 1024);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  return {
    child,
    output: () => out,
    exited,
    signal: (s) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, s);
      } catch {
        /* already gone */
      }
    },
  };
}

describe('interop with real SRT tools on loopback', () => {
  let t: TestServer;
  before(async () => {
    requireTool('srt-live-transmit');
    requireTool('ffmpeg');
    requireTool('ffprobe');
    t = await startTestServer();
  });
  after(async () => {
    await t.close();
  });

  test('live-transmit: two srt-live-transmit rendezvous peers carry UDP datagrams, encrypted', async (ctx) => {
    const s = await connectStrings(t, 'interop-lt', 'sender');
    const inPort = await freeUdpPort();
    const sink: Socket = createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', r));
    const outPort = sink.address().port;
    const received = new Map<number, Buffer>();
    sink.on('message', (m) => {
      if (m.length >= 4 && received.size < 10_000) received.set(m.readUInt32BE(0), m);
    });
    const senderCmd = (s.for_peer_a['live-transmit'] ?? '').replace('<IN_PORT>', String(inPort));
    const receiverCmd = (s.for_peer_b['live-transmit'] ?? '').replace('<OUT_PORT>', String(outPort));
    const [sBin = '', ...sArgs] = shellWords(senderCmd);
    const [rBin = '', ...rArgs] = shellWords(receiverCmd);
    assert.equal(sBin, 'srt-live-transmit');
    const procs: RunningProcess[] = [startProcess(rBin, rArgs), startProcess(sBin, sArgs)];
    const source = createSocket('udp4');
    const sent = new Map<number, Buffer>();
    let seq = 0;
    const timer = setInterval(() => {
      if (seq >= 2000) return;
      const buf = Buffer.alloc(1316, seq % 251);
      buf.writeUInt32BE(seq, 0);
      sent.set(seq, buf);
      source.send(buf, inPort, '127.0.0.1');
      seq++;
    }, 5);
    try {
      await waitFor(() => received.size >= 50, { timeoutMs: 20_000, what: 'datagrams through the SRT link' });
      for (const [n, buf] of received) assert.ok(sent.get(n)?.equals(buf), `datagram ${n} arrived changed`);
      ctx.diagnostic(`${received.size} datagrams of 1316 bytes arrived intact (${seq} sent so far)`);
      assert.match(procs[0]?.output() ?? '', /SRT source connected/);
      assert.match(procs[1]?.output() ?? '', /SRT target connected/);
    } catch (err) {
      throw new Error(
        `${(err as Error).message}\n--- receiver ---\n${procs[0]?.output()}\n--- sender ---\n${procs[1]?.output()}`,
      );
    } finally {
      clearInterval(timer);
      source.close();
      sink.close();
      for (const p of procs) await p.stop('SIGTERM');
    }
  });

  test('transcoder: ffmpeg → srt-live-transmit ⇄ srt-live-transmit → ffmpeg moves an MPEG-TS file', async (ctx) => {
    const s = await connectStrings(t, 'interop-tc', 'receiver');
    // role=receiver: peer A receives, peer B sends.
    const input = join(t.dir, 'in.ts');
    const output = join(t.dir, 'out.ts');
    execFileSync('ffmpeg', [
      ...['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=25'],
      ...['-t', '6', '-c:v', 'mpeg2video', '-b:v', '800k', '-f', 'mpegts', input],
    ]);
    const receiverCmd = (s.for_peer_a['transcoder'] ?? '').replace('<OUTPUT>', output);
    const senderCmd = (s.for_peer_b['transcoder'] ?? '').replace('<INPUT>', input);
    assert.match(
      receiverCmd,
      /^srt-live-transmit "srt:\/\/127\.0\.0\.1:\d+\?mode=rendezvous&[^"]+" file:\/\/con \| ffmpeg /,
    );
    assert.match(senderCmd, /^ffmpeg -re -i \S+ -c copy -f mpegts - \| srt-live-transmit file:\/\/con "srt:/);
    const receiver = startGroup(receiverCmd, t.dir);
    const sender = startGroup(senderCmd, t.dir);
    try {
      // ffmpeg on the sending side reads the 6 s file in real time and prints its summary at the end
      // (srt-live-transmit itself keeps running after its input ends, like a live encoder link).
      await waitFor(() => /muxing overhead/.test(sender.output()), {
        timeoutMs: 30_000,
        what: `the sender to finish\n--- sender ---\n${sender.output()}`,
      });
      // Let the last packets cross the 120 ms SRT latency.
      await new Promise((r) => setTimeout(r, 1500));
      assert.ok(
        existsSync(output) && statSync(output).size > 100_000,
        `output too small\n${receiver.output()}`,
      );
      // Ctrl-C the receiving pipeline: ffmpeg finishes the file.
      receiver.signal('SIGINT');
      await Promise.race([receiver.exited, new Promise((r) => setTimeout(r, 10_000))]);
      const frames = Number(
        execFileSync('ffprobe', [
          ...['-v', 'error', '-count_frames', '-select_streams', 'v:0'],
          ...['-show_entries', 'stream=codec_name,nb_read_frames', '-of', 'csv=p=0', output],
        ])
          .toString()
          .trim()
          .split(',')[1],
      );
      // 6 s at 25 fps = 150 frames were sent; the tail may still be in flight when the receiver stops.
      assert.ok(frames >= 100, `only ${frames} frames arrived\n${receiver.output()}`);
      ctx.diagnostic(`${frames} of 150 mpeg2video frames decoded from the received file`);
      assert.match(receiver.output(), /SRT source connected/);
    } finally {
      sender.signal('SIGKILL');
      receiver.signal('SIGKILL');
    }
  });
});
