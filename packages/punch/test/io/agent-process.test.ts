import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createLogger } from '@broadcast-ops/core';
import { loadFactor, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { PunchAgent, type AgentOptions } from '../../src/io/agent/agent.ts';
import { startTestServer } from '../helpers.ts';

/**
 * The agent in this process against a real broker on 127.0.0.1:0, its log captured: what it tells the
 * operator when something is wrong (README "punch agent"). `srtBinary` is this Node binary (it exits at
 * once), so no SRT runs; what is asserted is the agent's signalling and its file output.
 */
function agent(options: Partial<AgentOptions> & Pick<AgentOptions, 'broker' | 'session' | 'token'>) {
  const lines: string[] = [];
  const logger = createLogger({
    service: 'punch-agent',
    level: 'info',
    destination: { write: (s: string) => lines.push(s) },
  });
  const a = new PunchAgent({
    role: 'sender',
    port: 9000,
    media: 'udp://127.0.0.1:5000',
    srtBinary: process.execPath,
    logger,
    ...options,
  });
  return { a, log: () => lines.join('') };
}

test('an unknown --stream ends the agent at once with exit 2 and a clear message', async () => {
  const t = await startTestServer();
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'ag-1', streams: ['cam-1', 'cam-2'] } }))
      .json;
    const { a } = agent({ broker: t.url, session: 'ag-1', token: s.token as string, stream: 'cam-9' });
    const exit = await Promise.race([
      a.start(),
      new Promise((r) => setTimeout(() => r('still running'), 10_000)),
    ]);
    a.stop();
    assert.deepEqual(exit, {
      code: 2,
      reason: 'bad_stream',
      message: '--stream: no stream "cam-9" in this session',
    });
  } finally {
    await t.close();
  }
});

test('an agent that never reached the broker says so (not "connection lost")', async () => {
  const t = await startTestServer();
  const url = t.url;
  await t.close();
  const { a, log } = agent({ broker: url, session: 'x', token: 'p_x.y' });
  void a.start();
  try {
    await waitFor(() => /cannot reach the broker \(never connected yet\); retrying/.test(log()), {
      timeoutMs: 5000,
      what: 'the "cannot reach" line',
    });
    assert.doesNotMatch(log(), /connection lost|SRT keeps running/);
  } finally {
    a.stop();
  }
});

test('a receiver with --output file: truncates an earlier recording; the sender logs its partner leaving', async () => {
  const t = await startTestServer({ signalling: { healthReportMs: 0 } });
  const dir = tempDir('punch-agent-out-');
  try {
    const s = (await t.call('POST', '/api/session', { body: { name: 'ag-3' } })).json;
    const token = async (label: string) =>
      String(
        (await t.call('POST', '/api/session/ag-3/token', { token: s.token as string, body: { label } })).json
          .token,
      );
    const out = join(dir.path, 'rx.ts');
    writeFileSync(out, 'an earlier recording');
    const rx = agent({
      broker: t.url,
      session: 'ag-3',
      token: await token('rx'),
      role: 'receiver',
      media: `file:${out}`,
    });
    const tx = agent({ broker: t.url, session: 'ag-3', token: await token('tx'), label: 'tx' });
    void rx.a.start();
    void tx.a.start();
    await waitFor(() => /"msg":"srt started"/.test(rx.log()), {
      timeoutMs: 10_000,
      what: 'the receiver to start SRT',
    });
    assert.equal(readFileSync(out, 'utf8'), '', 'the earlier recording is truncated, not appended to');
    // The receiver leaves: the sender says so (its SRT, if any, is left alone).
    rx.a.stop();
    await waitFor(() => /partner left/.test(tx.log()), {
      timeoutMs: 10_000,
      what: () => `"partner left" in ${tx.log()}`,
    });
    tx.a.stop();
  } finally {
    dir.remove();
    await t.close();
  }
});

test('punch agent (the CLI) names a TTL close as such, never "closed by the operator"', async () => {
  const t = await startTestServer();
  try {
    // The lifetime must outlast the agent's start, which a loaded machine stretches (the load factor).
    const ttl = Math.round(12 * loadFactor());
    const s = (await t.call('POST', '/api/session', { body: { name: 'ag-4', ttl } })).json;
    const peer = (await t.call('POST', '/api/session/ag-4/token', { token: s.token as string, body: {} }))
      .json;
    const bin = join(import.meta.dirname, '../../bin/punch.mjs');
    const args = ['agent', '--link', String(peer.url), '--role', 'sender', '--port', '9000'];
    const child = spawn(
      process.execPath,
      [bin, ...args, '--input', 'udp://127.0.0.1:5000', '--srt', process.execPath],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    assert.equal(code, 0, err);
    assert.match(err, /session reached the end of its lifetime with no media flowing; agent done/);
    assert.doesNotMatch(err, /closed by the operator/);
  } finally {
    await t.close();
  }
});

test('punch agent (the CLI): a --bitrate that is not a bit rate ends it at once with exit 2 and says what is expected', async () => {
  const bin = join(import.meta.dirname, '../../bin/punch.mjs');
  const base = ['agent', '--broker', 'http://127.0.0.1:9', '--session', 's', '--token', 't'];
  const media = ['--role', 'sender', '--port', '9000', '--input', 'udp://127.0.0.1:5000'];
  for (const bad of ['8M', '5', '1e12']) {
    const child = spawn(process.execPath, [bin, ...base, ...media, '--bitrate', bad], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    assert.equal(code, 2, `${bad}: ${err}`);
    assert.match(err, /--bitrate must be the encoder bit rate in bits\/s/, bad);
  }
});
