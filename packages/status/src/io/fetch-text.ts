/**
 * One GET with a deadline and a byte cap, on node:http (no Fetch "bad port" rules: the status service polls
 * whatever port a service is configured on). A bearer token, when given, goes in the Authorization header,
 * never in the URL.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Fetched } from '../domain/verdict.ts';

export function fetchText(
  url: string,
  opts: { timeoutMs: number; maxBytes: number; token?: string },
): Promise<Fetched> {
  return new Promise((resolve) => {
    let settled = false;
    const target = new URL(url);
    const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers: Record<string, string> = { accept: 'application/json, text/plain;q=0.9' };
    if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
    const req = request(target, { method: 'GET', headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > opts.maxBytes)
          return done({ ok: false, error: `answer larger than ${opts.maxBytes} bytes` });
        chunks.push(chunk);
      });
      res.on('end', () =>
        done({ ok: true, status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', (err) => done({ ok: false, error: err.message }));
    });
    const timer = setTimeout(
      () => done({ ok: false, error: `nothing within ${opts.timeoutMs} ms` }),
      opts.timeoutMs,
    );
    function done(r: Fetched): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(r);
    }
    req.on('error', (err) => done({ ok: false, error: (err as NodeJS.ErrnoException).code ?? err.message }));
    req.end();
  });
}
