import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, requireTool, startProcess } from '@broadcast-ops/core/testing';
import { SECRET, startTestServer } from '../helpers.ts';

const FIXTURES = join(repoRoot, 'packages/punch/test/fixtures/tls');
const cert = readFileSync(join(FIXTURES, 'cert.pem'));
const key = readFileSync(join(FIXTURES, 'key.pem'));

function httpsJson(url: string, method = 'GET', body?: unknown): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, ca: cert, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined }),
      );
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

test('PUNCH_TLS_CERT/KEY: the broker serves HTTPS itself, and its links are https', async () => {
  const t = await startTestServer({ tls: { cert, key } });
  try {
    assert.match(t.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const health = await httpsJson(`${t.url}/api/health`);
    assert.equal(health.status, 200);
    const created = await httpsJson(`${t.url}/api/session`, 'POST', { name: 'tls-1' });
    assert.equal(created.status, 201);
    assert.match((created.json as { url: string }).url, /^https:\/\/127\.0\.0\.1:\d+\/s\/tls-1$/);
    // Plain HTTP on the TLS port is not answered as HTTP.
    await assert.rejects(fetch(t.url.replace('https:', 'http:') + '/api/health'));
  } finally {
    await t.close();
  }
});

/**
 * The warning as `serve` logs it. The non-loopback runs bind 0.0.0.0 inside a network namespace this test
 * creates (it has only a loopback interface, so nothing outside can reach the port) and deletes; the others
 * bind 127.0.0.1, like the rest of the tests.
 */
test('serve: a warning when bound to a non-loopback address without TLS; none with TLS', async () => {
  requireTool('ip');
  const ns = `punch-tls-${process.pid % 100_000}`;
  const punch = join(repoRoot, 'packages/punch/bin/punch.mjs');
  const serve = async (env: Record<string, string>, inNamespace = false) => {
    const command = [process.execPath, punch, 'serve'];
    // `ip netns exec` execs the command in place: the process stopped below is the broker itself.
    const [cmd = '', ...args] = inNamespace ? ['ip', 'netns', 'exec', ns, ...command] : command;
    const proc = startProcess(cmd, args, { env: { ...base, ...env } });
    try {
      await proc.waitForOutput(/punch broker listening|plain HTTP|"level":50/, 20_000).catch(() => undefined);
      // The listening line is at info level: wait a moment for a warning that would follow it.
      await new Promise((r) => setTimeout(r, 300));
      return proc.output();
    } finally {
      await proc.stop('SIGTERM');
    }
  };
  const base = { PUNCH_SECRET: SECRET, PUNCH_DB: ':memory:', PUNCH_PORT: '0', LOG_LEVEL: 'warn' };
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    const plain = await serve({ PUNCH_HOST: '0.0.0.0' }, true);
    assert.match(plain, /serving plain HTTP on a non-loopback address.*PUNCH_TLS_CERT and PUNCH_TLS_KEY/);
    const tlsWide = await serve(
      {
        PUNCH_HOST: '0.0.0.0',
        PUNCH_TLS_CERT: join(FIXTURES, 'cert.pem'),
        PUNCH_TLS_KEY: join(FIXTURES, 'key.pem'),
        LOG_LEVEL: 'info',
      },
      true,
    );
    assert.match(tlsWide, /"tls":true.*punch broker listening/);
    assert.doesNotMatch(tlsWide, /plain HTTP/);
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
  const tls = await serve({
    PUNCH_HOST: '127.0.0.1',
    PUNCH_TLS_CERT: join(FIXTURES, 'cert.pem'),
    PUNCH_TLS_KEY: join(FIXTURES, 'key.pem'),
    LOG_LEVEL: 'info',
  });
  assert.match(tls, /"url":"https:\/\/127\.0\.0\.1:\d+".*punch broker listening/);
  assert.doesNotMatch(tls, /plain HTTP/);
  const loopback = await serve({ PUNCH_HOST: '127.0.0.1', LOG_LEVEL: 'info' });
  assert.match(loopback, /punch broker listening/);
  assert.doesNotMatch(loopback, /plain HTTP/);
});
