import assert from 'node:assert/strict';
import { join } from 'node:path';
import { silentLogger, type Clock, type Logger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { punchConfigSchema } from '../src/config.ts';
import type { SessionStore } from '../src/domain/store.ts';
import type { TurnstileVerifier } from '../src/io/turnstile.ts';
import { createPunchServer, type PunchServer, type PunchServerOptions } from '../src/app.ts';

export const SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKL';

export interface TestServer {
  server: PunchServer;
  url: string;
  dir: string;
  close: () => Promise<void>;
  /** fetch + JSON; asserts the Punch-Version header on every response it sees. */
  call: (method: string, path: string, options?: CallOptions) => Promise<CallResult>;
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
  json: any;
  text: string;
}

export async function startTestServer(
  options: {
    config?: Record<string, unknown>;
    limits?: Record<string, unknown>;
    store?: SessionStore;
    turnstile?: TurnstileVerifier;
    clock?: Clock;
    secret?: string;
    tls?: { cert: Buffer; key: Buffer };
    signalling?: PunchServerOptions['signalling'];
    logger?: Logger;
  } = {},
): Promise<TestServer> {
  const tmp = tempDir('punch-test-');
  const config = punchConfigSchema.parse({
    secret: options.secret ?? SECRET,
    host: '127.0.0.1',
    port: 0,
    db: join(tmp.path, 'punch.db'),
    logLevel: 'silent',
    ...options.config,
    limits: { createPerMinute: 1000, getPerMinute: 1000, ...options.limits },
  });
  const server = createPunchServer({
    config: { ...config, secret: options.secret ?? SECRET },
    logger: options.logger ?? silentLogger(),
    ...(options.store ? { store: options.store } : {}),
    ...(options.turnstile ? { turnstile: options.turnstile } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.signalling ? { signalling: options.signalling } : {}),
  });
  let url: string;
  try {
    url = await server.listen();
  } catch (err) {
    await server.close().catch(() => undefined);
    tmp.remove();
    throw err;
  }
  const call = async (method: string, path: string, o: CallOptions = {}): Promise<CallResult> => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
    let body: string | undefined;
    if (o.rawBody !== undefined) body = o.rawBody;
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(url + path, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await res.text();
    assert.equal(
      res.headers.get('punch-version'),
      '1.0',
      `${method} ${path} (${res.status}) lacks Punch-Version`,
    );
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, json, text };
  };
  return {
    server,
    url,
    dir: tmp.path,
    call,
    close: async () => {
      await server.close();
      tmp.remove();
    },
  };
}

/** Assert an error response: status, code in `error` and `code`, and a message matching `message`. */
/**
 * An error answer: `code` is the spec's code; `error` is core's generic code where one has the meaning
 * (README "Errors": INVALID_MESSAGE → INVALID_REQUEST, 413, 415; AUTH_FAILED → UNAUTHORIZED, FORBIDDEN).
 */
export function assertError(r: CallResult, status: number, code: string, message?: RegExp): void {
  assert.equal(r.status, status, `expected ${status} ${code}, got ${r.status} ${r.text}`);
  const generic: Record<string, string> = {
    'INVALID_MESSAGE 400': 'INVALID_REQUEST',
    'INVALID_MESSAGE 413': 'PAYLOAD_TOO_LARGE',
    'INVALID_MESSAGE 415': 'UNSUPPORTED_MEDIA_TYPE',
    'AUTH_FAILED 401': 'UNAUTHORIZED',
    'AUTH_FAILED 403': 'FORBIDDEN',
  };
  assert.equal(r.json?.error, generic[`${code} ${status}`] ?? code, r.text);
  assert.equal(r.json?.code, code, r.text);
  assert.equal(typeof r.json?.message, 'string');
  if (message) assert.match(r.json.message, message);
}

/**
 * A page's console problems once its broker is gone, but for the browser's own lines about the refused
 * connections (which a page cannot prevent): what is left fails the test.
 */
export function assertOnlyRefusedConnections(problems: string[]): void {
  const unexpected = problems.filter(
    (p) => !/ERR_CONNECTION_REFUSED|WebSocket connection to .* failed|Failed to load resource/.test(p),
  );
  assert.deepEqual(unexpected, [], unexpected.join('\n'));
}
