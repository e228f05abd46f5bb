import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import { deleteSession, sleep } from '../agent-netns.ts';
import { encodings, scanMemory } from '../memory-scan.ts';
import { sh } from '../netns.ts';
import { SERVER, createRedisNetns } from '../redis-netns.ts';
import { looksLikeTs, readSrtCapture } from '../srt-capture.ts';

/**
 * The relay holds no key (docs/relay.md "What the relay can and cannot see"): an encrypted session relayed
 * through a separate `punch relay` process, on Redis, allocated by a `punch serve` instance whose own relay
 * is off (test/redis-netns.ts: everything server-side in one namespace, the two `punch agent`s running
 * srt-live-transmit in two others, their direct path dropped so the broker falls back to the relay).
 * Asserted, with the MPEG-TS file arriving bit-exact (length and SHA-256):
 * - a capture on the relay's ports (tshark in the server namespace) holds only SRT data packets with their
 *   encryption flags (KK) set and no plaintext MPEG-TS, and the same check finds plaintext in the file;
 * - the relay process's whole memory (every readable mapping of /proc/<pid>/mem, test/memory-scan.ts)
 *   holds the session's passphrase neither as UTF-8 nor as UTF-16LE, while the same scan finds it in the
 *   broker's memory (it generated the passphrase and hands it to the peers) and in the sender's
 *   srt-live-transmit: the scan is able to find it;
 * - the relay's command line, environment and log file (its whole output) do not contain it either.
 * The passphrase is read from the sender's srt-live-transmit command line, where the agent puts it.
 */
const PORT = 8787;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The pid of the srt-live-transmit running in namespace `ns`, and its command line. */
function srtIn(ns: string): { pid: number; cmdline: string } | undefined {
  for (const pid of sh('ip', ['netns', 'pids', ns]).split(/\s+/).filter(Boolean)) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (/^\S*srt-live-transmit /.test(cmdline)) return { pid: Number(pid), cmdline };
    } catch {
      /* gone */
    }
  }
  return undefined;
}

test('an encrypted session through a separate `punch relay`: the capture shows only encrypted SRT, the relay holds no passphrase in memory, config or logs', async () => {
  for (const tool of ['ip', 'nft', 'srt-live-transmit', 'ffmpeg', 'curl', 'redis-server', 'tshark'])
    requireTool(tool);
  const rig = await createRedisNetns('kl');
  try {
    const rest = rig.rest(PORT);
    const broker = rig.broker(PORT, 'PUNCH_RELAY=off PUNCH_RELAY_AFTER_MS=3000');
    const relayLog = join(rig.dir, 'relay.log');
    const relay = rig.relay(relayLog);
    const relayOutput = () => (existsSync(relayLog) ? readFileSync(relayLog, 'utf8') : '');
    await waitFor(() => /punch relay registered/.test(relayOutput()), {
      timeoutMs: 30_000,
      what: () => `punch relay registered\n${relayOutput()}`,
    });
    await waitFor(() => /^punch_relays_up 1$/m.test(rig.metrics(PORT)), {
      timeoutMs: 30_000,
      what: () => `the broker to see the relay\n${broker.output().slice(-3000)}`,
    });
    const pcap = join(rig.dir, 'relay.pcap');
    const capture = await rig.capture(pcap);

    const ref = rig.reference(4);
    const link = await rig.relayedLink(
      'kl',
      { session: PORT, sender: PORT, receiver: PORT },
      () => `\n--- broker\n${broker.output().slice(-4000)}\n--- relay\n${relayOutput().slice(-3000)}`,
    );
    const { admin, sender, receiver, rx, diag } = link;
    const stream = (await link.view()).streams.default;
    assert.equal(stream.path, 'relayed', diag());
    assert.equal(stream.relay.address, SERVER);
    const ports = [stream.relay.ports.peer_a, stream.relay.ports.peer_b];
    // The allocation is the separate relay's (the broker's own relay is off).
    assert.match(relayOutput(), /"ports":\[\d+,\d+\][^\n]*"msg":"relay allocation made"/, diag());

    // Bit-exact over the relay.
    rig.feed(ref, 4);
    const size = statSync(ref).size;
    const rxSize = () => (existsSync(rx) ? statSync(rx).size : 0);
    await waitFor(() => rxSize() >= size, {
      timeoutMs: 60_000,
      what: () => `${size} bytes at the receiver (has ${rxSize()})${diag()}`,
    });
    await sleep(1000);
    const want = readFileSync(ref);
    const got = readFileSync(rx);
    assert.equal(got.length, want.length, 'received length');
    assert.equal(sha256(got), sha256(want), 'received bytes');

    // The passphrase, from the sender's srt-live-transmit command line.
    const srt = srtIn(rig.topo.a);
    assert.ok(srt, `srt-live-transmit in A${diag()}`);
    const passphrase = /passphrase=([^&\s]+)/.exec(srt.cmdline)?.[1];
    assert.ok(
      passphrase && passphrase.length >= 10,
      `a passphrase on the command line: ${srt.cmdline.replace(/passphrase=[^&]*/, 'passphrase=…')}`,
    );
    const needles = encodings(passphrase);
    const relayPid = relay.child.pid;
    const brokerPid = broker.child.pid;
    assert.ok(relayPid !== undefined && brokerPid !== undefined);
    assert.match(
      readFileSync(`/proc/${relayPid}/cmdline`, 'utf8'),
      /punch\.mjs\0relay\0/,
      'the relay process',
    );

    // (b) The relay's whole memory, while it carries the link: no passphrase. The same scan finds it in
    // the broker and in the SRT peer.
    const inRelay = scanMemory(relayPid, needles);
    process.stdout.write(
      `# relay memory: ${inRelay.regions} regions, ${inRelay.bytes} bytes, ${inRelay.skipped} unreadable\n`,
    );
    assert.ok(inRelay.bytes > 10 * 1024 * 1024, `scanned ${inRelay.bytes} bytes of the relay`);
    assert.deepEqual(inRelay.hits, [[], []], 'the passphrase in the relay process memory (UTF-8, UTF-16LE)');
    const inBroker = scanMemory(brokerPid, needles);
    assert.ok((inBroker.hits[0] ?? []).length + (inBroker.hits[1] ?? []).length > 0, 'found in the broker');
    const inPeer = scanMemory(srt.pid, needles);
    assert.ok((inPeer.hits[0] ?? []).length > 0, 'found in the sender srt-live-transmit');

    // (c) Nor in its command line, environment or log.
    for (const file of ['cmdline', 'environ']) {
      assert.ok(
        !readFileSync(`/proc/${relayPid}/${file}`, 'latin1').includes(passphrase),
        `in the relay's ${file}`,
      );
    }
    assert.match(relayOutput(), /punch relay registered/);
    assert.ok(!relayOutput().includes(passphrase), "the passphrase in the relay's log");

    // (a) The capture on the relay's ports.
    capture.signal('SIGINT');
    await Promise.race([capture.exited, sleep(5000)]);
    const seen = readSrtCapture(pcap, ports);
    process.stdout.write(`# capture: ${JSON.stringify(seen)}\n`);
    // In from one peer's link and out to the other's: each data packet twice.
    assert.ok(seen.data >= (2 * size) / 1316, `data packets captured: ${seen.data}`);
    assert.equal(seen.encrypted, seen.data, 'every SRT data packet has its KK encryption flags set');
    assert.equal(seen.plaintextTs, 0, 'no plaintext MPEG-TS in any datagram');
    assert.ok(looksLikeTs(want.subarray(0, 1316)), 'the same check finds plaintext in the file');

    assert.deepEqual(await deleteSession({ rest }, 'kl', admin, [sender, receiver]), [0, 0], diag());
  } finally {
    rig.cleanup();
  }
});
