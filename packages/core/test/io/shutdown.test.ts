import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startProcess } from '../../src/testing/index.ts';

const fixture = fileURLToPath(new URL('../fixtures/slow-server.ts', import.meta.url));

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

test('SIGTERM: the in-flight request completes, the port is released, the process exits 0', async () => {
  const proc = startProcess(process.execPath, ['--import', 'tsx', fixture], { env: { SLOW_MS: '800' } });
  const [, url] = await proc.waitForOutput(/LISTENING (\S+)/, 20_000);
  const port = Number(new URL(url!).port);
  const inFlight = fetch(`${url}/slow`).then(async (r) => ({
    status: r.status,
    body: await r.json(),
  }));
  await new Promise((r) => setTimeout(r, 200)); // the request is now being handled
  proc.child.kill('SIGTERM');
  const response = await inFlight;
  assert.equal(response.status, 200);
  assert.deepEqual(response.body, { done: true });
  const exit = await proc.exited;
  assert.equal(exit.code, 0, proc.output());
  assert.equal(await portIsFree(port), true);
});
