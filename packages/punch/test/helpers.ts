import assert from 'node:assert/strict';
import { join } from 'node:path';
import { silentLogger, type Clock, type Logger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { punchConfigSchema } from '../src/config.ts';
import type { SessionStore } from '../src/domain/store.ts';
import type { TurnstileVerifier } from '../src/io/turnstile.ts';
import { createPunchServer, type PunchServer, type PunchServerOptions } from '../src/app.ts';
import { SECRET, callResult, requestOf, type Call } from './inject-harness.ts';

export { SECRET, assertError, type CallOptions, type CallResult } from './inject-harness.ts';

/**
 * The broker's own relay on loopback for the tests (docs/relay.md "Detection"): loopback peers allowed, a 2 s
 * detection window, the relay's address 127.0.0.1.
 */
export const LOOPBACK_RELAY = {
  host: '127.0.0.1',
  publicAddress: '127.0.0.1',
  allow: ['127.0.0.0/8'],
  fallbackAfterMs: 2_000,
};

export interface TestServer {
  server: PunchServer;
  url: string;
  dir: string;
  close: () => Promise<void>;
  /** fetch + JSON; asserts the Punch-Version header on every response it sees. */
  call: Call;
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
  const call: Call = async (method, path, o = {}) => {
    const { headers, body } = requestOf(o);
    const res = await fetch(url + path, { method, headers, ...(body === undefined ? {} : { body }) });
    return callResult(`${method} ${path}`, res.status, res.headers, await res.text());
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
