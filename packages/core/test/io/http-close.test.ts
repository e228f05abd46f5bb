// createHttpApp's close() over real sockets on 127.0.0.1:0: in-flight requests finish, a connection that
// never sent a byte does not hold the close, and whatever is left after the grace is ended (http.ts
// closeConnectionsOnClose).
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { createHttpApp, createLogger, listeningUrl } from '../../src/index.ts';
import { settlesWithin } from '../../src/testing/index.ts';

const logger = createLogger({ service: 'test', level: 'silent' });

function rawConnect(port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject).on('error', () => undefined); // a reset at close is expected
      resolve({ socket, closed });
    });
  });
}

async function listening(app: ReturnType<typeof createHttpApp>): Promise<number> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return Number(new URL(listeningUrl(app)).port);
}

test('a connection that never sent a byte (a browser preconnect) is ended at close and does not hold it', async () => {
  // A grace far past the guard: only the at-once rule can let this close finish.
  const app = createHttpApp({ logger, closeGraceMs: 600_000 });
  const port = await listening(app);
  const accepted = new Promise<void>((r) => app.server.once('connection', () => r()));
  const silent = await rawConnect(port);
  await settlesWithin(accepted, 30_000, 'the server accepts the connection');
  await settlesWithin(app.close(), 30_000, 'close with a silent connection open');
  await settlesWithin(silent.closed, 30_000, 'the silent connection ended by the server');
});

test('an in-flight request finishes at close, its answer carrying Connection: close', async () => {
  const app = createHttpApp({ logger, closeGraceMs: 600_000 });
  let release!: () => void;
  const started = new Promise<void>((resolveStarted) => {
    app.get('/slow', async () => {
      resolveStarted();
      await new Promise<void>((r) => (release = r));
      return { done: true };
    });
  });
  const port = await listening(app);
  const answer = new Promise<{ status: number; connection: string | undefined; body: string }>(
    (resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/slow', agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
        );
      });
      req.on('error', reject);
      req.end();
    },
  );
  await started;
  let closed = false;
  const closing = app.close().then(() => (closed = true));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(closed, false, 'close waits for the request in flight');
  release();
  const res = await answer;
  assert.deepEqual(res, { status: 200, connection: 'close', body: '{"done":true}' });
  await settlesWithin(closing, 30_000, 'close after the in-flight request');
});

test('after the grace, a request that never gets its answer and one whose headers never end are cut', async () => {
  const app = createHttpApp({ logger, closeGraceMs: 300 });
  let handled = 0;
  app.get('/never', async () => {
    handled++;
    await new Promise(() => undefined);
  });
  const port = await listening(app);
  const stuck = await rawConnect(port);
  stuck.socket.write('GET /never HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  const partial = await rawConnect(port);
  partial.socket.write('GET / HTTP/1.1\r\nHost: 12'); // a header line never finished
  for (let i = 0; i < 200 && handled === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(handled, 1, 'the stuck request reached its handler');
  await settlesWithin(app.close(), 30_000, 'close with a stuck request and half-sent headers');
  await settlesWithin(stuck.closed, 30_000, 'the stuck request cut');
  await settlesWithin(partial.closed, 30_000, 'the half-sent request cut');
});
