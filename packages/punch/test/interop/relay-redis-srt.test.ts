import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import { count, deleteSession, sleep } from '../agent-netns.ts';
import { SERVER, createRedisNetns } from '../redis-netns.ts';
import { looksLikeTs, readSrtCapture } from '../srt-capture.ts';

/**
 * Multi-instance on Redis with real SRT (docs/relay.md "Relays on Redis"): a `redis-server` and two
 * `punch serve` instances in the server namespace (test/redis-netns.ts), `punch agent`s running
 * srt-live-transmit in two namespaces of their own; the direct path between them is dropped, so the owner
 * falls back to a relay. Peer A (the sender) signals through instance 1, peer B (the receiver) through
 * instance 2.
 *
 * Which instance allocates, and which dies: instance 1 is the owner (started first) and the only relay
 * (its in-process relay is on, instance 2's is off), so instance 1 allocates the relay, on itself. Instance 2
 * only carries peer B's signalling, and it is the one SIGKILLed while media crosses the relay: the case this
 * proves is that losing the instance a peer signals through never touches a relayed link. (The instance that
 * holds the relay dying is a relay's death, re-allocated as docs/relay.md "A relay's death" says, and an
 * owner SIGKILLed under an external relay is test/io/relay-redis.test.ts.)
 *
 * Asserted: RELAYING then CONNECTED over instance 1's relay; an encrypted MPEG-TS file paced by
 * udp-feed.mjs (one datagram per 10 ms) and the kill once its first 100 kB arrived, so that it falls
 * mid-file; bytes received before the kill and after it; the file arrives bit-exact (length and SHA-256); the receiver's srt-live-transmit is
 * never restarted; its agent logs the lost broker, reconnects through the "load balancer" (a DNAT rule in
 * the server namespace sending instance 2's port to instance 1, as a balancer takes a dead backend out) to
 * the survivor, is sent the same relay coordinates and keeps its SRT; the survivor's view says CONNECTED,
 * path relayed, at every look from the kill to the end of the file. A capture on the relay's ports (tshark in
 * the server namespace) holds only SRT data packets with their encryption flags set and no plaintext
 * MPEG-TS: the in-broker relay forwards the encrypted payload as it came.
 */
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const PORT1 = 8787;
const PORT2 = 8788;
interface Health {
  store?: { role?: string; instance?: string; owner?: string };
}

test('two instances on Redis, real SRT over the relay: the instance peer B signals through is SIGKILLed mid-link, media arrives bit-exact', async () => {
  for (const tool of ['ip', 'nft', 'srt-live-transmit', 'ffmpeg', 'curl', 'redis-server', 'tshark'])
    requireTool(tool);
  const rig = await createRedisNetns('mk');
  try {
    const [rest1, rest2] = [rig.rest(PORT1), rig.rest(PORT2)];
    const health = async (rest: typeof rest1): Promise<Health | undefined> =>
      (await rest('GET', '/api/health').catch(() => undefined))?.json as Health | undefined;
    const relayEnv = `PUNCH_RELAY_AFTER_MS=3000 PUNCH_RELAY_HOST=${SERVER} PUNCH_RELAY_PUBLIC_ADDRESS=${SERVER}`;
    const one = rig.broker(PORT1, `PUNCH_RELAY=on ${relayEnv}`);
    const owner = await waitFor(
      async () => {
        const h = await health(rest1);
        return h?.store?.role === 'owner' ? h.store.instance : undefined;
      },
      { timeoutMs: 30_000, what: () => `instance 1 the owner\n${one.output().slice(-3000)}` },
    );
    const two = rig.broker(PORT2, 'PUNCH_RELAY=off PUNCH_RELAY_AFTER_MS=3000');
    await waitFor(async () => (await health(rest2))?.store?.owner === owner, {
      timeoutMs: 30_000,
      what: () => `instance 2 to see instance 1 as the owner\n${two.output().slice(-3000)}`,
    });
    await waitFor(() => /^punch_relays_up 1$/m.test(rig.metrics(PORT1)), {
      timeoutMs: 20_000,
      what: 'instance 1 to see its own relay registered',
    });

    const ref = rig.reference(16);
    const size = statSync(ref).size;
    const pcap = join(rig.dir, 'relay.pcap');
    const capture = await rig.capture(pcap);
    const link = await rig.relayedLink(
      'mk',
      { session: PORT1, sender: PORT1, receiver: PORT2 },
      () => `\n--- instance 1\n${one.output().slice(-5000)}\n--- instance 2\n${two.output().slice(-3000)}`,
    );
    const { admin, sender, receiver, rx, diag, view } = link;
    const before = (await view()).streams.default;
    assert.equal(before.path, 'relayed', diag());
    assert.equal(before.relay.state, 'allocated');
    assert.equal(before.relay.address, SERVER);
    assert.ok(rig.directDrops() > 0, `direct datagrams dropped: ${rig.directDrops()}`);
    // The relay is instance 1's own: the allocation is in its metrics.
    assert.match(rig.metrics(PORT1), /^punch_relay_allocations 1$/m);

    // Paced media (one datagram per 10 ms: about 6.6 s for this file): the kill falls mid-file.
    const feed = rig.feed(ref, 1);
    const rxSize = () => (existsSync(rx) ? statSync(rx).size : 0);
    await waitFor(() => rxSize() >= 100_000, {
      timeoutMs: 60_000,
      what: () => `the first 100 kB over the relay (has ${rxSize()})${diag()}`,
    });
    two.signal('SIGKILL');
    const atKill = rxSize();
    await two.exited;
    rig.redirect(PORT2, PORT1);
    assert.ok(atKill > 0 && atKill < size, `bytes before the kill: ${atKill} of ${size}`);

    // From the kill to the end of the file: the survivor's view at every look, the receiver's file growing.
    const looks: string[] = [];
    await waitFor(
      async () => {
        const s = (await view()).streams.default;
        looks.push(`${s.state}/${s.path}`);
        return rxSize() >= size;
      },
      {
        timeoutMs: 120_000,
        intervalMs: 500,
        what: () => `${size} bytes at the receiver (has ${rxSize()})${diag()}`,
      },
    );
    await feed.exited;
    // Until the file stops growing (the agent writes what its sink socket gets).
    let last = -1;
    await waitFor(
      async () => {
        const now = rxSize();
        const done = now === last;
        last = now;
        if (!done) await sleep(1000);
        return done;
      },
      { timeoutMs: 30_000, what: 'the received file to stop growing' },
    );
    const got = readFileSync(rx);
    const want = readFileSync(ref);
    assert.ok(got.length > atKill, `bytes after the kill: ${got.length - atKill}`);
    assert.equal(got.length, want.length, 'received length');
    assert.equal(sha256(got), sha256(want), 'received bytes');
    assert.ok(looks.length > 0);
    assert.deepEqual(
      [...new Set(looks)],
      ['connected/relayed'],
      `the survivor's view after the kill${diag()}`,
    );
    const after = await view();
    assert.equal(after.state, 'CONNECTED');
    assert.equal(after.streams.default.path, 'relayed');
    assert.deepEqual(after.streams.default.relay.ports, before.relay.ports, 'the same allocation');

    // What the in-broker relay carried, captured on its ports: encrypted SRT only.
    capture.signal('SIGINT');
    await Promise.race([capture.exited, sleep(5000)]);
    const seen = readSrtCapture(pcap, [before.relay.ports.peer_a, before.relay.ports.peer_b]);
    process.stdout.write(`# capture: ${JSON.stringify(seen)}\n`);
    // In from one peer's link and out to the other's: each data packet twice.
    assert.ok(seen.data >= (2 * size) / 1316, `data packets captured: ${seen.data}`);
    assert.equal(seen.encrypted, seen.data, 'every SRT data packet has its KK encryption flags set');
    assert.equal(seen.plaintextTs, 0, 'no plaintext MPEG-TS in any datagram');
    assert.ok(looksLikeTs(want.subarray(0, 1316)), 'the same check finds plaintext in the file');

    // The receiver lost its broker, came back through the balancer to instance 1 and kept its SRT.
    await waitFor(() => count(receiver.output(), /"msg":"connected to broker"/g) >= 2, {
      timeoutMs: 60_000,
      what: () => `the receiver back on the survivor${diag()}`,
    });
    const rout = receiver.output();
    assert.match(rout, /broker connection lost; SRT keeps running; reconnecting/, diag());
    assert.match(rout, /"unchanged":true[^\n]*"msg":"peer received"/, diag());
    assert.equal(count(rout, /"msg":"srt started"/g), 2, `one SRT start direct, one over the relay${diag()}`);
    assert.equal(count(sender.output(), /"msg":"connected to broker"/g), 1, diag());

    assert.deepEqual(await deleteSession({ rest: rest1 }, 'mk', admin, [sender, receiver]), [0, 0], diag());
    assert.match(rig.metrics(PORT1), /^punch_relay_allocations 0$/m);
  } finally {
    rig.cleanup();
  }
});
