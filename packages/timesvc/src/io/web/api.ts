import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as z from '@broadcast-ops/core/zod';
import { ConfigError, bearerToken, installHostGuard, sendError, type Logger } from '@broadcast-ops/core';
import { fail } from '../../errors.ts';
import { allowed, ROUTES, type Permission, type Role, type RouteSpec } from '../../domain/permissions.ts';
import type { TimesvcConfig } from '../../config.ts';
import { Authenticator, LoginThrottle, type User } from './auth.ts';
import { changedPaths, type ConfigStore } from './config-store.ts';
import { LAB_PASSWORD } from './lab-credential.ts';
import { LOG_LEVELS, type LogLevel, type LogRing } from './log-ring.ts';
import { LoginSlots } from './login-slots.ts';
import { MAX_CLIENT_REPORT } from '../batch-socket.ts';
import {
  clientsStatus,
  clockStatus,
  fullStatus,
  ntpStatus,
  ntsStatus,
  peersStatus,
  type StatusSources,
} from './status.ts';

/**
 * The web API behind `/api/*` (README "Web API"): login, roles enforced on every route from the one
 * table in domain/permissions.ts, status, peers, logs, configuration. Errors are the toolkit's one shape
 * `{error: CODE, message}`.
 */
export interface WebApiContext extends StatusSources {
  logger: Logger;
  logs: LogRing;
  auth: Authenticator | undefined;
  configStore: ConfigStore;
  /** Apply a new validated config at run time; returns the paths that need a restart. */
  applyConfig(next: TimesvcConfig): Promise<{ applied: string[]; restartRequired: string[] }>;
  reloadNtsCertificate(): boolean;
  /** Which parts of the documented lab credential are in use (lab-credential.ts labCredentialUse). */
  labCredential(): readonly string[];
}

export interface Principal {
  username: string;
  role: Role;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    permission?: Permission;
    changesState?: boolean;
  }
}

const loginBody = z.strictObject({
  username: z.textRange(1, 128),
  password: z.textRange(1, 1024),
});

const peerBody = z.strictObject({
  address: z.textRange(1, 300),
  prefer: z.optional(z.boolean()),
  iburst: z.optional(z.boolean()),
  minpoll: z.optional(z.int()),
  maxpoll: z.optional(z.int()),
  nts_enabled: z.optional(z.boolean()),
  nts_ke_port: z.optional(z.int()),
});

/**
 * Concurrent scrypt verifications (128 MiB each at the OWASP parameters: 384 MiB at most), and per client
 * address (IPv6: per /64); identical requests in flight share one (login-slots.ts).
 */
const MAX_CONCURRENT_LOGINS = 3;
const MAX_LOGINS_PER_ADDRESS = 1;

/** Token from `Authorization: Bearer`, else `?token=` (browsers cannot set headers on WebSockets). */
export function requestToken(
  headers: Record<string, string | string[] | undefined>,
  url: string,
): string | undefined {
  const auth = headers['authorization'];
  const fromHeader = bearerToken(Array.isArray(auth) ? auth[0] : auth);
  if (fromHeader) return fromHeader;
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  return new URLSearchParams(url.slice(q + 1)).get('token') ?? undefined;
}

/** Resolve the caller for a permission; throws 401/403 AppErrors. */
export async function authorise(
  ctx: Pick<WebApiContext, 'auth' | 'config'>,
  permission: Permission,
  token: string | undefined,
): Promise<Principal | undefined> {
  if (permission === 'public') return undefined;
  if (permission === 'read' && ctx.config().web.read_only_mode) return undefined;
  if (!token) throw fail('UNAUTHORIZED', 'missing authentication token');
  if (!ctx.auth) throw fail('UNAUTHORIZED', 'invalid token');
  const r = await ctx.auth.verify(token);
  if (!r.ok) throw fail('UNAUTHORIZED', r.reason === 'expired' ? 'token expired' : 'invalid token');
  if (!allowed(r.claims.role, permission)) throw fail('FORBIDDEN', 'insufficient permissions');
  return { username: r.claims.username, role: r.claims.role };
}

/**
 * The Origin check of state-changing requests and stream upgrades (DNS rebinding and cross-site requests;
 * the Host header itself is checked for every request by core's Host guard, installed in registerWebApi):
 * a browser's `Origin`, when sent, must be this server's own origin or an entry of `web.allowed_origins`.
 */
export function originAllowed(
  host: string | undefined,
  origin: string | undefined,
  allowedOrigins: readonly string[],
): boolean {
  if (origin === undefined) return true;
  try {
    const o = new URL(origin);
    return o.host.toLowerCase() === (host ?? '').toLowerCase() || allowedOrigins.includes(o.origin);
  } catch {
    return false;
  }
}

/** The host names of `web.allowed_origins`, which core's Host guard accepts besides its own rule. */
export function allowedHostsOf(allowedOrigins: readonly string[]): string[] {
  return allowedOrigins.map((o) => {
    try {
      return new URL(o).hostname.replace(/^\[|\]$/g, '').toLowerCase();
    } catch {
      return o.toLowerCase();
    }
  });
}

export function registerWebApi(app: FastifyInstance, ctx: WebApiContext): void {
  const throttle = new LoginThrottle();
  const slots = new LoginSlots<User | undefined>({
    total: MAX_CONCURRENT_LOGINS,
    perAddress: MAX_LOGINS_PER_ADDRESS,
  });
  const authLog = ctx.logger.child({ component: 'auth' });
  const specs = new Map<string, RouteSpec>(ROUTES.map((r) => [`${r.method} ${r.url}`, r]));

  installHostGuard(app, () => allowedHostsOf(ctx.config().web.allowed_origins));
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const permission = request.routeOptions.config.permission;
    if (permission === undefined) return;
    if (
      request.routeOptions.config.changesState &&
      !originAllowed(request.headers.host, request.headers.origin, ctx.config().web.allowed_origins)
    ) {
      throw fail('FORBIDDEN', `Origin ${JSON.stringify(request.headers.origin ?? '')} is not allowed`);
    }
    const principal = await authorise(ctx, permission, requestToken(request.headers, request.url));
    (request as FastifyRequest & { principal?: Principal | undefined }).principal = principal;
  });

  const route = (
    method: RouteSpec['method'],
    url: string,
    handler: (request: FastifyRequest, reply: FastifyReply) => unknown,
    extra: { bodyLimit?: number } = {},
  ): void => {
    const spec = specs.get(`${method} ${url}`);
    if (!spec) throw new Error(`route ${method} ${url} is missing from the permission table`);
    app.route({
      method,
      url,
      config: { permission: spec.permission, changesState: spec.changesState ?? false },
      ...extra,
      handler: async (request, reply) => handler(request, reply),
    });
  };

  route(
    'POST',
    '/api/auth/login',
    async (request, reply) => {
      const ip = request.ip;
      const wait = throttle.waitMs(ip);
      if (wait > 0) {
        throw fail('RATE_LIMITED', 'too many failed logins; try again later', {
          headers: { 'retry-after': String(Math.ceil(wait / 1000)) },
        });
      }
      const body = loginBody.safeParse(request.body);
      if (!body.success) throw fail('INVALID_REQUEST', 'invalid request body: {username, password} expected');
      if (!ctx.auth) {
        authLog.warn({ ip, username: body.data.username }, 'login refused: no users are configured');
        throw fail('UNAUTHORIZED', 'invalid credentials');
      }
      const auth = ctx.auth;
      const { username, password } = body.data;
      const verifying = slots.run(ip, username, password, () => auth.check(username, password));
      if (verifying === undefined) {
        throw fail('RATE_LIMITED', 'login busy; try again', { headers: { 'retry-after': '1' } });
      }
      const user = await verifying;
      if (!user) {
        const failures = throttle.fail(ip);
        authLog.warn({ ip, username: body.data.username, failures }, 'login failed');
        throw fail('UNAUTHORIZED', 'invalid credentials');
      }
      throttle.succeed(ip);
      const { token, expiresAt } = await ctx.auth.issue(user);
      authLog.info({ ip, username: user.username, role: user.role }, 'login');
      return reply.send({
        token,
        token_type: 'Bearer',
        expires_in: Math.max(0, expiresAt - Math.floor(Date.now() / 1000)),
        expires_at: new Date(expiresAt * 1000).toISOString(),
        user: { username: user.username, role: user.role },
      });
    },
    { bodyLimit: 4096 },
  );

  // Public, for the login page: the documented lab credential (config/timesvc.demo.yaml) while it is in
  // use, so a lab operator can log in and everyone sees it must be changed; nothing with a real user list.
  route('GET', '/api/auth/lab-credential', () => labCredentialNote(ctx.labCredential()));
  route('GET', '/api/auth/me', (request) => {
    const p = (request as FastifyRequest & { principal?: Principal | undefined }).principal;
    return { user: p ?? null, default_credential: ctx.defaultCredential() };
  });
  route('GET', '/api/status', () => fullStatus(ctx));
  route('GET', '/api/status/clock', () => clockStatus(ctx));
  route('GET', '/api/status/ntp', () => {
    if (!ctx.config().ntp.enabled) throw fail('NOT_ENABLED', 'NTP server not enabled');
    return ntpStatus(ctx);
  });
  route('GET', '/api/status/nts', () => ntsStatus(ctx) ?? notEnabled('NTS server'));
  route('GET', '/api/status/ptp', () => ctx.ptp?.status() ?? notEnabled('PTP'));
  route('GET', '/api/status/gpsdo', () => ctx.gpsdo?.status() ?? notEnabled('GPSDO'));
  route('GET', '/api/satellites', () => ctx.gpsdo?.satellites() ?? notEnabled('GPSDO'));
  route('GET', '/api/peers', () => peersStatus(ctx));
  route('GET', '/api/clients', (request) => {
    const q = request.query as Record<string, string | undefined>;
    const limit = q['limit'] === undefined ? MAX_CLIENT_REPORT : Number(q['limit']);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CLIENT_REPORT) {
      throw fail('INVALID_REQUEST', `limit must be an integer from 1 to ${MAX_CLIENT_REPORT}`);
    }
    if (!ctx.config().ntp.enabled) throw fail('NOT_ENABLED', 'NTP server not enabled');
    return clientsStatus(ctx, limit);
  });

  route('GET', '/api/logs', (request) => {
    const q = request.query as Record<string, string | undefined>;
    const limit = q['limit'] === undefined ? 100 : Number(q['limit']);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw fail('INVALID_REQUEST', 'limit must be an integer from 1 to 1000');
    }
    const level = q['level'];
    if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level)) {
      throw fail('INVALID_REQUEST', `level must be one of ${LOG_LEVELS.join(', ')}`);
    }
    const minLevel = q['min_level'];
    if (minLevel !== undefined && !(LOG_LEVELS as readonly string[]).includes(minLevel)) {
      throw fail('INVALID_REQUEST', `min_level must be one of ${LOG_LEVELS.join(', ')}`);
    }
    let sinceMs: number | undefined;
    if (q['since'] !== undefined) {
      sinceMs = /^\d+$/.test(q['since']) ? Number(q['since']) : Date.parse(q['since']);
      if (!Number.isFinite(sinceMs))
        throw fail('INVALID_REQUEST', 'since must be RFC 3339 or Unix milliseconds');
    }
    return ctx.logs.query({
      limit,
      ...(level ? { level: level as LogLevel } : {}),
      ...(minLevel ? { minLevel: minLevel as LogLevel } : {}),
      ...(sinceMs !== undefined ? { sinceMs } : {}),
    });
  });

  // The stream paths as plain HTTP: authorised like the upgrade, then told to upgrade.
  for (const path of ['/api/ws/status', '/api/ws/logs']) {
    route('GET', path, (_request, reply) =>
      sendError(
        reply,
        fail('UPGRADE_REQUIRED', 'this is a WebSocket endpoint', { headers: { upgrade: 'websocket' } }),
      ),
    );
  }

  route('POST', '/api/nts/reload-certificate', () => {
    if (!ctx.reloadNtsCertificate()) throw fail('NOT_ENABLED', 'NTS server not enabled');
    return { status: 'success', message: 'NTS-KE certificate and key re-read' };
  });

  route('GET', '/api/config', () => {
    if (!ctx.configStore.file)
      throw fail('CONFLICT', 'the service runs on embedded defaults (no config file)');
    return ctx.configStore.document();
  });

  const replace = async (doc: unknown, who: Principal | undefined) => {
    if (!ctx.configStore.file)
      throw fail('CONFLICT', 'the service runs on embedded defaults (no config file)');
    let candidate;
    try {
      candidate = ctx.configStore.candidate(doc);
    } catch (err) {
      if (err instanceof ConfigError) {
        throw fail('CONFIG_INVALID', err.message.replaceAll('embedded defaults: ', ''));
      }
      throw err;
    }
    try {
      ctx.configStore.write(candidate.raw);
    } catch (err) {
      throw fail('CONFIG_WRITE_FAILED', `failed to save config: ${(err as Error).message}`);
    }
    const before = ctx.config();
    const changed = changedPaths({ ...before, web: undefined }, { ...candidate.config, web: undefined });
    const result = await ctx.applyConfig(candidate.config);
    ctx.logger
      .child({ component: 'config' })
      .info(
        { by: who?.username, changed, restartRequired: result.restartRequired },
        'configuration replaced',
      );
    return {
      status: 'success',
      message: result.restartRequired.length
        ? `saved; applied ${result.applied.join(', ') || 'nothing'}; a restart is needed for ${result.restartRequired.join(', ')}`
        : `saved and applied${result.applied.length ? `: ${result.applied.join(', ')}` : ''}`,
      changed,
      applied: result.applied,
      restart_required: result.restartRequired.length > 0,
      restart_required_for: result.restartRequired,
    };
  };

  route(
    'PUT',
    '/api/config',
    (request) =>
      replace(request.body, (request as FastifyRequest & { principal?: Principal | undefined }).principal),
    { bodyLimit: 64 * 1024 },
  );

  route(
    'POST',
    '/api/config/ntp/peers',
    async (request, reply) => {
      const body = peerBody.safeParse(request.body);
      if (!body.success) {
        const i = body.error.issues[0];
        throw fail('INVALID_REQUEST', `${i?.path.join('.') || 'body'}: ${i?.message ?? 'invalid'}`);
      }
      const doc = ctx.configStore.document();
      const ntp = (doc['ntp'] ?? {}) as Record<string, unknown>;
      const peers = Array.isArray(ntp['upstream_peers']) ? [...(ntp['upstream_peers'] as unknown[])] : [];
      if (peers.some((p) => (p as { address?: unknown }).address === body.data.address)) {
        throw fail('CONFLICT', `peer ${body.data.address} is already configured`);
      }
      peers.push(body.data);
      const result = await replace(
        { ...doc, ntp: { ...ntp, upstream_peers: peers } },
        (request as FastifyRequest & { principal?: Principal | undefined }).principal,
      );
      return reply.code(201).send({ ...result, peer: body.data });
    },
    { bodyLimit: 4096 },
  );

  route('DELETE', '/api/config/ntp/peers/:address', async (request) => {
    const address = (request.params as { address: string }).address;
    const doc = ctx.configStore.document();
    const ntp = (doc['ntp'] ?? {}) as Record<string, unknown>;
    const peers = Array.isArray(ntp['upstream_peers'])
      ? (ntp['upstream_peers'] as { address?: unknown }[])
      : [];
    const kept = peers.filter((p) => p.address !== address);
    if (kept.length === peers.length) throw fail('NOT_FOUND', `no peer ${address}`);
    return replace(
      { ...doc, ntp: { ...ntp, upstream_peers: kept } },
      (request as FastifyRequest & { principal?: Principal | undefined }).principal,
    );
  });
}

function notEnabled(what: string): never {
  throw fail('NOT_ENABLED', `${what} not enabled`);
}

/** The login page's note: which lab users (with the documented password) and whether the lab JWT secret are in use. */
export function labCredentialNote(inUse: readonly string[]): {
  in_use: boolean;
  users: string[];
  password: string | null;
  jwt_secret: boolean;
} {
  const users = inUse.flatMap((w) => /^web\.users\[\d+\] \((.*)\)$/.exec(w)?.[1] ?? []);
  return {
    in_use: inUse.length > 0,
    users,
    password: users.length > 0 ? LAB_PASSWORD : null,
    jwt_secret: inUse.includes('web.jwt_secret'),
  };
}
