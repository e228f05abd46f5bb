import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { agentFileName } from '../../src/io/agent-bundle.ts';
import { SECRET, startTestServer, type TestServer } from '../helpers.ts';

/**
 * The single-file agent served by the broker (docs/agent.md "Without a checkout") and the join page's
 * commands for it, on 127.0.0.1:0: public, the same bytes under the versioned name and the stable alias,
 * no token in any download URL; and the note that links point at a loopback address (README "Your first
 * link"), which names PUNCH_BASE_URL, on every page that hands out links, gone once the setting is made.
 * Here what needs the bundle built (esbuild runs a process) or the broker started as a process; the
 * routes' documentation, the 404, the join steps and the loopback note run through `inject` in
 * test/app/agent-download.test.ts. That the downloaded file runs and carries media:
 * test/interop/agent-e2e-download.test.ts.
 */
const version = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
const file = agentFileName(version);

describe('the agent download, broker on 127.0.0.1', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t.close();
  });

  test('GET /agent/<versioned file> and the alias serve one self-contained module, without a token', async () => {
    const versioned = await fetch(`${t.url}/agent/${file}`);
    assert.equal(versioned.status, 200);
    assert.match(versioned.headers.get('content-type') ?? '', /^text\/javascript/);
    const body = Buffer.from(await versioned.arrayBuffer());
    const text = body.toString('utf8');
    assert.ok(text.startsWith(`// punch agent ${version}`), text.slice(0, 80));
    // Self-contained: no import of a package or a workspace file, only Node's own modules.
    const imports = [...text.matchAll(/^import .* from ['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    assert.ok(imports.length > 0);
    for (const spec of imports) assert.match(spec ?? '', /^node:/, `import of ${spec}`);
    assert.doesNotMatch(text, /fastify|prom-client/, 'the broker-only modules are left out');

    const alias = await fetch(`${t.url}/agent/punch-agent.mjs`);
    assert.equal(alias.status, 200);
    assert.ok(Buffer.from(await alias.arrayBuffer()).equals(body), 'the alias is the same file');

    const index = await t.call('GET', '/agent/');
    assert.equal(index.status, 200);
    assert.equal(index.json.version, version);
    assert.equal(index.json.file, file);
    assert.equal(index.json.url, `${t.url}/agent/${file}`);
    assert.equal(index.json.bytes, body.length);
    assert.equal(index.json.sha256, createHash('sha256').update(body).digest('hex'));

    // A revalidation costs no body.
    const again = await fetch(`${t.url}/agent/${file}`, {
      headers: { 'if-none-match': versioned.headers.get('etag') ?? '' },
    });
    assert.equal(again.status, 304);
  });
});

describe('the quick start (npm start: PUNCH_HOST=127.0.0.1, no PUNCH_BASE_URL)', () => {
  test('punch serve says at start that links reach only this machine, and names PUNCH_BASE_URL', async () => {
    const tmp = tempDir('punch-base-note-');
    const proc = startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve'], {
      env: {
        PUNCH_SECRET: SECRET,
        PUNCH_HOST: '127.0.0.1',
        PUNCH_PORT: '0',
        PUNCH_DB: join(tmp.path, 'punch.db'),
        LOG_LEVEL: 'info',
      },
    });
    try {
      const m = await proc.waitForOutput(
        /"baseUrl":"(http:\/\/127\.0\.0\.1:\d+)","setting":"PUNCH_BASE_URL"[^\n]*/,
        30_000,
      );
      assert.match(m[0], /only this machine reaches/);
      assert.match(m[0], /PUNCH_BASE_URL=https:\/\/punch\.example\.com/, 'says how to set it');
    } finally {
      await proc.stop('SIGKILL');
      tmp.remove();
    }
  });
});
