import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, listeningUrl, type Logger } from '@broadcast-ops/core';
import { stringify } from 'yaml';
import { loadTimesvcConfig } from '../../src/config.ts';
import { createTimesvc, type TimesvcOptions, type TimesvcService } from '../../src/io/service.ts';
import { LogRing } from '../../src/io/web/log-ring.ts';
import { hashPassword } from '../../src/io/web/passwords.ts';
import { waitFor } from '@broadcast-ops/core/testing';

/** Test hashes use scrypt's smallest accepted cost (2^14) so logins stay quick on a loaded machine. */
const TEST_SCRYPT = { log2N: 14, r: 8, p: 1, saltBytes: 16, keyBytes: 32 };
export const PASSWORDS = { admin: 'admin-pass-1', operator: 'operator-pass-2', viewer: 'viewer-pass-3' };
export const JWT_SECRET = 'test-jwt-secret-0123456789abcdef-0123456789';

let users: { username: string; password_hash: string; role: string }[] | undefined;
export async function testUsers(): Promise<{ username: string; password_hash: string; role: string }[]> {
  users ??= await Promise.all(
    (['admin', 'operator', 'viewer'] as const).map(async (role) => ({
      username: role,
      password_hash: await hashPassword(PASSWORDS[role], TEST_SCRYPT),
      role,
    })),
  );
  return users;
}

export interface WebRig {
  service: TimesvcService;
  url: string;
  ntpPort: number;
  dir: string;
  configFile: string;
  logs: LogRing;
  logger: Logger;
  login(role: keyof typeof PASSWORDS): Promise<string>;
  close(): Promise<void>;
}

/**
 * A timesvc with three users (admin, operator, viewer), its config in a temp file (so PUT /api/config has
 * a file to write), NTP and web on loopback ephemeral ports, the log ring fed by its logger.
 */
export async function startWebRig(
  doc: Record<string, unknown> = {},
  options: TimesvcOptions & { environment?: NodeJS.ProcessEnv } = {},
): Promise<WebRig> {
  const dir = mkdtempSync(join(tmpdir(), 'timesvc-web-'));
  const configFile = join(dir, 'timesvc.yaml');
  const ntp = (doc['ntp'] ?? {}) as Record<string, unknown>;
  const web = (doc['web'] ?? {}) as Record<string, unknown>;
  writeFileSync(
    configFile,
    stringify({
      ...doc,
      ntp: { port: 0, interface: '127.0.0.1', local_stratum: true, ...ntp },
      web: { port: 0, bind_address: '127.0.0.1', jwt_secret: JWT_SECRET, users: await testUsers(), ...web },
      logging: { level: 'debug' },
    }),
    { mode: 0o600 },
  );
  const environment = options.environment ?? {};
  const config = loadTimesvcConfig(configFile, environment);
  const logs = new LogRing();
  const logger = createLogger({ service: 'timesvc', level: 'debug', destination: logs.stream(undefined) });
  const service = createTimesvc(config, logger, { configFile, logRing: logs, environment, ...options });
  await service.start();
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  const url = listeningUrl(service.app);
  const tokens = new Map<string, string>();
  return {
    service,
    url,
    ntpPort: service.server()?.addresses[0]?.port ?? 0,
    dir,
    configFile,
    logs,
    logger,
    async login(role) {
      const cached = tokens.get(role);
      if (cached) return cached;
      const res = await service.app.inject({
        method: 'POST',
        url: '/api/auth/login',
        payload: { username: role, password: PASSWORDS[role] },
      });
      if (res.statusCode !== 200) throw new Error(`login ${role}: ${res.statusCode} ${res.body}`);
      const token = res.json<{ token: string }>().token;
      tokens.set(role, token);
      return token;
    },
    async close() {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function until<T>(
  f: () => T | undefined | Promise<T | undefined>,
  ms: number,
  what: string,
): Promise<T> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  return (
    await waitFor(
      async () => {
        const v = await f();
        return v === undefined || v === false ? undefined : { v };
      },
      { timeoutMs: ms, intervalMs: 50, what },
    )
  ).v;
}
