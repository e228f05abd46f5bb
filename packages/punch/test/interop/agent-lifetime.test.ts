import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import { createRig, listening, readBytes, sleep, wholePasses } from '../agent-netns.ts';

/**
 * README "Lifetime", end to end with real agents and real SRT between two namespaces (test/agent-netns.ts):
 * a session with a 25 s TTL carries 60 s of media. The TTL ends admission (no new invite), never the
 * flowing link: the receiver's file keeps growing past the TTL and is the reference, byte for byte, pass
 * after pass; the session closes within seconds of both agents leaving. A PATCH extends an idle session:
 * the new expiry is shown, and a token issued before the extension still works after the old expiry.
 */
test('punch agent: the TTL never cuts flowing media; the session closes once both agents left; PATCH extends', async () => {
  for (const tool of ['ip', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
  const rig = createRig('l');
  try {
    const ref = rig.reference(4);
    const refBytes = readBytes(ref);
    await listening(rig.startBroker());
    const created = await rig.rest('POST', '/api/session', undefined, {
      name: 'life',
      latency: 200,
      ttl: 25,
    });
    assert.equal(created.status, 201, created.text);
    const admin = created.json.token as string;
    const expiresAt = created.json.expiresAt as number;
    const tokenFor = async (label: string) =>
      (await rig.rest('POST', '/api/session/life/token', admin, { label })).json.token as string;
    const [tSend, tRecv] = [await tokenFor('sender'), await tokenFor('receiver')];
    const observer = rig.observe('life', admin);
    const rx = join(rig.dir, 'rx.ts');
    const receiver = rig.agent(rig.ns.b, 'life', tRecv, 'receiver', `--output file:${rx}`);
    const sender = rig.agent(rig.ns.a, 'life', tSend, 'sender', `--input udp://127.0.0.1:9300`);
    const diag = () =>
      `\n--- sender\n${sender.output()}\n--- receiver\n${receiver.output()}\n--- observer\n${observer.output().slice(-4000)}`;
    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: () => `CONNECTED at the observer${diag()}`,
    });
    const feed = rig.feed(ref, 60);
    const feedStart = Date.now();

    // Past the TTL (plus a margin): the link still delivers, the session is open and flagged `overtime`.
    while (Date.now() < expiresAt + 3000) await sleep(250);
    const atTtl = existsSync(rx) ? statSync(rx).size : 0;
    await sleep(5000);
    const grown = statSync(rx).size - atTtl;
    assert.ok(
      grown > 500_000,
      `the receiver's file grew by ${grown} bytes in the 5 s after the TTL${diag()}`,
    );
    const view = await rig.rest('GET', '/api/session/life', admin);
    assert.equal(view.status, 200, view.text);
    assert.equal(view.json.state, 'CONNECTED');
    assert.equal(view.json.overtime, true);
    // The TTL governs admission: no new invite past it.
    const invite = await rig.rest('POST', '/api/session/life/token', admin, { label: 'late' });
    assert.equal(invite.status, 410, invite.text);
    assert.doesNotMatch(sender.output() + receiver.output(), /session closed/);

    // The feed ends (60 s); every byte arrived, in whole passes of the reference.
    await feed.exited;
    const feedSeconds = (Date.now() - feedStart) / 1000;
    await waitFor(() => wholePasses(readBytes(rx), refBytes) > 0, {
      timeoutMs: 15_000,
      what: () =>
        `the receiver's file to be whole passes of the reference (${statSync(rx).size} bytes, ref ${refBytes.length})${diag()}`,
    });
    const passes = wholePasses(readBytes(rx), refBytes);
    const lastGrowthAfterTtl = statSync(rx).mtimeMs - expiresAt;
    assert.ok(
      lastGrowthAfterTtl > 20_000,
      `the file was last written ${lastGrowthAfterTtl} ms after the TTL`,
    );

    // Both agents leave: the session closes within seconds (README "Lifetime": 5 s settle).
    sender.signal('SIGTERM');
    receiver.signal('SIGTERM');
    await Promise.all([sender.exited, receiver.exited]);
    const left = Date.now();
    await waitFor(async () => (await rig.rest('GET', '/api/session/life', admin)).status === 410, {
      timeoutMs: 20_000,
      intervalMs: 250,
      what: 'the session to close after both agents left',
    });
    const closeAfterMs = Date.now() - left;
    assert.ok(closeAfterMs < 12_000, `closed ${closeAfterMs} ms after both left`);
    await waitFor(() => /"type":"session_closed","reason":"ttl_expired"/.test(observer.output()), {
      timeoutMs: 5000,
      what: 'session_closed ttl_expired at the observer',
    });

    // PATCH extends an idle session; a token issued before the extension works after the old expiry.
    const idle = await rig.rest('POST', '/api/session', undefined, { name: 'idle', ttl: 8 });
    const idleAdmin = idle.json.token as string;
    const early = (await rig.rest('POST', '/api/session/idle/token', idleAdmin, {})).json.token as string;
    const byPeer = await rig.rest('PATCH', '/api/session/idle', early, { ttl: 600 });
    assert.equal(byPeer.status, 403, 'only an admin token extends');
    const patched = await rig.rest('PATCH', '/api/session/idle', idleAdmin, { ttl: 600 });
    assert.equal(patched.status, 200, patched.text);
    const idleExpiry = idle.json.expiresAt as number;
    assert.ok((patched.json.expiresAt as number) >= idleExpiry + 590_000, JSON.stringify(patched.json));
    while (Date.now() < idleExpiry + 1500) await sleep(250);
    const later = await rig.rest('GET', '/api/session/idle', early);
    assert.equal(later.status, 200, later.text);
    assert.equal(later.json.expiresAt, patched.json.expiresAt);
    assert.equal(later.json.overtime, undefined);
    process.stdout.write(
      `# lifetime: ${passes} passes (${readBytes(rx).length} bytes) bit-exact over ${feedSeconds.toFixed(1)} s of feed, ` +
        `file last written ${(lastGrowthAfterTtl / 1000).toFixed(1)} s after the TTL, closed ${closeAfterMs} ms after both left\n`,
    );
  } finally {
    rig.cleanup();
  }
});
