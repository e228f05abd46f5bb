import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { repoRoot, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { inNamespace, sh, type Group } from '../netns.ts';
import { createRelayTopology, startRelay, type RelayTopology } from '../relay-netns.ts';
import { looksLikeTs, readSrtCapture } from '../srt-capture.ts';

/**
 * SRT through the opaque relay (src/io/relay/udp-relay.ts), between real srt-live-transmit instances in
 * three network namespaces (relay-netns.ts: A and B each reach only the relay's namespace R). Every link is
 * encrypted with a passphrase the relay process never receives. Proved here, and written up in
 * packages/punch/docs/relay.md:
 * - rendezvous on both sides, each peer pointed at its own relay port, connects, and a 3 MB MPEG-TS file
 *   arrives bit-exact (length and SHA-256); a tshark capture in R shows only SRT data packets whose
 *   encryption flags (KK, the data header's bits 3-4 of word 1) are set, and no plaintext TS packet;
 * - above the allocation's byte-rate cap the relay drops and counts, forwards no more than its token bucket
 *   allows, and the SRT link stays up, degraded;
 * - both sides as callers does not connect through an opaque forwarder: each caller takes the other's
 *   induction request for a listener's answer (libsrt CUDT::processConnectResponse), nothing is delivered;
 * - caller towards a listener does not connect through a latching forwarder: the listener never sends
 *   first, so its side never latches and the caller's handshakes are dropped as `peer_not_latched`.
 */
const PASSPHRASE = 'relay-interop-passphrase-7f3a';
const ENC = `passphrase=${PASSPHRASE}&pbkeylen=16`;
const SRT_PORT = 5000;
const UDP_IN = 7000;
const FEED = join(repoRoot, 'packages/punch/test/fixtures/udp-feed.mjs');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** `RcvbufErrors` of the UDP counters in namespace `ns` (/proc/net/snmp: a header line, then the values). */
function udpRcvbufErrors(ns: string): number {
  const udp = sh('ip', ['netns', 'exec', ns, 'cat', '/proc/net/snmp'])
    .split('\n')
    .filter((l) => l.startsWith('Udp: '))
    .map((l) => l.split(/\s+/));
  const at = udp[0]?.indexOf('RcvbufErrors') ?? -1;
  return at > 0 ? Number(udp[1]?.[at]) : 0;
}

describe('SRT through the opaque relay, in network namespaces', () => {
  let topo: RelayTopology;
  const tmp = tempDir('punch-relay-interop-');
  const groups: Group[] = [];
  let ref = '';
  const run = (ns: string, cmd: string) => {
    const g = inNamespace(ns, cmd, tmp.path);
    groups.push(g);
    return g;
  };
  const stopAll = async () => {
    for (const g of groups.splice(0)) {
      g.signal('SIGTERM');
      await Promise.race([g.exited, sleep(3000)]);
      g.signal('SIGKILL');
    }
  };

  before(() => {
    for (const tool of ['ip', 'srt-live-transmit', 'ffmpeg', 'tshark']) requireTool(tool);
    topo = createRelayTopology('rl');
    ref = join(tmp.path, 'ref.ts');
    // 3 MB of MPEG-TS: ffmpeg's testsrc as MPEG-2, muxed at a constant 4 Mbit/s for 6 s (padded with null
    // packets as a broadcast multiplex is), fed byte-exact as 1316-byte datagrams.
    sh('ffmpeg', [
      ...['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'lavfi'],
      ...['-i', 'testsrc=size=320x240:rate=25', '-t', '6'],
      ...['-c:v', 'mpeg2video', '-b:v', '1M', '-muxrate', '4000000', '-f', 'mpegts', ref],
    ]);
  });

  // A test that failed left its srt-live-transmit processes holding SRT_PORT in A and B: end them first.
  beforeEach(stopAll);

  after(async () => {
    await stopAll();
    topo.remove();
    tmp.remove();
  });

  /** Both peers in rendezvous towards their own relay port; resolves once the sender reports the link up. */
  async function rendezvous(relay: Awaited<ReturnType<typeof startRelay>>, name: string) {
    const rx = join(tmp.path, name);
    const receiver = run(
      topo.b,
      `exec srt-live-transmit -v "srt://${topo.relayB}:${relay.ports[1]}?mode=rendezvous&port=${SRT_PORT}&${ENC}" file://con > ${rx}`,
    );
    const sender = run(
      topo.a,
      `exec srt-live-transmit -v udp://127.0.0.1:${UDP_IN} "srt://${topo.relayA}:${relay.ports[0]}?mode=rendezvous&port=${SRT_PORT}&${ENC}"`,
    );
    const diag = () =>
      `\n--- sender\n${sender.output().slice(-3000)}\n--- receiver\n${receiver.output().slice(-3000)}\n--- relay\n${relay.group.output().slice(-2000)}`;
    await waitFor(() => /SRT target connected/.test(sender.output()), {
      timeoutMs: 30_000,
      what: 'the rendezvous through the relay',
    }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}${diag()}`);
    });
    return { rx, receiver, sender, diag };
  }

  test('rendezvous on both sides: bit-exact through the relay, which carries only encrypted SRT', async () => {
    const started = Date.now();
    const relay = await startRelay(topo.r, [topo.ipA, topo.ipB]);
    groups.push(relay.group);
    const rcvbufErrorsBefore = udpRcvbufErrors(topo.r);
    const pcap = join(tmp.path, 'relay.pcap');
    const capture = run(topo.r, `exec tshark -i any -f udp -w ${pcap}`);
    await waitFor(() => /Capturing on/.test(capture.output()), {
      timeoutMs: 20_000,
      what: 'tshark capturing',
    });
    const { rx, receiver, diag } = await rendezvous(relay, 'rx.ts');
    // srt-live-transmit binds its UDP input after the SRT target connects: give it a moment.
    await sleep(1000);
    // 8 datagrams every 10 ms: about 8.4 Mbit/s.
    const feed = run(topo.a, `exec ${process.execPath} ${FEED} ${ref} ${UDP_IN} 8 0`);
    const size = statSync(ref).size;
    process.stdout.write(`# connected after ${Date.now() - started} ms\n`);
    await feed.exited;
    process.stdout.write(`# fed ${size} bytes after ${Date.now() - started} ms\n`);
    // Until the relay has forwarded the file and then less than one data packet in a second: SRT's keepalives
    // and ACKs go on, so the count never stands still (the receiver's TSBPD latency has passed by then).
    let last = -1;
    await waitFor(
      async () => {
        const now = relay.counters()?.bytes[0] ?? 0;
        const done = last >= size && now - last < 1316;
        last = now;
        if (!done) await sleep(1000);
        return done;
      },
      { timeoutMs: 60_000, what: `${size} bytes through the relay` },
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}${diag()}`);
    });
    // srt-live-transmit writes file://con through stdio buffers: end it so that it flushes.
    receiver.signal('SIGTERM');
    await Promise.race([receiver.exited, sleep(5000)]);
    const got = readFileSync(rx);
    const want = readFileSync(ref);
    assert.equal(got.length, want.length, 'received length');
    assert.equal(sha256(got), sha256(want), 'received bytes');
    const counters = relay.counters();
    assert.ok(counters, 'relay counters');
    assert.deepEqual(
      counters.latched.map((l) => l?.address),
      [topo.ipA, topo.ipB],
      'each side latched to its pinned peer',
    );
    assert.equal(counters.drops['unpinned_source'], 0);
    // Each peer's own local port (srt-live-transmit's `port=`), not the relay port it talks to.
    assert.deepEqual(
      counters.latched.map((l) => l?.port),
      [SRT_PORT, SRT_PORT],
    );
    // docs/relay.md "What the relay measures", from the SRT headers alone: every data packet of the file
    // seen, the RTTs plausible for a veth hop, and no loss upstream of the relay but what the kernel dropped
    // at the relay's own sockets (a starved relay process on a loaded host; none on an idle one).
    const media = counters.path?.[0];
    assert.ok(media, `path figures${diag()}`);
    const dropped = udpRcvbufErrors(topo.r) - rcvbufErrorsBefore;
    process.stdout.write(
      `# relay measured ${JSON.stringify(media)}; UDP receive-buffer drops in R: ${dropped}\n`,
    );
    // Every original data packet of the file is accounted for: seen, or lost before the relay read it (a gap
    // in the sequence numbers; its retransmission, seen later, is counted in `retransmitted`).
    assert.ok(
      media.packets - media.retransmitted + media.lost >= Math.ceil(size / 1316),
      `data packets ${media.packets}, retransmitted ${media.retransmitted}, lost ${media.lost}, file ${Math.ceil(size / 1316)}`,
    );
    assert.ok(media.rttMs !== null && media.rttMs > 0 && media.rttMs < 500, `end-to-end RTT ${media.rttMs}`);
    assert.ok(
      media.senderLegMs !== null && media.senderLegMs > 0 && media.senderLegMs < 500,
      `relay-sender leg ${media.senderLegMs}`,
    );
    assert.ok(media.lost <= dropped, `upstream loss ${media.lost}, receive-buffer drops ${dropped}`);
    assert.equal(counters.path?.[1].packets, 0, 'no data packet from the receiver');

    capture.signal('SIGINT');
    await Promise.race([capture.exited, sleep(5000)]);
    const t0 = Date.now();
    const { datagrams, data, encrypted, plaintextTs } = readSrtCapture(pcap, relay.ports);
    process.stdout.write(`# tshark read ${datagrams} datagrams in ${Date.now() - t0} ms\n`);
    // Both directions are captured (in and out of R), so each data packet appears twice.
    assert.ok(data >= (2 * size) / 1316, `data packets captured: ${data}`);
    assert.equal(encrypted, data, 'every SRT data packet has its KK encryption flags set');
    assert.equal(plaintextTs, 0, 'no plaintext MPEG-TS in any datagram');
    // The same check finds the plaintext in the reference itself (it is able to fail).
    assert.ok(looksLikeTs(want.subarray(0, 1316)));
    // The relay was never given the passphrase: not in its command line or environment.
    const pid = relay.group.child.pid;
    assert.ok(pid !== undefined);
    for (const file of ['cmdline', 'environ']) {
      const text = readFileSync(`/proc/${pid}/${file}`, 'latin1');
      assert.ok(!text.includes(PASSPHRASE), `passphrase in the relay's ${file}`);
    }
    await stopAll();
  });

  test('above the byte-rate cap: datagrams dropped and counted, the link stays up and degrades', async () => {
    // 300 kB/s (2.4 Mbit/s) per direction against a stream fed at about 8.4 Mbit/s.
    const relay = await startRelay(topo.r, [topo.ipA, topo.ipB], 300_000);
    const since = Date.now();
    groups.push(relay.group);
    const { rx, receiver, diag } = await rendezvous(relay, 'rx-capped.ts');
    await sleep(1000);
    const feed = run(topo.a, `exec ${process.execPath} ${FEED} ${ref} ${UDP_IN} 8 0`);
    await feed.exited;
    await sleep(3000);
    const counters = relay.counters();
    const got = existsSync(rx) ? statSync(rx).size : 0;
    assert.ok((counters?.drops['over_rate'] ?? 0) > 100, `over-rate drops counted${diag()}`);
    // Roughly the cap's worth arrives (SRT retransmits some of what the relay dropped, then drops what is too
    // late), and the receiver never lost the link.
    assert.ok(got > 100_000, `bytes delivered under the cap: ${got}${diag()}`);
    // The token bucket: at most the rate over the allocation's life plus one 250 ms burst.
    const bound = 300_000 * ((Date.now() - since) / 1000) + 75_000;
    assert.ok((counters?.bytes[0] ?? 0) <= bound, `forwarded ${counters?.bytes[0]} bytes, bound ${bound}`);
    process.stdout.write(
      `# capped: ${got} bytes delivered of ${statSync(ref).size}, ${counters?.drops['over_rate']} over-rate drops\n`,
    );
    assert.doesNotMatch(receiver.output(), /disconnected|Connection lost/i, diag());
    await stopAll();
  });

  for (const mode of [
    {
      name: 'both sides as callers',
      a: 'mode=caller',
      b: (port: number) => `srt://${topo.relayB}:${port}?mode=caller&${ENC}`,
    },
    {
      name: 'caller towards a listener',
      a: 'mode=caller',
      b: () => `srt://:${SRT_PORT}?mode=listener&${ENC}`,
    },
  ]) {
    test(`${mode.name}: no link through an opaque latching forwarder`, async () => {
      const relay = await startRelay(topo.r, [topo.ipA, topo.ipB]);
      groups.push(relay.group);
      const rx = join(tmp.path, `rx-${mode.name.replace(/\W/g, '')}.ts`);
      const receiver = run(
        topo.b,
        `exec srt-live-transmit -v "${mode.b(relay.ports[1])}" file://con > ${rx}`,
      );
      await sleep(300);
      const sender = run(
        topo.a,
        `exec srt-live-transmit -v udp://127.0.0.1:${UDP_IN} "srt://${topo.relayA}:${relay.ports[0]}?${mode.a}&${ENC}"`,
      );
      run(topo.a, `exec ${process.execPath} ${FEED} ${ref} ${UDP_IN} 8 0`);
      // The feed lasts about 3 s; SRT's connection timeout is 3 s, and srt-live-transmit retries.
      await sleep(8000);
      const counters = relay.counters();
      const got = existsSync(rx) ? statSync(rx).size : 0;
      const diag = `\n--- sender\n${sender.output().slice(-1500)}\n--- receiver\n${receiver.output().slice(-1500)}\n--- relay ${JSON.stringify(counters)}`;
      assert.equal(got, 0, `bytes delivered${diag}`);
      assert.doesNotMatch(receiver.output(), /Accepted SRT|SRT source connected/, diag);
      if (mode.name.startsWith('caller towards')) {
        assert.ok(counters && counters.latched[1] === null, `the listener's side never latched${diag}`);
        assert.ok((counters?.drops['peer_not_latched'] ?? 0) > 0, diag);
      } else {
        assert.ok(counters && (counters.packets[0] ?? 0) > 0, `handshakes crossed the relay${diag}`);
      }
      await stopAll();
    });
  }
});
