import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { repoRoot, startProcess, tempDir } from '../../packages/core/src/testing/index.ts';

const fixtures = fileURLToPath(new URL('./fixtures/packages', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

test('launcher starts declared services, prints their URLs, and stops them all on SIGINT with exit 0', async () => {
  const port = await freePort();
  const tmp = tempDir();
  const marker = join(tmp.path, 'marker');
  const launcher = startProcess(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/start-stack.ts'), '--packages', fixtures],
    { env: { DEMO_PORT: String(port), DEMO_MARKER: marker } },
  );
  try {
    await launcher.waitForOutput(/Press Ctrl-C to stop/, 30_000);
    const out = launcher.output();
    assert.match(out, /demo-service\s+up/);
    assert.match(out, new RegExp(`Demo page\\s+http://127\\.0\\.0\\.1:${port}/`));
    assert.doesNotMatch(out, /library-only/);
    const body = await (await fetch(`http://127.0.0.1:${port}/`)).text();
    assert.equal(body, 'hello serve'); // env and args from toolkit.start reached the service
    launcher.child.kill('SIGINT');
    const exit = await launcher.exited;
    assert.equal(exit.code, 0, launcher.output());
    assert.match(readFileSync(marker, 'utf8'), /^stopped \d+\n$/);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/`)); // the port is closed
  } finally {
    await launcher.stop('SIGKILL');
    tmp.remove();
  }
});

test('launcher reports a service that dies at start and exits non-zero', async () => {
  const launcher = startProcess(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/start-stack.ts'), '--packages', fixtures],
    { env: { DEMO_PORT: 'not-a-port', DEMO_MARKER: '/dev/null' } },
  );
  const exit = await launcher.exited;
  assert.equal(exit.code, 1);
  assert.match(launcher.output(), /demo-service exited unexpectedly/);
});
