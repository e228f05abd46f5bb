import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { repoRoot, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BROKER, createRig, deleteSession, listening, wholePasses } from '../agent-netns.ts';
import { joinStepsOf } from '../join-page.ts';
import { inNamespace, sh, type Group } from '../netns.ts';

/**
 * The agent anyone can run (docs/agent.md "Without a checkout"), end to end between two network namespaces
 * (test/netns.ts, the rig in test/agent-netns.ts): the broker in namespace B with PUNCH_BASE_URL set to its
 * address there. Each side takes the commands from its own peer join page's HTML (the steps the page shows,
 * src/io/join-steps.ts, with the page's address as the join link, as the page script writes it in:
 * test/interop/join-page.browser.test.ts) and runs them unchanged in an empty directory outside the repository, with Node's
 * module search cut off from the checkout (no NODE_OPTIONS, a cwd under the system's temp dir): the Linux
 * download command (curl from the broker), then `node punch-agent.mjs --link '…' --role …` as shown, sender
 * in A, receiver in B. The receiver plays to udp://127.0.0.1:5001 as the page says, where a UDP sink writes
 * what arrives to a file; an MPEG-TS file made by ffmpeg is fed to the sender's udp://127.0.0.1:5000 as
 * 1316-byte datagrams. Asserted: both directories hold only the downloaded file, the session reaches
 * CONNECTED, the bytes arrive exactly, and DELETE ends both agents with exit code 0.
 */
test('the join page agent: downloaded from the broker with the page command into an empty directory, run with node, carries media bit-exact', async () => {
  for (const tool of ['ip', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
  const rig = createRig('d');
  const { rest } = rig;
  const groups: Group[] = [];
  const dirs = [tempDir('punch-agent-send-'), tempDir('punch-agent-recv-')];
  const [sendDir, recvDir] = dirs.map((d) => d.path) as [string, string];
  // A shell in the namespace with the test's node on PATH and nothing pointing into the checkout.
  const run = (ns: string, cwd: string, command: string): Group => {
    const g = inNamespace(
      ns,
      `unset NODE_OPTIONS NODE_PATH; export PATH='${dirname(process.execPath)}':"$PATH"; exec ${command}`,
      cwd,
    );
    groups.push(g);
    return g;
  };
  try {
    for (const d of [sendDir, recvDir]) {
      assert.ok(relative(repoRoot, d).startsWith('..'), `${d} is outside the repository`);
      assert.deepEqual(readdirSync(d), [], `${d} starts empty`);
    }
    const ref = rig.reference(4);
    const broker = rig.startBroker(`PUNCH_BASE_URL=${BROKER}`);
    await listening(broker);
    const created = await rest('POST', '/api/session', undefined, { name: 'dl', latency: 200 });
    assert.equal(created.status, 201, created.text);
    const admin = created.json.token as string;
    const pageFor = async (label: string) => {
      const token = (await rest('POST', '/api/session/dl/token', admin, { label })).json.token as string;
      // The page as a browser in namespace B gets it (HTML, not JSON: curl, not the rig's REST helper).
      const link = `${BROKER}/s/dl?t=${token}`;
      return joinStepsOf(sh('ip', ['netns', 'exec', rig.ns.b, 'curl', '-fsS', link]), link);
    };
    const [sendSteps, recvSteps] = [await pageFor('sender'), await pageFor('receiver')];

    // Step "Download the agent from this broker" (Linux), as the page shows it, in each empty directory.
    for (const [ns, dir, steps] of [
      [rig.ns.a, sendDir, sendSteps],
      [rig.ns.b, recvDir, recvSteps],
    ] as const) {
      const download = steps.download['linux macos'] ?? '';
      assert.match(download, /^curl .*\/agent\/punch-agent-[\d.]+\.mjs'$/);
      const g = run(ns, dir, download);
      assert.equal(await g.exited, 0, `download in ${ns}: ${g.output()}`);
      assert.deepEqual(readdirSync(dir), ['punch-agent.mjs'], 'only the downloaded file');
    }

    const rx = join(rig.dir, 'rx.ts');
    const sink = run(
      rig.ns.b,
      recvDir,
      `node ${join(repoRoot, 'packages/punch/test/fixtures/udp-sink.mjs')} 5001 ${rx}`,
    );
    await waitFor(() => /udp-sink listening/.test(sink.output()), {
      timeoutMs: 20_000,
      what: 'the UDP sink',
    });
    const receiver = run(rig.ns.b, recvDir, recvSteps.receive);
    const sender = run(rig.ns.a, sendDir, sendSteps.send);
    const diag = () => `\n--- sender\n${sender.output()}\n--- receiver\n${receiver.output()}`;
    await waitFor(async () => (await rest('GET', '/api/session/dl', admin)).json?.state === 'CONNECTED', {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: () => `CONNECTED${diag()}`,
    }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}${diag()}`);
    });

    // The page's feed command sends to udp://127.0.0.1:5000; the fixture plays the file there byte-exact.
    assert.match(sendSteps.feed, /udp:\/\/127\.0\.0\.1:5000/);
    const feed = run(
      rig.ns.a,
      sendDir,
      `node ${join(repoRoot, 'packages/punch/test/fixtures/udp-feed.mjs')} ${ref} 5000 4 0`,
    );
    const size = statSync(ref).size;
    await waitFor(() => existsSync(rx) && statSync(rx).size >= size, {
      timeoutMs: 60_000,
      what: () => `the receiver to deliver ${size} bytes${diag()}`,
    }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message} (has ${existsSync(rx) ? statSync(rx).size : 0})${diag()}`);
    });
    await feed.exited;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(
      wholePasses(readFileSync(rx), readFileSync(ref)),
      1,
      `the received bytes are the sent bytes${diag()}`,
    );
    assert.deepEqual(readdirSync(sendDir), ['punch-agent.mjs'], 'the agent needed nothing beside itself');

    // DELETE ends both agents with 0 (docs/agent.md "Exit codes").
    assert.deepEqual(await deleteSession(rig, 'dl', admin, [sender, receiver]), [0, 0], diag());
  } finally {
    for (const g of groups) g.signal('SIGKILL');
    rig.cleanup();
    for (const d of dirs) d.remove();
  }
});
