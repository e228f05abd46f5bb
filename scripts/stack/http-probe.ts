/**
 * One HTTP GET with a deadline, on node:http rather than `fetch`: the launcher's readiness and health checks
 * must not depend on the Fetch standard's port rules (a port `fetch` refuses is refused by the port plan before
 * start, scripts/stack/plan.ts, with the reason; a probe that silently never succeeds would not say why).
 * The body is read and dropped, at most `maxBytes` of it.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export type ProbeResult = { ok: true; status: number; ms: number } | { ok: false; error: string; ms: number };

export function probe(url: string, timeoutMs: number, maxBytes = 64 * 1024): Promise<ProbeResult> {
  const started = performance.now();
  const ms = (): number => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: ProbeResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve(r);
    };
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      resolve({ ok: false, error: `not a URL: ${url}`, ms: 0 });
      return;
    }
    const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = request(target, { method: 'GET', headers: { accept: 'application/json' } }, (res) => {
      let seen = 0;
      res.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > maxBytes) finish({ ok: true, status: res.statusCode ?? 0, ms: ms() });
      });
      res.on('end', () => finish({ ok: true, status: res.statusCode ?? 0, ms: ms() }));
      res.on('error', (err) => finish({ ok: false, error: err.message, ms: ms() }));
    });
    const timer = setTimeout(
      () => finish({ ok: false, error: `no answer within ${timeoutMs} ms`, ms: ms() }),
      timeoutMs,
    );
    req.on('error', (err) => finish({ ok: false, error: err.message, ms: ms() }));
    req.end();
  });
}
