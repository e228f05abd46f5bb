/**
 * "Test connection" of the control page: one bounded probe per device kind, never more than a few seconds.
 *
 * - `http_mixer` (vMix): one `GET /api`; ok when it answers 200 with a `<vmix>` document; detail = version.
 * - `tcp_recorder` (HyperDeck): decks accept one client at a time, so when the monitor already holds the
 *   connection the answer comes from it; otherwise connect, read the `500 connection info:` banner
 *   (model, protocol version), send `quit`.
 * - `osc_player` (CasparCG): OSC is pushed by the server, so the test waits for fresh data from the
 *   configured device (up to 3 s); the monitor must be one of CasparCG's OSC predefined clients.
 *
 * A failure names its cause (`cause`, and in words in `detail`): `refused` (nothing listens on the port),
 * `timeout` (connected or not, no answer within 3 s), `unauthorized` (HTTP 401: vMix's web API wants a
 * username and password, or refused the ones given), `tls` (the peer speaks TLS where vMix's API and the
 * HyperDeck protocol are plain: a proxy or the wrong port), `dns`, `unreachable`, `protocol` (it answered,
 * but not as the device kind does), `http` (another HTTP status), `no_data` (OSC: nothing arrived).
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

export type FailureCause =
  | 'refused'
  | 'timeout'
  | 'unauthorized'
  | 'tls'
  | 'dns'
  | 'unreachable'
  | 'protocol'
  | 'http'
  | 'no_data'
  | 'busy'
  | 'error';

export interface ConnectionResult {
  ok: boolean;
  latencyMs: number;
  detail: string;
  /** Why it failed (absent when ok). */
  cause?: FailureCause;
}

type Done = (ok: boolean, detail: string, cause?: FailureCause) => ConnectionResult;

function addressOf(t: ConnectionTarget): string {
  return `${t.ip.includes(':') ? `[${t.ip}]` : t.ip}:${t.port}`;
}

/** The socket-level cause of a failed connect or request, in words; undefined when not a network error. */
export function networkCause(
  err: unknown,
  t: ConnectionTarget,
): { cause: FailureCause; detail: string } | undefined {
  const e = err as { name?: string; code?: string; cause?: { code?: string; name?: string } };
  const code = e.code ?? e.cause?.code;
  const name = e.name ?? e.cause?.name;
  const at = addressOf(t);
  if (code === 'ECONNREFUSED')
    return { cause: 'refused', detail: `connection refused (ECONNREFUSED): nothing listens on ${at}` };
  if (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    code === 'ETIMEDOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT'
  )
    return { cause: 'timeout', detail: `timeout: no answer from ${at} within ${TIMEOUT_MS / 1000} s` };
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME')
    return { cause: 'dns', detail: `cannot resolve ${t.ip} (${code})` };
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'EADDRNOTAVAIL')
    return { cause: 'unreachable', detail: `${at} is unreachable (${code})` };
  return undefined;
}

/** Does the peer complete a TLS handshake? (Certificate not checked: this only names the mismatch.) */
async function speaksTls(t: ConnectionTarget): Promise<boolean> {
  // node:tls loads with the first test that needs it, not at every start (docs/at-rest.md "What was cut").
  const { connect: tlsConnect } = await import('node:tls');
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host: t.ip,
      port: t.port,
      rejectUnauthorized: false,
      ...(t.ip.includes(':') || /^[0-9.]+$/.test(t.ip) ? {} : { servername: t.ip }),
    });
    const finish = (yes: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(yes);
    };
    const timer = setTimeout(() => finish(false), TIMEOUT_MS);
    socket.once('secureConnect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

const TLS_DETAIL = (t: ConnectionTarget, what: string): string =>
  `TLS mismatch: ${addressOf(t)} speaks TLS (HTTPS), but ${what} is plain TCP — the wrong port, or a TLS proxy in front`;

/** TLS records start with a content type 20..23 and major version 3 (RFC 8446 section 5.1). */
function looksLikeTls(first: Buffer): boolean {
  const type = first[0] ?? 0;
  return type >= 20 && type <= 23 && first[1] === 3;
}

const TIMEOUT_MS = 3000;
const MAX_BANNER_BYTES = 4096;

export async function testConnection(target: ConnectionTarget, view: OutputView): Promise<ConnectionResult> {
  const started = performance.now();
  const done: Done = (ok, detail, cause) => ({
    ok,
    latencyMs: Math.round((performance.now() - started) * 10) / 10,
    detail,
    ...(ok ? {} : { cause: cause ?? 'error' }),
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
    const named = networkCause(err, target);
    if (named) return done(false, named.detail, named.cause);
    if (target.type === 'http_mixer' && (await speaksTls(target)))
      return done(false, TLS_DETAIL(target, "vMix's web API"), 'tls');
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

async function testVmix(t: ConnectionTarget, done: Done): Promise<ConnectionResult> {
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
  if (res.status === 401)
    return done(
      false,
      t.username === undefined
        ? '401 Unauthorized: vMix asks for a username and password (set them on this device)'
        : `401 Unauthorized: vMix refused the username ${JSON.stringify(t.username)} or its password`,
      'unauthorized',
    );
  if (res.status !== 200) return done(false, `HTTP ${res.status} from ${addressOf(t)}/api`, 'http');
  if (!/<vmix>/i.test(body)) return done(false, 'answered, but not with a vMix /api document', 'protocol');
  const version = /<version>([^<]{0,64})<\/version>/i.exec(body)?.[1];
  return done(true, `vMix ${version ?? '(version not given)'}`);
}

function testHyperdeck(t: ConnectionTarget, done: Done): Promise<ConnectionResult> {
  return new Promise((resolve) => {
    const socket = connect({ host: t.ip, port: t.port });
    let text = '';
    let first: Buffer | undefined;
    let settled = false;
    const finish = (r: ConnectionResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.end('quit\r\n');
      socket.destroySoon();
      resolve(r);
    };
    const timer = setTimeout(() => {
      if (text) {
        finish(done(false, `timeout: incomplete banner from ${addressOf(t)} within 3 s`, 'timeout'));
        return;
      }
      // A TLS server waits silently for a ClientHello: a silent peer may be one.
      void speaksTls(t).then((tls) =>
        finish(
          tls
            ? done(false, TLS_DETAIL(t, 'the HyperDeck Ethernet protocol'), 'tls')
            : done(
                false,
                `timeout: ${addressOf(t)} accepted the connection but sent no banner within 3 s`,
                'timeout',
              ),
        ),
      );
    }, TIMEOUT_MS);
    socket.on('error', (err) => {
      const named = networkCause(err, t);
      finish(named ? done(false, named.detail, named.cause) : done(false, err.message));
    });
    socket.on('data', (chunk: Buffer) => {
      if (first === undefined && looksLikeTls((first = chunk))) {
        finish(done(false, TLS_DETAIL(t, 'the HyperDeck Ethernet protocol'), 'tls'));
        return;
      }
      text = (text + chunk.toString('latin1')).slice(0, MAX_BANNER_BYTES);
      if (/^120 /m.test(text)) {
        finish(done(false, 'connection rejected (120): another client holds the deck', 'busy'));
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

async function testOsc(t: ConnectionTarget, view: OutputView, done: Done): Promise<ConnectionResult> {
  const store = view.store;
  const current = t.id !== undefined ? store?.get(t.id) : undefined;
  if (!current || current.ip !== t.ip) {
    return done(
      false,
      'CasparCG pushes OSC: save the device first, then test (and add the monitor as an OSC predefined client in casparcg.config)',
      'no_data',
    );
  }
  const since = current.updated;
  const deadline = performance.now() + TIMEOUT_MS;
  while (performance.now() < deadline) {
    const d = store?.get(current.id);
    if (d && d.connected && d.updated > since) return done(true, `OSC arriving, state ${d.state}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return done(false, `no OSC from ${t.ip} within 3 s`, 'no_data');
}
