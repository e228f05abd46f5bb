import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createLogger } from '@broadcast-ops/core';
import { repoRoot, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { TallyHook } from '../../src/io/agent/tally-hook.ts';
import { startTestServer } from '../helpers.ts';
import { assertQuiet, connect, sleep } from '../ws-helpers.ts';

/**
 * Tally to the remote contributor (README "Tally", docs/agent.md "Tally"): an admin's `tally` (and the
 * stale form a playout monitor sends when it lost the mixer) reaches a real `punch agent` process, which
 * runs its `--on-tally` command with the state in the environment; a page's `watch` connection follows
 * the same stream without a slot.
 */

/** An --on-tally command: appends its environment's tally fields as one JSON line to `out`. */
function hookScript(dir: string, out: string): string {
  const script = join(dir, 'hook.mjs');
  writeFileSync(
    script,
    `import { appendFileSync } from 'node:fs';\n` +
      `const e = process.env;\n` +
      `appendFileSync(${JSON.stringify(out)}, JSON.stringify({ tally: e.PUNCH_TALLY, stream: e.PUNCH_STREAM, ` +
      `session: e.PUNCH_SESSION, reason: e.PUNCH_TALLY_REASON }) + '\\n');\n`,
  );
  return script;
}

const runs = (out: string): Array<Record<string, string>> =>
  existsSync(out)
    ? readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, string>)
    : [];

test('a real punch agent runs --on-tally for program, preview, off, unknown (stale) and a lost broker', async () => {
  const t = await startTestServer();
  const dir = tempDir('punch-tally-agent-');
  const out = join(dir.path, 'tally.jsonl');
  const script = hookScript(dir.path, out);
  let agent: ReturnType<typeof startProcess> | null = null;
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'tl-1', streams: ['cam-1', 'cam-2'] } }))
      .json;
    const admin = s.token as string;
    const peer = String(
      (await t.call('POST', '/api/session/tl-1/token', { token: admin, body: { stream: 'cam-1' } })).json
        .token,
    );
    agent = startProcess(
      process.execPath,
      [
        join(repoRoot, 'packages/punch/bin/punch.mjs'),
        'agent',
        '--broker',
        t.url,
        '--session',
        'tl-1',
        '--role',
        'sender',
        '--port',
        '9000',
        '--input',
        'udp://127.0.0.1:5000',
        // SRT never starts here (no partner); the agent only needs the binary to exist.
        '--srt',
        process.execPath,
        '--on-tally',
        `${process.execPath} ${script}`,
      ],
      { env: { PUNCH_TOKEN: peer, LOG_LEVEL: 'info' } },
    );
    await agent.waitForOutput(/connected to broker/, 20_000);
    const obs = await connect(t.url, 'tl-1', { token: admin });
    await obs.next('session');
    const expectRun = async (n: number, tally: string): Promise<Record<string, string>> => {
      await waitFor(() => runs(out).length >= n, { timeoutMs: 10_000, what: `run ${n} (${tally})` });
      const r = runs(out)[n - 1] as Record<string, string>;
      assert.equal(r['tally'], tally, JSON.stringify(runs(out)));
      assert.equal(r['stream'], 'cam-1');
      assert.equal(r['session'], 'tl-1');
      return r;
    };

    obs.send({ type: 'tally', stream: 'cam-1', state: 'program' });
    await expectRun(1, 'program');
    obs.send({ type: 'tally', stream: 'cam-1', state: 'preview' });
    await expectRun(2, 'preview');
    // Another stream's tally is not ours: no run.
    obs.send({ type: 'tally', stream: 'cam-2', state: 'program' });
    obs.send({ type: 'tally', stream: 'cam-1', state: 'off' });
    await expectRun(3, 'off');
    // What a playout monitor sends when the mixer is lost (packages/playout-monitor docs/TALLY.md).
    obs.send({ type: 'tally', stream: 'cam-1', state: 'off', stale: true });
    const stale = await expectRun(4, 'unknown');
    assert.match(stale['reason'] ?? '', /unknown \(stale at the sender/);
    obs.send({ type: 'tally', stream: 'cam-1', state: 'program' });
    await expectRun(5, 'program');
    await agent.waitForOutput(/"tally":"program"[^\n]*"msg":"tally program"/);
    // The broker goes away: the agent no longer knows the tally.
    obs.close();
    await t.close();
    const lost = await expectRun(6, 'unknown');
    assert.equal(lost['reason'], 'broker connection lost');
    assert.equal(runs(out).length, 6, 'one run per change, nothing for cam-2');
    assert.equal(agent.child.exitCode, null, 'the agent keeps running');
  } finally {
    await agent?.stop();
    await t.close().catch(() => undefined);
    dir.remove();
  }
});

test('a peer page watches its stream: tally with stale and age, no slot taken, not closed by the register deadline', async () => {
  const t = await startTestServer({ signalling: { registerDeadlineMs: 300 } });
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'tl-2', streams: ['cam-1', 'cam-2'] } }))
      .json;
    const admin = s.token as string;
    const peerToken = String(
      (await t.call('POST', '/api/session/tl-2/token', { token: admin, body: { stream: 'cam-1' } })).json
        .token,
    );
    const obs = await connect(t.url, 'tl-2', { token: admin });
    obs.send({ type: 'tally', stream: 'cam-1', state: 'off', stale: true });
    assert.equal((await obs.next('tally'))['stale'], true);
    await sleep(50);
    const page = await connect(t.url, 'tl-2', { token: peerToken });
    await page.next('session');
    page.send({ type: 'watch' });
    const first = await page.next('tally');
    assert.equal(first['state'], 'off');
    assert.equal(first['stale'], true);
    assert.ok(typeof first['age'] === 'number' && first['age'] >= 40, `age ${first['age']}`);
    obs.send({ type: 'tally', stream: 'cam-1', state: 'program' });
    assert.deepEqual(await page.next('tally'), { type: 'tally', stream: 'cam-1', state: 'program' });
    obs.send({ type: 'tally', stream: 'cam-2', state: 'preview' });
    await sleep(500); // past the register deadline
    await assertQuiet(page);
    assert.equal(page.ws.readyState, page.ws.OPEN, 'a watcher is not closed for not registering');
    // The page took no slot: the stream still waits for both peers.
    const view = (await t.call('GET', '/api/session/tl-2', { token: admin })).json;
    assert.equal((view.streams as Record<string, { peer_a: unknown }>)['cam-1']?.peer_a, null);
    // A peer token may not watch another stream; a bad stale is refused.
    page.send({ type: 'watch', stream: 'cam-2' });
    assert.equal((await page.next('error'))['code'], 'AUTH_FAILED');
    obs.send({ type: 'tally', stream: 'cam-1', state: 'off', stale: 'yes' });
    assert.match(String((await obs.next('error'))['message']), /stale: must be a boolean/);
    page.close();
    obs.close();
  } finally {
    await t.close();
  }
});

const HOOK_TIMEOUT_MS = 6000;

test('--on-tally runs one at a time, the latest state wins, a failing or hung command is logged and not fatal', async () => {
  const lines: string[] = [];
  const logger = createLogger({
    service: 'punch-agent',
    level: 'info',
    destination: { write: (s: string) => lines.push(s) },
  });
  const dir = tempDir('punch-tally-hook-');
  const out = join(dir.path, 'runs.txt');
  // Sleeps 300 ms, then appends the state; exits 3 for preview (a failing command).
  const script = join(dir.path, 'slow.mjs');
  writeFileSync(
    script,
    `import { appendFileSync } from 'node:fs';\n` +
      `const s = process.env.PUNCH_TALLY;\n` +
      `if (s === 'unknown') setInterval(() => {}, 1000);\n` +
      `else setTimeout(() => { appendFileSync(${JSON.stringify(out)}, s + '\\n'); ` +
      `if (s === 'preview') { process.stderr.write('relay board not found'); process.exit(3); } }, 300);\n`,
  );
  try {
    const hook = new TallyHook({
      argv: [process.execPath, script],
      // Wide enough that a node process started on a loaded machine finishes its 300 ms (a run killed at the
      // timeout writes nothing, which reads as a lost state); the hung run below costs this much once.
      timeoutMs: HOOK_TIMEOUT_MS,
      session: 's',
      stream: 'cam-1',
      logger,
    });
    hook.change('program', 'r');
    hook.change('off', 'r');
    hook.change('preview', 'r'); // coalesced with off: only the latest runs after program
    await hook.idle();
    assert.deepEqual(readFileSync(out, 'utf8').trim().split('\n'), ['program', 'preview']);
    const log = lines.join('');
    assert.match(log, /"code":3[^\n]*"stderr":"relay board not found"[^\n]*on-tally command failed/);
    hook.change('unknown', 'r'); // hangs: killed at the timeout
    hook.change('program', 'r');
    await hook.idle();
    assert.match(
      lines.join(''),
      new RegExp(`"tally":"unknown"[^\\n]*"timeoutMs":${HOOK_TIMEOUT_MS}[^\\n]*on-tally command failed`),
    );
    assert.equal(readFileSync(out, 'utf8').trim().split('\n').at(-1), 'program');
    // off runs; program then off again during that run: back to the state it runs with, so no second run.
    const count = readFileSync(out, 'utf8').trim().split('\n').length;
    hook.change('off', 'r');
    hook.change('program', 'r');
    hook.change('off', 'r');
    await hook.idle();
    assert.deepEqual(readFileSync(out, 'utf8').trim().split('\n').slice(count), ['off']);
    const missing = new TallyHook({
      argv: [join(dir.path, 'no-such-program')],
      timeoutMs: 1000,
      session: 's',
      stream: undefined,
      logger,
    });
    missing.change('program', 'r');
    await missing.idle();
    assert.match(lines.join(''), /ENOENT[^\n]*on-tally command failed/);
  } finally {
    dir.remove();
  }
});
