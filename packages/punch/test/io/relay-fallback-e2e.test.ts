import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import {
  BROKER,
  SRT_PORT,
  UDP_IN,
  count,
  createRig,
  deleteSession,
  listening,
  senderReceiverSession,
} from '../agent-netns.ts';
import { IP_A, IP_B, sh } from '../netns.ts';

/**
 * The fallback to the relay end to end (docs/relay.md "Detection"): the broker (with its in-process relay)
 * and the receiving agent in namespace B, the sending agent in namespace A (the rig of test/agent-netns.ts).
 * The direct path is cut by a firewall rule in A (nftables: A's datagrams to B's SRT port are dropped, as a
 * NAT that never opens a hole would), so rendezvous cannot connect. Asserted: the broker moves the session
 * to RELAYING after its detection window, the agents follow the relay's coordinates without a restart of
 * their processes, SRT connects over the relay (CONNECTED, path relayed in the view), the MPEG-TS arrives
 * bit-exact (length and SHA-256), the firewall rule did drop the direct attempts, and DELETE releases the
 * allocation and ends both agents with 0.
 */
const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

test('rendezvous blocked: the broker falls back to its relay, the agents follow, media arrives bit-exact over it', async () => {
  for (const tool of ['ip', 'nft', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
  const rig = createRig('rf');
  const { rest } = rig;
  try {
    // The direct path: A's datagrams to B's SRT port are dropped (counted, to prove rendezvous was tried).
    const nft = (...args: string[]) => sh('ip', ['netns', 'exec', rig.ns.a, 'nft', ...args]);
    nft('add', 'table', 'inet', 'punchtest');
    nft('add', 'chain', 'inet', 'punchtest', 'out', '{ type filter hook output priority 0 ; }');
    nft(
      'add',
      'rule',
      'inet',
      'punchtest',
      'out',
      'ip',
      'daddr',
      IP_B,
      'udp',
      'dport',
      String(SRT_PORT),
      'counter',
      'drop',
    );
    const ref = rig.reference(4);
    const broker = rig.startBroker(`PUNCH_RELAY_PUBLIC_ADDRESS=${IP_B}`);
    await listening(broker);
    const { admin, tSend, tRecv } = await senderReceiverSession(rest, 'rf');
    const observer = rig.observe('rf', admin);
    const rx = join(rig.dir, 'rx.ts');
    const receiver = rig.agent(rig.ns.b, 'rf', tRecv, 'receiver', `--output file:${rx}`);
    const sender = rig.agent(rig.ns.a, 'rf', tSend, 'sender', `--input udp://127.0.0.1:${UDP_IN}`);
    const diag = () =>
      `\n--- broker\n${broker.output().slice(-6000)}\n--- sender\n${sender.output()}\n--- receiver\n${receiver.output()}` +
      `\n--- observer\n${observer.output().slice(-4000)}`;

    await waitFor(() => /"state":"RELAYING"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: () => `RELAYING at the observer${diag()}`,
    });
    assert.match(broker.output(), /no SRT connection within the detection window/, diag());
    assert.equal(/"state":"CONNECTED"/.test(observer.output()), false, 'never CONNECTED directly');
    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: () => `CONNECTED over the relay${diag()}`,
    });
    const view = await rest('GET', '/api/session/rf', admin);
    assert.equal(view.json.state, 'CONNECTED');
    const stream = view.json.streams.default as {
      path: string;
      peer_a: { ip: string };
      relay: { state: string; address: string; ports: { peer_a: number; peer_b: number } };
    };
    assert.equal(stream.path, 'relayed');
    assert.equal(stream.relay.state, 'allocated');
    assert.equal(stream.relay.address, IP_B);
    // Each agent was told the relay as its partner, at its own relay port, and restarted SRT towards it
    // without a restart of its process (one broker connection each).
    const portFor = (ip: string): number =>
      stream.peer_a.ip === ip ? stream.relay.ports.peer_a : stream.relay.ports.peer_b;
    for (const [g, port] of [
      [sender, portFor(IP_A)],
      [receiver, portFor(IP_B)],
    ] as const) {
      const out = g.output();
      assert.equal(count(out, /"msg":"connected to broker"/g), 1, diag());
      assert.equal(count(out, /"msg":"srt started"/g), 2, diag());
      // Each agent knows its link went to the relay (one line, when the broker said so).
      assert.equal(count(out, /"path":"relayed"[^\n]*the broker moved this stream to its relay/g), 1, diag());
      assert.ok(out.includes(`"ip":"${IP_B}","port":${port},"localPort":${SRT_PORT}`), diag());
    }
    // The direct attempts were made and dropped by the rule.
    const dropped = Number(/packets (\d+)/.exec(nft('list', 'table', 'inet', 'punchtest'))?.[1] ?? -1);
    assert.ok(dropped > 0, `direct datagrams dropped: ${dropped}`);

    // A bounded stream over the relay, byte-exact.
    rig.feed(ref, 0);
    const size = statSync(ref).size;
    await waitFor(() => existsSync(rx) && statSync(rx).size >= size, {
      timeoutMs: 60_000,
      what: () =>
        `the receiver to write ${size} bytes (has ${existsSync(rx) ? statSync(rx).size : 0})${diag()}`,
    });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(statSync(rx).size, size, 'received length');
    assert.equal(sha256(rx), sha256(ref), 'received bytes');

    // The relay's counters are on /metrics.
    const metrics = () => sh('ip', ['netns', 'exec', rig.ns.b, 'curl', '-s', `${BROKER}/metrics`]);
    assert.match(metrics(), /punch_relay_fallbacks_total\{outcome="allocated",reason=""\} 1/);
    assert.match(metrics(), /punch_relay_allocations 1/);

    // DELETE: the allocation is released, both agents stop with 0.
    assert.deepEqual(await deleteSession(rig, 'rf', admin, [sender, receiver]), [0, 0], diag());
    const after = metrics();
    assert.match(after, /punch_relay_allocations 0/);
    assert.match(after, /punch_relay_allocations_ended_total\{reason="released"\} 1/);
  } finally {
    rig.cleanup();
  }
});
