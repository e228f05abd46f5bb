import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import { count, createRig, listening, sleep } from '../agent-netns.ts';
import { sh } from '../netns.ts';

/**
 * README "State from media", end to end: the sender agent's TCP to the broker is dropped for 40 s by an
 * nftables rule inside its namespace (the broker port only; SRT's UDP untouched), so its signalling dies
 * half-open while the link keeps carrying media. Asserted: the stream never leaves `connected` (every
 * `session` message at the observer and a GET every second), the view names the lost signalling of the
 * sender once the broker noticed it, the receiver's file keeps growing, and after the cut the sender's
 * agent is back without its srt-live-transmit ever being restarted.
 */
interface SessionMsg {
  type: string;
  streams?: Record<string, { state: string }>;
}

test('punch agent: the sender signalling cut for 40 s with SRT intact; the stream never leaves connected', async () => {
  for (const tool of ['ip', 'srt-live-transmit', 'ffmpeg', 'curl', 'nft']) requireTool(tool);
  const rig = createRig('h');
  const table = `punchcut${process.pid}`;
  try {
    const ref = rig.reference(4);
    await listening(rig.startBroker());
    const created = await rig.rest('POST', '/api/session', undefined, { name: 'ho', latency: 200 });
    assert.equal(created.status, 201, created.text);
    const admin = created.json.token as string;
    const tokenFor = async (label: string) =>
      String((await rig.rest('POST', '/api/session/ho/token', admin, { label })).json.token);
    const [tSend, tRecv] = [await tokenFor('sender'), await tokenFor('receiver')];
    const observer = rig.observe('ho', admin);
    const rx = join(rig.dir, 'rx.ts');
    const receiver = rig.agent(rig.ns.b, 'ho', tRecv, 'receiver', `--output file:${rx}`);
    const sender = rig.agent(rig.ns.a, 'ho', tSend, 'sender', '--input udp://127.0.0.1:9300');
    const diag = () => `\n--- sender\n${sender.output()}\n--- receiver\n${receiver.output().slice(-3000)}`;
    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: 'CONNECTED at the observer',
    });
    rig.feed(ref, 90);
    await waitFor(() => existsSync(rx) && statSync(rx).size > 200_000, { timeoutMs: 20_000, what: 'media' });
    const sessionsSeen = observer.output().split('\n').length;

    // Cut: inside namespace A, drop TCP to and from the broker's port (SRT is UDP on another port).
    const nft = (...args: string[]) => sh('ip', ['netns', 'exec', rig.ns.a, 'nft', ...args]);
    nft('add', 'table', 'inet', table);
    nft('add', 'chain', 'inet', table, 'out', '{ type filter hook output priority 0 ; }');
    nft('add', 'chain', 'inet', table, 'in', '{ type filter hook input priority 0 ; }');
    nft('add', 'rule', 'inet', table, 'out', 'tcp', 'dport', '8787', 'drop');
    nft('add', 'rule', 'inet', table, 'in', 'tcp', 'sport', '8787', 'drop');
    const cutAt = Date.now();
    const atCut = statSync(rx).size;
    const states: string[] = [];
    let lostNamed = -1;
    while (Date.now() - cutAt < 40_000) {
      const view = await rig.rest('GET', '/api/session/ho', admin);
      const stream = view.json.streams.default as {
        state: string;
        peer_a: { role: string; present: boolean; signalling?: string };
        peer_b: { role: string; present: boolean; signalling?: string };
      };
      states.push(stream.state);
      const senderEnd = stream.peer_a.role === 'sender' ? stream.peer_a : stream.peer_b;
      if (lostNamed < 0 && !senderEnd.present) {
        assert.equal(senderEnd.signalling, 'lost, media reported by the other end', JSON.stringify(stream));
        lostNamed = Date.now() - cutAt;
      }
      await sleep(1000);
    }
    const duringCut = statSync(rx).size - atCut;
    nft('delete', 'table', 'inet', table);
    const restored = Date.now();

    assert.ok(
      states.every((s) => s === 'connected'),
      `GET every second during the cut: ${states.join(',')}${diag()}`,
    );
    assert.ok(lostNamed >= 0, `the view named the sender's lost signalling during the cut${diag()}`);
    assert.ok(duringCut > 5_000_000, `media during the 40 s cut: ${duringCut} bytes`);
    // The sender comes back on its own and takes its slot back; its SRT was never restarted.
    await waitFor(
      async () => {
        const v = await rig.rest('GET', '/api/session/ho', admin);
        const s = v.json.streams.default as { peer_a: { present: boolean }; peer_b: { present: boolean } };
        return s.peer_a.present && s.peer_b.present;
      },
      { timeoutMs: 40_000, intervalMs: 500, what: () => `the sender back after the cut${diag()}` },
    );
    const backAfter = Date.now() - restored;
    const after = observer
      .output()
      .split('\n')
      .slice(sessionsSeen)
      .filter((l) => l.startsWith('{"type":"session"'))
      .map((l) => JSON.parse(l) as SessionMsg);
    const left = after.filter((m) => m.streams?.['default']?.state !== 'connected');
    assert.deepEqual(left, [], 'no session message showed the stream leave connected');
    assert.equal(
      count(sender.output(), /"msg":"srt started"/g),
      1,
      `the sender's SRT ran throughout${diag()}`,
    );
    assert.equal(
      count(receiver.output(), /"msg":"srt started"/g),
      1,
      `the receiver's SRT ran throughout${diag()}`,
    );
    process.stdout.write(
      `# half-open: ${states.length} GETs all connected, lost signalling named ${lostNamed} ms into the cut, ` +
        `${duringCut} bytes during the 40 s cut, sender back ${backAfter} ms after the cut, ${after.length} session messages, none left connected\n`,
    );
  } finally {
    try {
      sh('ip', ['netns', 'exec', rig.ns.a, 'nft', 'delete', 'table', 'inet', table]);
    } catch {
      /* already removed, or the namespace is gone */
    }
    rig.cleanup();
  }
});
