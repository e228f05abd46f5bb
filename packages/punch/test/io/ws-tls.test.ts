import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { startTestServer } from '../helpers.ts';
import { connect } from '../ws-helpers.ts';

const FIXTURES = join(repoRoot, 'packages/punch/test/fixtures/tls');
const cert = readFileSync(join(FIXTURES, 'cert.pem'));
const key = readFileSync(join(FIXTURES, 'key.pem'));

function createSession(url: string, name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/api/session`,
      { method: 'POST', ca: cert, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve((JSON.parse(text) as { token: string }).token));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ name }));
  });
}

test('with PUNCH_TLS_CERT/KEY the signalling is WSS on the same port; plain ws is not answered', async () => {
  const t = await startTestServer({ tls: { cert, key } });
  try {
    const admin = await createSession(t.url, 'wss-1');
    const a = await connect(t.url, 'wss-1', { token: admin, ca: cert });
    const b = await connect(t.url, 'wss-1', { token: admin, ca: cert });
    assert.match(a.ws.url, /^wss:\/\/127\.0\.0\.1:\d+\/api\/ws\/wss-1$/);
    await a.next('session');
    await b.next('session');
    a.send({ type: 'register', port: 6000 });
    await a.next('session');
    b.send({ type: 'register', port: 6000 });
    const peer = await b.next('peer');
    assert.equal(peer['ip'], '127.0.0.1');
    assert.match(peer['passphrase'] as string, /^[A-Za-z0-9]{32}$/);
    await assert.rejects(connect(t.url.replace('https:', 'http:'), 'wss-1', { token: admin }));
    a.close();
    b.close();
  } finally {
    await t.close();
  }
});
