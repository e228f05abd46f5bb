/**
 * "Test connection" of the control page: one bounded probe per device kind, never more than a few seconds.
 *
 * - `http_mixer` (vMix): one `GET /api`; ok when it answers 200 with a `<vmix>` document; detail = version.
 * - `tcp_recorder` (HyperDeck): decks accept one client at a time, so when the monitor already holds the
 *   connection the answer comes from it; otherwise connect, read the `500 connection info:` banner
 *   (model, protocol version), send `quit`.
 * - `osc_player` (CasparCG): OSC is pushed by the server, so the test waits for fresh data from the
 *   configured device (up to 3 s); the monitor must be one of CasparCG's OSC predefined clients.
 */
import { connect } from 'node:net';
import type { OutputView } from '../domain/output-view.ts';

export interface ConnectionTarget {
  id?: number | undefined;
  type: 'osc_player' | 'http_mixer' | 'tcp_recorder';
  ip: string;
  port: number;
  username?: string | undefined;
  password?: string | undefined;
}

export interface ConnectionResult {
  ok: boolean;
  latencyMs: number;
  detail: string;
}

const TIMEOUT_MS = 3000;
const MAX_BANNER_BYTES = 4096;

export async function testConnection(target: ConnectionTarget, view: OutputView): Promise<ConnectionResult> {
  const started = performance.now();
  const done = (ok: boolean, detail: string): ConnectionResult => ({
    ok,
    latencyMs: Math.round((performance.now() - started) * 10) / 10,
    detail,
  });
  try {
    switch (target.type) {
      case 'http_mixer':
        return await testVmix(target, done);
      case 'tcp_recorder': {
        const held = target.id !== undefined ? view.store?.get(target.id) : undefined;
        if (held?.connected && held.ip === target.ip && held.port === target.port) {
          return done(true, `connected (the monitor holds the deck's connection), state ${held.state}`);
        }
        return await testHyperdeck(target, done);
      }
      case 'osc_player':
        return await testOsc(target, view, done);
    }
  } catch (err) {
    return done(false, err instanceof Error ? err.message : String(err));
  }
}

const MAX_BODY_BYTES = 1 << 20;

/** The body's first `max` bytes (the rest is never read: a peer cannot make us buffer more). */
async function readBounded(res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const next = (await reader.read()) as { done: boolean; value?: Uint8Array };
    if (next.done || !next.value) break;
    chunks.push(next.value);
    size += next.value.byteLength;
    if (size >= max) {
      await reader.cancel();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

async function testVmix(
  t: ConnectionTarget,
  done: (ok: boolean, detail: string) => ConnectionResult,
): Promise<ConnectionResult> {
  const headers: Record<string, string> = {};
  if (t.username !== undefined) {
    headers['authorization'] = 'Basic ' + Buffer.from(`${t.username}:${t.password ?? ''}`).toString('base64');
  }
  const host = t.ip.includes(':') ? `[${t.ip}]` : t.ip;
  const res = await fetch(`http://${host}:${t.port}/api`, {
    headers,
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const body = await readBounded(res, MAX_BODY_BYTES);
  if (res.status !== 200) return done(false, `HTTP ${res.status}`);
  if (!/<vmix>/i.test(body)) return done(false, 'answered, but not with a vMix /api document');
  const version = /<version>([^<]{0,64})<\/version>/i.exec(body)?.[1];
  return done(true, `vMix ${version ?? '(version not given)'}`);
}

function testHyperdeck(
  t: ConnectionTarget,
  done: (ok: boolean, detail: string) => ConnectionResult,
): Promise<ConnectionResult> {
  return new Promise((resolve) => {
    const socket = connect({ host: t.ip, port: t.port });
    let text = '';
    let settled = false;
    const finish = (r: ConnectionResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.end('quit\r\n');
      socket.destroySoon();
      resolve(r);
    };
    const timer = setTimeout(
      () => finish(done(false, text ? 'incomplete banner' : 'no banner within 3 s')),
      TIMEOUT_MS,
    );
    socket.setEncoding('latin1');
    socket.on('error', (err) => finish(done(false, err.message)));
    socket.on('data', (chunk: string) => {
      text = (text + chunk).slice(0, MAX_BANNER_BYTES);
      if (/^120 /m.test(text)) {
        finish(done(false, 'connection rejected (120): another client holds the deck'));
        return;
      }
      const end = text.indexOf('\r\n\r\n');
      if (!text.startsWith('500') || end < 0) return;
      const model = /^model:\s*(.*)$/m.exec(text)?.[1]?.trim();
      const version = /^protocol version:\s*(.*)$/m.exec(text)?.[1]?.trim();
      finish(done(true, `${model ?? 'HyperDeck'}, protocol ${version ?? '?'}`));
    });
  });
}

async function testOsc(
  t: ConnectionTarget,
  view: OutputView,
  done: (ok: boolean, detail: string) => ConnectionResult,
): Promise<ConnectionResult> {
  const store = view.store;
  const current = t.id !== undefined ? store?.get(t.id) : undefined;
  if (!current || current.ip !== t.ip) {
    return done(
      false,
      'CasparCG pushes OSC: save the device first, then test (and add the monitor as an OSC predefined client in casparcg.config)',
    );
  }
  const since = current.updated;
  const deadline = performance.now() + TIMEOUT_MS;
  while (performance.now() < deadline) {
    const d = store?.get(current.id);
    if (d && d.connected && d.updated > since) return done(true, `OSC arriving, state ${d.state}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return done(false, `no OSC from ${t.ip} within 3 s`);
}
