import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import {
  BROKER,
  SRT_PORT,
  count,
  createRig,
  deleteSession,
  listening,
  senderReceiverSession,
  readBytes,
  wholePasses,
} from '../agent-netns.ts';
import { IP_B, sh } from '../netns.ts';

/**
 * A direct link that stops carrying in the middle of a show (docs/relay.md "Detection"): a NAT that rebinds
 * its mapping, a carrier that moves a phone to another address. The rig of test/agent-netns.ts: the broker
 * with its in-process relay and the receiving agent in namespace B, the sender in A. Rendezvous connects
 * directly and media arrives bit-exact; then a firewall rule in A drops A's datagrams to B's SRT port.
 * Asserted: SRT notices the dead peer, the agents report it, the broker moves the stream to its relay one
 * detection window later (RELAYING, then CONNECTED with path relayed), both agents log the move, and media
 * sent after it arrives bit-exact over the relay, after the part sent directly.
 */
const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');
const size = (file: string): number => (existsSync(file) ? statSync(file).size : 0);

test('a direct link that stops carrying mid-show: the broker moves it to its relay, the agents follow, media flows again', async () => {
  for (const tool of ['ip', 'nft', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
  const rig = createRig('rm');
  const { rest } = rig;
  try {
    const ref = rig.reference(2);
    const refSize = statSync(ref).size;
    const broker = rig.startBroker(`PUNCH_RELAY_PUBLIC_ADDRESS=${IP_B}`);
    await listening(broker);
    const { admin, tSend, tRecv } = await senderReceiverSession(rest, 'rm');
    const observer = rig.observe('rm', admin);
    const rx = join(rig.dir, 'rx.ts');
    const receiver = rig.agent(rig.ns.b, 'rm', tRecv, 'receiver', `--output file:${rx}`);
    // The sender declares its encoder's rate (2 Mbit/s): the relay's cap comes from it (1.5x, bytes/s).
    const sender = rig.agent(
      rig.ns.a,
      'rm',
      tSend,
      'sender',
      `--input udp://127.0.0.1:9300 --bitrate 2000000`,
    );
    const diag = () =>
      `\n--- broker\n${broker.output().slice(-6000)}\n--- sender\n${sender.output().slice(-4000)}` +
      `\n--- receiver\n${receiver.output().slice(-4000)}\n--- observer\n${observer.output().slice(-3000)}`;

    // Direct first: CONNECTED without the relay, and a bounded stream arrives bit-exact.
    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: () => `CONNECTED directly${diag()}`,
    });
    const direct = await rest('GET', '/api/session/rm', admin);
    assert.equal((direct.json.streams.default as { path: string }).path, 'direct');
    rig.feed(ref, 0);
    await waitFor(() => size(rx) >= refSize, {
      timeoutMs: 60_000,
      what: () => `the receiver to write ${refSize} bytes directly (has ${size(rx)})${diag()}`,
    });
    assert.equal(sha256(rx), sha256(ref), 'received bytes, direct');

    // The path stops carrying: A's datagrams to B's SRT port are dropped from now on (counted).
    const nft = (...args: string[]) => sh('ip', ['netns', 'exec', rig.ns.a, 'nft', ...args]);
    nft('add', 'table', 'inet', 'punchtest');
    nft('add', 'chain', 'inet', 'punchtest', 'out', '{ type filter hook output priority 0 ; }');
    nft(
      ...['add', 'rule', 'inet', 'punchtest', 'out', 'ip', 'daddr', IP_B],
      ...['udp', 'dport', String(SRT_PORT), 'counter', 'drop'],
    );
    const cutAt = observer.output().length;
    const since = () => observer.output().slice(cutAt);
    await waitFor(() => /"state":"RELAYING"/.test(since()), {
      timeoutMs: 90_000,
      what: () => `RELAYING after the cut${diag()}`,
    });
    await waitFor(() => /"state":"RELAYING"[\s\S]*"state":"CONNECTED"/.test(since()), {
      timeoutMs: 60_000,
      what: () => `CONNECTED over the relay${diag()}`,
    });
    const relayed = await rest('GET', '/api/session/rm', admin);
    const stream = relayed.json.streams.default as {
      path: string;
      relay: { state: string; address: string };
    };
    assert.equal(stream.path, 'relayed');
    assert.equal(stream.relay.state, 'allocated');
    assert.equal(stream.relay.address, IP_B);
    assert.match(
      broker.output(),
      /no SRT connection within the detection window after the direct link went down/,
      diag(),
    );
    // The relay's cap came from the sender's declaration: 2 Mbit/s x 1.5 / 8 = 375,000 bytes/s.
    const moved =
      broker
        .output()
        .split('\n')
        .find((l) => l.includes('stream moved to the relay')) ?? '';
    assert.match(moved, /"cap":"declared"/, diag());
    assert.match(moved, /"bytesPerSecond":375000\b/, diag());
    for (const g of [sender, receiver]) {
      assert.equal(count(g.output(), /"msg":"connected to broker"/g), 1, 'no restart of the agent process');
      assert.equal(count(g.output(), /"path":"relayed"[^\n]*the broker moved this stream to its relay/g), 1);
    }
    const dropped = Number(/packets (\d+)/.exec(nft('list', 'table', 'inet', 'punchtest'))?.[1] ?? -1);
    assert.ok(dropped > 0, `direct datagrams dropped after the cut: ${dropped}`);

    // Media sent now arrives bit-exact over the relay: the agent's recording continues (its sink is the
    // agent's, kept across srt-live-transmit restarts), so the file is the reference twice, whole.
    rig.feed(ref, 0);
    await waitFor(() => size(rx) >= 2 * refSize, {
      timeoutMs: 60_000,
      what: () => `the receiver to write ${2 * refSize} bytes in all (has ${size(rx)})${diag()}`,
    });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(wholePasses(readBytes(rx), readBytes(ref)), 2, 'direct, then over the relay, bit-exact');
    const metrics = sh('ip', ['netns', 'exec', rig.ns.b, 'curl', '-s', `${BROKER}/metrics`]);
    assert.match(metrics, /punch_relay_fallbacks_total\{outcome="allocated",reason=""\} 1/);

    assert.deepEqual(await deleteSession(rig, 'rm', admin, [sender, receiver]), [0, 0], diag());
  } finally {
    rig.cleanup();
  }
});
