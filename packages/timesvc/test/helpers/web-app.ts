import { createLogger, type Logger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { createTimesvc, type TimesvcOptions, type TimesvcService } from '../../src/io/service.ts';
import { LogRing } from '../../src/io/web/log-ring.ts';
import { hashPassword } from '../../src/io/web/passwords.ts';

/**
 * The socket-free side of the web test rigs (docs/ARCHITECTURE.md "Tests mirror the layers"): the test users
 * and a time service wired on a ManualClock and never started, answering fastify `inject` requests. The
 * rigs that open ports (test/helpers/web.ts) build on the same users and login.
 */

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

/** The config document of the rigs: NTP in local stratum on loopback, web with the three test users. */
export async function rigConfigDoc(doc: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const ntp = (doc['ntp'] ?? {}) as Record<string, unknown>;
  const web = (doc['web'] ?? {}) as Record<string, unknown>;
  return {
    ...doc,
    ntp: { port: 0, interface: '127.0.0.1', local_stratum: true, ...ntp },
    web: { port: 0, bind_address: '127.0.0.1', jwt_secret: JWT_SECRET, users: await testUsers(), ...web },
    logging: { level: 'debug' },
  };
}

/** A login through the app's own route, one token per role kept. */
export function loginWith(service: TimesvcService): (role: keyof typeof PASSWORDS) => Promise<string> {
  const tokens = new Map<string, string>();
  return async (role) => {
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
  };
}

export interface WebApp {
  service: TimesvcService;
  clock: ManualClock;
  logs: LogRing;
  logger: Logger;
  login(role: keyof typeof PASSWORDS): Promise<string>;
  close(): Promise<void>;
}

/**
 * The time service of the rig (same users and config, no config file) on a ManualClock that starts at the
 * host's wall time (the tokens' times are the host's), not started: no socket, no timer; `inject` only.
 */
export async function buildWebApp(
  doc: Record<string, unknown> = {},
  options: TimesvcOptions = {},
): Promise<WebApp> {
  const config = configSchema.parse(await rigConfigDoc(doc));
  const logs = new LogRing();
  const logger = createLogger({ service: 'timesvc', level: 'debug', destination: logs.stream(undefined) });
  const clock = new ManualClock(Date.now());
  const service = await createTimesvc(config, logger, { clock, logRing: logs, environment: {}, ...options });
  await service.app.ready();
  return { service, clock, logs, logger, login: loginWith(service), close: () => service.close() };
}
