import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot, requireTool, waitFor } from '@broadcast-ops/core/testing';
import { SECRET, startTestServer, type TestServer } from '../helpers.ts';
import { removeNamespace } from '../netns.ts';

/**
 * Live video through the generated connection strings, between two hosts: two network namespaces joined by
 * a veth pair that this test creates and deletes (addresses from 198.18.0.0/15, the range RFC 2544 reserves
 * for device tests, and only inside the two namespaces). For each format this machine can run
 * (srt-live-transmit, the transcoder string's ffmpeg + srt-live-transmit, GStreamer), the broker creates a
 * session, and two signalling peers (test/fixtures/ws-peer.mjs), one in each namespace, register their local
 * port over the broker's WebSocket. The broker runs in namespace B on B's address (as on a host of its own), so
 * the address it sees on A's connection is A's address on the link. Each peer's `peer` message must name the
 * other's link address, the same local port and the passphrase; then the strings of GET /connect are run as they are (only the placeholders <IN_PORT>, <OUT_PORT>, <INPUT>,
 * <OUTPUT>, <SOURCE>, <SINK> are filled in). The source is an H.264 reference stream (x264, 320x240, 25 fps)
 * encoded once by the test and played to peer A in real time; peer B records what arrives. The measured window
 * is its first 250 frames (10 s). Asserted: at least 95 % of those frames decode at the receiver to exactly
 * the pixels the reference decodes to (frame MD5s, ffmpeg's framemd5), so a frame the decoder concealed or
 * built on a damaged reference does not count, and every SRT data payload captured on the wire (tshark in
 * namespace B) is a multiple of 188 bytes (whole TS packets), 1316 for all but the last of a burst. The
 * three formats run at the same time.
 */
const FRAMES = 250;
// Frames played after the measured window (2 s). When a sender closes at the end of its source, the receiver
// drops what it still holds for its TSBPD delay (about one latency of video): the tail keeps the link up
// until every frame of the window has been delivered, so that drop falls on frames that are not measured.
const TAIL_FRAMES = 50;
// The spec's default latency.
const SRT_LATENCY_MS = 200;
const RUN = `${process.pid % 100_000}`;
const NS_A = `punch-a-${RUN}`;
const NS_B = `punch-b-${RUN}`;
const VETH_A = `pva${RUN}`;
const VETH_B = `pvb${RUN}`;
const IP_A = '198.18.0.1';
const IP_B = '198.18.0.2';
const BROKER_PORT = 8787;
const execAsync = promisify(execFile);
// The reference stream: ffmpeg's testsrc (a scrolling gradient and a counter, so every frame differs), encoded
// as a live encoder would (x264 zero-latency, a keyframe every second with its SPS/PPS).
const X264_FFMPEG =
  '-c:v libx264 -preset ultrafast -tune zerolatency -g 25 -b:v 400k -x264-params repeat-headers=1';
const LAVFI = `-nostdin -f lavfi -i testsrc=size=320x240:rate=25 -frames:v ${FRAMES + TAIL_FRAMES}`;
// Plays a file in real time as MPEG-TS; `-flush_packets 0` lets the muxer fill each 1316-byte UDP datagram
// (otherwise it flushes a partial datagram after every frame).
const playLive = (file: string) =>
  `ffmpeg -hide_banner -loglevel error -nostdin -re -i ${file} -c copy -flush_packets 0`;

/** MD5 of every decoded frame of the first video stream, in decoding output order (ffmpeg's framemd5). */
function frameMd5s(file: string): string[] {
  const out = execFileSync(
    'ffmpeg',
    ['-v', 'quiet', '-nostdin', '-i', file, '-map', '0:v:0', '-f', 'framemd5', '-'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 16 * 1024 * 1024 },
  );
  return out
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => l.split(',').pop()?.trim() ?? '');
}

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A shell command inside a namespace, in its own process group so the whole pipeline can be signalled. */
interface Group {
  output: () => string;
  exited: Promise<number | null>;
  signal: (s: NodeJS.Signals) => void;
  child: ChildProcess;
}
function inNamespace(ns: string, cmd: string, cwd: string): Group {
  const child = spawn('ip', ['netns', 'exec', ns, 'sh', '-c', cmd], {
    cwd,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
        if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, s);
      } catch {
        /* already gone */
      }
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function removeNamespaces(): void {
  for (const ns of [NS_A, NS_B]) removeNamespace(ns);
}

function createNamespaces(): void {
  removeNamespaces();
  sh('ip', ['netns', 'add', NS_A]);
  sh('ip', ['netns', 'add', NS_B]);
  sh('ip', ['link', 'add', VETH_A, 'type', 'veth', 'peer', 'name', VETH_B]);
  sh('ip', ['link', 'set', VETH_A, 'netns', NS_A]);
  sh('ip', ['link', 'set', VETH_B, 'netns', NS_B]);
  for (const [ns, dev, ip] of [
    [NS_A, VETH_A, IP_A],
    [NS_B, VETH_B, IP_B],
  ] as const) {
    sh('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', dev]);
    sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
}

type Format = 'live-transmit' | 'transcoder' | 'pipeline';

interface Result {
  /** Frames of the measured window decoded to exactly the reference's pixels. */
  frames: number;
  /** Frames the recording decodes to at all (window, tail, and any concealed ones). */
  decoded: number;
}

describe(
  "live H.264 between two network namespaces through the broker's strings",
  { concurrency: true },
  () => {
    let t: TestServer;
    let capture: Group | undefined;
    let broker: Group | undefined;
    const brokerUrl = `http://${IP_B}:${BROKER_PORT}`;

    /** A REST call to the broker, made from namespace B (curl), as JSON. */
    async function rest(method: string, path: string, token?: string, body?: unknown) {
      const args = ['netns', 'exec', NS_B, 'curl', '-s', '-X', method, '-w', '\n%{http_code}'];
      if (token) args.push('-H', `authorization: Bearer ${token}`);
      if (body !== undefined) args.push('-H', 'content-type: application/json', '-d', JSON.stringify(body));
      const { stdout } = await execAsync('ip', [...args, brokerUrl + path]);
      const cut = stdout.lastIndexOf('\n');
      const text = stdout.slice(0, cut);
      return { status: Number(stdout.slice(cut + 1)), text, json: text ? JSON.parse(text) : undefined };
    }

    /** A signalling peer in `ns` that registers `port`; `registered` once confirmed, `peer` its peer message. */
    function registerPeer(ns: string, name: string, token: string, port: number, label: string) {
      const peer = inNamespace(
        ns,
        `exec ${process.execPath} ${join(repoRoot, 'packages/punch/test/fixtures/ws-peer.mjs')} ` +
          `${brokerUrl} ${name} ${token} ${port} ${label}`,
        t.dir,
      );
      peers.push(peer);
      const seen = (pattern: RegExp, what: string) =>
        waitFor(() => pattern.exec(peer.output())?.[0], { timeoutMs: 15_000, what }).catch((err: unknown) => {
          throw new Error(`${(err as Error).message}\n${peer.output()}`);
        });
      return {
        // The `session` broadcast that confirms a registration counts this peer.
        registered: seen(/"peers":[12]/, `${label}'s registration`),
        peer: seen(/^\{"type":"peer".*$/m, `${label}'s peer message`).then(
          (line) => JSON.parse(line) as { ip: string; port: number; localPort: number; passphrase: string },
        ),
      };
    }
    const peers: Group[] = [];
    const pcap = () => join(t.dir, 'srt.pcap');
    const reference = () => join(t.dir, 'reference.ts');
    /** The decoded frames of the measured window, by MD5. */
    let window = new Set<string>();

    before(async () => {
      for (const tool of ['ip', 'srt-live-transmit', 'ffmpeg', 'gst-launch-1.0', 'gst-inspect-1.0', 'tshark'])
        requireTool(tool);
      for (const element of [
        'srtsink',
        'srtsrc',
        'x264enc',
        'mpegtsmux',
        'tsdemux',
        'h264parse',
        'videotestsrc',
      ]) {
        try {
          sh('gst-inspect-1.0', ['--exists', element]);
        } catch {
          throw new Error(
            `GStreamer element ${element} is missing; install: apt-get install -y gstreamer1.0-plugins-base ` +
              'gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly (npm run setup:tools)',
          );
        }
      }
      t = await startTestServer();
      sh('ffmpeg', [
        '-hide_banner',
        '-loglevel',
        'error',
        ...LAVFI.split(' '),
        ...X264_FFMPEG.split(' '),
        '-f',
        'mpegts',
        reference(),
      ]);
      const md5s = frameMd5s(reference());
      assert.equal(md5s.length, FRAMES + TAIL_FRAMES, 'the reference decodes to every frame');
      window = new Set(md5s.slice(0, FRAMES));
      assert.equal(window.size, FRAMES, 'every frame of the window differs from the others');
      createNamespaces();
      // One capture for all three links (SRT ports 9101-9103) on namespace B's side of the veth.
      // The broker under test, as a process of its own in namespace B on B's link address.
      broker = inNamespace(
        NS_B,
        `PUNCH_SECRET=${SECRET} PUNCH_HOST=${IP_B} PUNCH_PORT=${BROKER_PORT} PUNCH_DB=${join(t.dir, 'ns.db')} ` +
          `LOG_LEVEL=info exec ${process.execPath} ${join(repoRoot, 'packages/punch/bin/punch.mjs')} serve`,
        t.dir,
      );
      await waitFor(() => /punch broker listening/.test(broker?.output() ?? ''), {
        timeoutMs: 30_000,
        what: 'the broker in namespace B to listen',
      });
      capture = inNamespace(
        NS_B,
        `exec tshark -i ${VETH_B} -f "udp portrange 9101-9103" -w ${pcap()}`,
        t.dir,
      );
      await waitFor(() => /Capturing on/.test(capture?.output() ?? ''), {
        timeoutMs: 20_000,
        what: 'tshark to start capturing',
      });
    });

    after(async () => {
      for (const p of peers) p.signal('SIGTERM');
      broker?.signal('SIGTERM');
      capture?.signal('SIGINT');
      if (capture) await Promise.race([capture.exited, sleep(5_000)]);
      removeNamespaces();
      await t.close();
    });

    /**
     * Strings for a session whose peers registered over the WebSocket from A (198.18.0.1) and B (198.18.0.2),
     * both with local port `port`.
     */
    async function strings(name: string, port: number) {
      const created = await rest('POST', '/api/session', undefined, { name, latency: SRT_LATENCY_MS });
      assert.equal(created.status, 201, created.text);
      const admin = created.json.token as string;
      const token = async (label: string) =>
        (await rest('POST', `/api/session/${name}/token`, admin, { label })).json.token as string;
      const [tokA, tokB] = [await token('A'), await token('B')];
      // A registers first (slot a, "peer A" of /connect), then B.
      const peerA = registerPeer(NS_A, name, tokA, port, 'A');
      await peerA.registered;
      const [toA, toB] = await Promise.all([peerA.peer, registerPeer(NS_B, name, tokB, port, 'B').peer]);
      assert.deepEqual([toA.ip, toA.port, toA.localPort], [IP_B, port, port]);
      assert.deepEqual([toB.ip, toB.port, toB.localPort], [IP_A, port, port]);
      assert.equal(toA.passphrase, toB.passphrase);
      const r = await rest('GET', `/api/session/${name}/connect?role=sender`, admin);
      assert.equal(r.status, 200, r.text);
      assert.ok((r.json.for_peer_a['live-transmit'] as string).includes(`passphrase=${toA.passphrase}&`));
      const s = r.json as { for_peer_a: Record<Format, string>; for_peer_b: Record<Format, string> };
      assert.match(
        s.for_peer_a['live-transmit'],
        new RegExp(`srt://${IP_B}:${port}\\?mode=rendezvous&port=${port}&`),
      );
      assert.match(
        s.for_peer_b['live-transmit'],
        new RegExp(`srt://${IP_A}:${port}\\?mode=rendezvous&port=${port}&`),
      );
      return { sender: s.for_peer_a, receiver: s.for_peer_b };
    }

    /** Frames of the window that the recording decodes to bit-exactly, and all frames it decodes to. */
    function countFrames(file: string, log: string): Result {
      assert.ok(existsSync(file) && statSync(file).size > 0, `nothing recorded\n${log}`);
      const decoded = frameMd5s(file);
      const exact = new Set(decoded.filter((m) => window.has(m)));
      return { frames: exact.size, decoded: decoded.length };
    }

    /** SRT data packets (first bit 0) to port `port`: payload length (UDP payload minus the 16-byte header). */
    function payloadSizes(port: number): Map<number, number> {
      const out = sh('tshark', [
        ...['-r', pcap(), '-Y', `udp.dstport == ${port} && !(udp.payload[0:1] & 80)`],
        ...['-T', 'fields', '-e', 'udp.length'],
      ]);
      const sizes = new Map<number, number>();
      for (const line of out.split('\n').filter(Boolean)) {
        const payload = Number(line) - 8 - 16;
        sizes.set(payload, (sizes.get(payload) ?? 0) + 1);
      }
      return sizes;
    }

    /** Run one format: receiver in B, sender in A; returns decoded frames once the source has ended. */
    async function run(format: Format, port: number): Promise<Result> {
      const s = await strings(`video-${format}`, port);
      const out = join(t.dir, `${format}.ts`);
      const receivers: Group[] = [];
      const senders: Group[] = [];
      const stopAll = () => {
        for (const g of [...senders, ...receivers]) g.signal('SIGKILL');
      };
      const logs = () =>
        [
          ...senders.map((g) => `--- sender ---\n${g.output()}`),
          ...receivers.map((g) => `--- receiver ---\n${g.output()}`),
        ].join('\n');
      try {
        let sourceDone: () => boolean;
        if (format === 'live-transmit') {
          const outPort = port + 100;
          const inPort = port + 200;
          // The recorder keeps every datagram as it comes (a second srt-live-transmit: UDP in, file out).
          receivers.push(
            inNamespace(NS_B, `exec srt-live-transmit udp://127.0.0.1:${outPort} file://con > ${out}`, t.dir),
          );
          receivers.push(inNamespace(NS_B, s.receiver[format].replace('<OUT_PORT>', String(outPort)), t.dir));
          senders.push(inNamespace(NS_A, s.sender[format].replace('<IN_PORT>', String(inPort)), t.dir));
          // The link first, then the live source, so no frame is sent into a link still handshaking.
          await waitFor(() => /SRT target connected/.test(senders[0]?.output() ?? ''), {
            timeoutMs: 20_000,
            what: () => `the ${format} link\n${logs()}`,
          });
          const source = inNamespace(
            NS_A,
            `exec ${playLive(reference())} -f mpegts "udp://127.0.0.1:${inPort}?pkt_size=1316"`,
            t.dir,
          );
          senders.push(source);
          let ended = false;
          void source.exited.then(() => (ended = true));
          sourceDone = () => ended;
        } else if (format === 'transcoder') {
          receivers.push(inNamespace(NS_B, s.receiver[format].replace('<OUTPUT>', out), t.dir));
          // The live source's MPEG-TS goes to the string's ffmpeg on stdin (<INPUT> = "-").
          const encoder = `${playLive(reference())} -f mpegts -`;
          // (The string's own ffmpeg reads stdin as its input, so `-nostdin` is not added to it.)
          const sender = inNamespace(
            NS_A,
            `{ ${encoder}; echo SOURCE-DONE >&2; } | ${s.sender[format].replace('<INPUT>', '-')}`,
            t.dir,
          );
          senders.push(sender);
          sourceDone = () => sender.output().includes('SOURCE-DONE');
        } else {
          receivers.push(
            inNamespace(
              NS_B,
              `exec ${s.receiver[format].replace('<SINK>', `h264parse ! mpegtsmux ! filesink location=${out}`)}`,
              t.dir,
            ),
          );
          // The reference in real time: `identity sync=true` paces the buffers on the pipeline clock.
          const source = `filesrc location=${reference()} ! tsdemux ! h264parse config-interval=-1 ! identity sync=true`;
          await sleep(500); // the receiving pipeline binds its port first
          const sender = inNamespace(NS_A, `exec ${s.sender[format].replace('<SOURCE>', source)}`, t.dir);
          senders.push(sender);
          let ended = false;
          void sender.exited.then(() => (ended = true));
          sourceDone = () => ended;
        }
        await waitFor(sourceDone, {
          timeoutMs: 60_000,
          what: () => `the ${format} source to finish\n${logs()}`,
        });
        // Let the last packets cross the SRT latency, then stop the receiver (ffmpeg and GStreamer finish the file).
        await sleep(SRT_LATENCY_MS + 1_500);
        for (const g of receivers) g.signal(format === 'live-transmit' ? 'SIGTERM' : 'SIGINT');
        await Promise.race([Promise.all(receivers.map((g) => g.exited)), sleep(10_000)]);
        return countFrames(out, logs());
      } finally {
        stopAll();
      }
    }

    const formats: [Format, number][] = [
      ['live-transmit', 9101],
      ['transcoder', 9102],
      ['pipeline', 9103],
    ];
    const results = new Map<Format, Promise<Result>>();

    for (const [format, port] of formats) {
      test(`${format}: ≥ 95 % of ${FRAMES} live x264 frames decode bit-exactly at the receiver`, async (ctx) => {
        const pending = run(format, port);
        results.set(format, pending);
        const { frames, decoded } = await pending;
        ctx.diagnostic(
          `${format}: ${frames} of the ${FRAMES} window frames decoded bit-exactly at the receiver ` +
            `(${decoded} frames decoded of ${FRAMES + TAIL_FRAMES} played)`,
        );
        assert.ok(
          frames >= Math.ceil(FRAMES * 0.95),
          `${format}: only ${frames} of ${FRAMES} frames decoded bit-exactly`,
        );
      });
    }

    test('on the wire: every SRT data payload is whole TS packets, 1316 bytes as the strings promise', async (ctx) => {
      // After the three runs (they are concurrent tests of this suite): stop the capture and read it.
      await waitFor(() => results.size === formats.length, {
        timeoutMs: 60_000,
        what: 'the three runs to start',
      });
      await Promise.allSettled(results.values());
      capture?.signal('SIGINT');
      if (capture) await Promise.race([capture.exited, sleep(5_000)]);
      capture = undefined;
      for (const [format, port] of formats) {
        const sizes = payloadSizes(port);
        const total = [...sizes.values()].reduce((a, b) => a + b, 0);
        ctx.diagnostic(
          `${format}: ${total} data packets; payload bytes → count: ${JSON.stringify(Object.fromEntries(sizes))}`,
        );
        assert.ok(total > 100, `${format}: only ${total} SRT data packets captured`);
        for (const size of sizes.keys()) assert.equal(size % 188, 0, `${format}: a ${size}-byte payload`);
        // 1316 dominates: only the last packet of a burst may be shorter.
        assert.ok((sizes.get(1316) ?? 0) >= total * 0.9, `${format}: payloads ${JSON.stringify([...sizes])}`);
      }
    });
  },
);
