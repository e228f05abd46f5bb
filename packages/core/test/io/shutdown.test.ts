import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
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

test('SIGTERM with a connection that never sent a request (a page open on a PC): exits 0, not at the deadline', async () => {
  const proc = startProcess(process.execPath, ['--import', 'tsx', fixture]);
  const [, url] = await proc.waitForOutput(/LISTENING (\S+)/, 20_000);
  const port = Number(new URL(url!).port);
  const silent = connect(port, '127.0.0.1');
  const ended = new Promise<void>((r) => silent.once('close', () => r()));
  silent.on('error', () => undefined);
  await new Promise<void>((r) => silent.once('connect', () => r()));
  // The accept has run once a request on another connection is answered.
  assert.equal((await fetch(`${url}/slow`)).status, 200);
  proc.child.kill('SIGTERM');
  const exit = await proc.exited;
  assert.equal(exit.code, 0, `exit 0 without Shutdown's "shutdown timed out"\n${proc.output()}`);
  await ended;
  assert.equal(await portIsFree(port), true);
});
