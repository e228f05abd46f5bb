import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  loadFactor,
  repoRoot,
  startProcess,
  waitFor,
  type RunningProcess,
} from '@broadcast-ops/core/testing';
import { SECRET } from './helpers.ts';

/** A `punch serve` child process on a Redis store (killed by PID by the test). */
export interface Instance {
  proc: RunningProcess;
  url: string;
  call: (method: string, path: string, o?: { token?: string; body?: unknown }) => Promise<Answer>;
  health: () => Promise<Answer>;
  stop: (signal?: NodeJS.Signals) => Promise<void>;
}

export interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- bodies are checked field by field
  json: any;
  text: string;
}

export async function request(
  url: string,
  method: string,
  path: string,
  o: { token?: string; body?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.token) headers['authorization'] = `Bearer ${o.token}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url + path, {
    method,
    headers,
    ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

export async function startInstance(
  redisUrl: string,
  prefix: string,
  env: Record<string, string> = {},
): Promise<Instance> {
  const proc = punchOnRedis('serve', redisUrl, prefix, {
    PUNCH_SECRET: SECRET,
    PUNCH_HOST: '127.0.0.1',
    PUNCH_PORT: '0',
    PUNCH_RATE_LIMIT: '100000',
    PUNCH_RATE_LIMIT_GET: '100000',
    PUNCH_RATE_LIMIT_ADMIN: '100000',
    PUNCH_RATE_LIMIT_WS_CONNECT: '100000',
    ...env,
  });
  const m = await proc.waitForOutput(
    /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*punch broker listening/,
    30_000,
  );
  const url = m[1] ?? '';
  return {
    proc,
    url,
    call: (method, path, o) => request(url, method, path, o),
    health: () => request(url, 'GET', '/api/health'),
    stop: async (signal = 'SIGTERM') => {
      await proc.stop(signal);
    },
  };
}

/** Wait until exactly one of the instances reports itself the owner and all see it; returns [owner, relays]. */
/**
 * Whether `instance` owns the sessions and serves them: an owner still loading them reports no owner in its
 * health (and answers 503 "retry"), so `role` alone is not enough.
 */
export async function servingOwner(instance: Instance): Promise<boolean> {
  const store = (await instance.health().catch(() => undefined))?.json?.store;
  return store?.role === 'owner' && store.owner === store.instance;
}

export async function settle(
  instances: Instance[],
  timeoutMs = 20_000,
): Promise<{ owner: Instance; relays: Instance[] }> {
  let found: { owner: Instance; relays: Instance[] } | undefined;
  await waitFor(
    async () => {
      const hs = await Promise.all(instances.map((i) => i.health().catch(() => undefined)));
      const owners = instances.filter((_, k) => hs[k]?.json?.store?.role === 'owner');
      const ownerId =
        owners.length === 1 ? hs[instances.indexOf(owners[0] as Instance)]?.json.store.instance : null;
      if (!ownerId || !hs.every((h) => h?.status === 200 && h.json.store.owner === ownerId)) return undefined;
      found = { owner: owners[0] as Instance, relays: instances.filter((i) => i !== owners[0]) };
      return true;
    },
    { timeoutMs: timeoutMs * loadFactor(), what: 'one owner seen by every instance' },
  );
  assert.ok(found);
  return found;
}

/** A `punch relay` child process on Redis (docs/relay.md "Deploying a separate relay"), killed by PID. */
export interface RelayProc {
  proc: RunningProcess;
  id: string;
}

export async function startRelay(
  redisUrl: string,
  prefix: string,
  env: Record<string, string> = {},
): Promise<RelayProc> {
  const proc = punchOnRedis('relay', redisUrl, prefix, {
    PUNCH_RELAY_HOST: '127.0.0.1',
    PUNCH_RELAY_PUBLIC_ADDRESS: '127.0.0.1',
    PUNCH_RELAY_ALLOW: '127.0.0.0/8',
    ...env,
  });
  const m = await proc.waitForOutput(/"relay":"([A-Za-z0-9_-]+)"[^\n]*punch relay registered/, 30_000);
  return { proc, id: m[1] ?? '' };
}

/** `punch <command>` as a child process on a Redis deployment (its URL and prefix, a short lease). */
function punchOnRedis(
  command: 'serve' | 'relay',
  redisUrl: string,
  prefix: string,
  env: Record<string, string>,
): RunningProcess {
  return startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), command], {
    env: {
      PUNCH_REDIS_URL: redisUrl,
      PUNCH_REDIS_PREFIX: prefix,
      // Short enough for the take-over tests, long enough for a loaded machine's late timers.
      PUNCH_REDIS_LEASE_MS: '3000',
      LOG_LEVEL: 'info',
      ...env,
    },
  });
}
