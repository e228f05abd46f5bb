import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { cloudflareTurnstile } from '../../src/io/turnstile.ts';

/** A fake siteverify endpoint: a real HTTP server on 127.0.0.1:0; each path is one planned answer. */
describe('cloudflareTurnstile against a fake siteverify server', () => {
  let server: Server;
  let base = '';
  const forms: URLSearchParams[] = [];
  let endlessClosed: Promise<number>;
  let onEndlessClosed: (bytes: number) => void = () => undefined;

  before(async () => {
    endlessClosed = new Promise((resolve) => (onEndlessClosed = resolve));
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        forms.push(new URLSearchParams(body));
        if (req.url === '/ok') res.end(JSON.stringify({ success: true }));
        else if (req.url === '/no') res.end(JSON.stringify({ success: false }));
        else if (req.url === '/down') res.writeHead(503).end('{"success":true}');
        else if (req.url === '/endless') {
          // An answer that never ends: the verifier must stop reading it, not buffer it until the timeout.
          let sent = 0;
          const chunk = Buffer.alloc(16_384, 0x20);
          const pump = (): void => {
            let flowing = true;
            while (!res.destroyed && flowing) {
              flowing = res.write(chunk);
              sent += chunk.length;
            }
            if (!res.destroyed) res.once('drain', pump);
          };
          res.on('close', () => onEndlessClosed(sent));
          res.write('{"success":true,"pad":"');
          pump();
        } else throw new Error(`unplanned siteverify path ${req.url}`);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const addr = server.address();
    if (addr === null || typeof addr === 'string') throw new Error('no port');
    base = `http://127.0.0.1:${addr.port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('success:true → true, and the form carries secret, response and remoteip', async () => {
    assert.equal(await cloudflareTurnstile('ts-secret', `${base}/ok`)('tok', '192.0.2.7'), true);
    const form = forms.at(-1);
    assert.equal(form?.get('secret'), 'ts-secret');
    assert.equal(form?.get('response'), 'tok');
    assert.equal(form?.get('remoteip'), '192.0.2.7');
  });

  test('success:false, a non-2xx answer or an unreachable server → false (fail closed)', async () => {
    assert.equal(await cloudflareTurnstile('s', `${base}/no`)('tok', '192.0.2.7'), false);
    assert.equal(await cloudflareTurnstile('s', `${base}/down`)('tok', '192.0.2.7'), false);
    assert.equal(await cloudflareTurnstile('s', 'http://127.0.0.1:1/')('tok', '192.0.2.7'), false);
  });

  test('an endless answer → false, and the connection is dropped after a bounded read', async () => {
    // Timeout far beyond the test's: only the size bound can end this call.
    assert.equal(await cloudflareTurnstile('s', `${base}/endless`, 600_000)('tok', '192.0.2.7'), false);
    const sent = await endlessClosed;
    assert.ok(sent < 64 * 1024 * 1024, `server wrote ${sent} bytes before the client hung up`);
  });
});
