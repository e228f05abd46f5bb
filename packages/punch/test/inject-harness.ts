/**
 * The broker as app.ts builds it, driven through fastify's `inject` on a `ManualClock` with the memory store:
 * no socket, no file (docs/ARCHITECTURE.md "Tests mirror the layers", the quick tier). `call` answers like the
 * integration helper's (`startTestServer` in helpers.ts): status, headers, JSON and text, and it asserts the
 * Punch-Version header on every answer. The Host header is the base URL's, as a browser following a link sends.
 */
import assert from 'node:assert/strict';
import { ManualClock, serviceContext, silentLogger } from '@broadcast-ops/core';
import { createPunchApp, type PunchApp, type PunchAppOptions } from '../src/app.ts';
import { punchConfigSchema } from '../src/config.ts';
import { MemoryStore } from '../src/domain/store.ts';
import { tokenResponse } from '../src/protocol/schemas.ts';

export const SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKL';

/** The base URL the links are built on unless the test sets `baseUrl`; its host passes the Host guard. */
export const BASE_URL = 'http://punch.test';

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

export type Call = (method: string, path: string, options?: CallOptions) => Promise<CallResult>;

/** Status, headers and body of an answer, JSON parsed when it is JSON; asserts the Punch-Version header. */
export function callResult(what: string, status: number, headers: Headers, text: string): CallResult {
  assert.equal(headers.get('punch-version'), '1.0', `${what} (${status}) lacks Punch-Version`);
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status, headers, json, text };
}

/** The request headers of `call`: the bearer token, and JSON's content type when a body object is sent. */
export function requestOf(o: CallOptions): { headers: Record<string, string>; body: string | undefined } {
  const headers: Record<string, string> = { ...o.headers };
  if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
  let body: string | undefined;
  if (o.rawBody !== undefined) body = o.rawBody;
  else if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  return { headers, body };
}

export interface InjectedBroker {
  server: PunchApp;
  clock: ManualClock;
  /** The base URL links are built on. */
  url: string;
  call: Call;
  close: () => Promise<void>;
}

/**
 * The broker wired by app.ts on a `ManualClock` (or the one given) and a `MemoryStore` (or the one given);
 * limits default high, as in the integration helper, so that only a test about limits meets them.
 */
export async function injectBroker(
  options: {
    config?: Record<string, unknown>;
    limits?: Record<string, unknown>;
    clock?: ManualClock;
  } & Pick<PunchAppOptions, 'store' | 'turnstile' | 'random'> = {},
): Promise<InjectedBroker> {
  const clock = options.clock ?? new ManualClock();
  const config = punchConfigSchema.parse({
    secret: SECRET,
    host: '127.0.0.1',
    port: 0,
    baseUrl: BASE_URL,
    logLevel: 'silent',
    ...options.config,
    limits: { createPerMinute: 1000, getPerMinute: 1000, ...options.limits },
  });
  const server = createPunchApp(serviceContext(config, { clock, logger: silentLogger() }), {
    store: options.store ?? new MemoryStore(),
    ...(options.turnstile ? { turnstile: options.turnstile } : {}),
    ...(options.random ? { random: options.random } : {}),
  });
  await server.broker.start();
  const url = config.baseUrl ?? BASE_URL;
  const host = new URL(url).host;
  const call: Call = async (method, path, o = {}) => {
    const { headers, body } = requestOf(o);
    headers['host'] ??= host;
    const r = await server.app.inject({
      method: method as 'GET',
      url: path,
      headers,
      ...(body === undefined ? {} : { payload: body }),
    });
    const h = new Headers();
    for (const [k, v] of Object.entries(r.headers)) {
      if (v === undefined) continue;
      for (const one of [v].flat()) h.append(k, String(one));
    }
    return callResult(`${method} ${path}`, r.statusCode, h, r.body);
  };
  return { server, clock, url, call, close: () => server.close() };
}

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

/** A session with streams cam-a and cam-b through `call` (either harness); its admin token. */
export async function twoStreamSession(call: Call, name: string): Promise<string> {
  const r = await call('POST', '/api/session', { body: { name, streams: ['cam-a', 'cam-b'] } });
  assert.equal(r.status, 201, r.text);
  return r.json.token as string;
}

/** README "Invites": a peer token for one stream, its answer checked against the schema. */
export async function issueInvite(
  call: Call,
  name: string,
  admin: string,
  body: Record<string, unknown>,
): Promise<{ token: string; invite: string; url: string; qr: string }> {
  const r = await call('POST', `/api/session/${name}/token`, { token: admin, body });
  assert.equal(r.status, 201, r.text);
  tokenResponse.parse(r.json);
  return r.json as { token: string; invite: string; url: string; qr: string };
}
