// Entry point of `npx punch`: the only module that reads the environment and opens ports.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { ConfigError, Shutdown, createLogger, runCli, type Logger } from '@broadcast-ops/core';
import { AGENT_COMMAND } from './agent/cli.ts';
import type { PunchConfig } from './config.ts';
import type { PunchServer } from './server.ts';

const DEMO_SECRET_FILE = 'data/punch/secret';

/** `serve --demo`: a random secret created once, kept in a 0600 file; its value is never printed. */
function demoSecret(file: string): { secret: string; created: boolean } {
  if (existsSync(file)) return { secret: readFileSync(file, 'utf8').trim(), created: false };
  mkdirSync(dirname(file), { recursive: true });
  const secret = randomBytes(48).toString('base64url'); // 64 characters, the length the original advises
  writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return { secret, created: true };
}

/** The config (file and PUNCH_* environment) and the logger; undefined after a configuration error (exit 2). */
async function configAndLogger(
  values: Record<string, unknown>,
  service: string,
): Promise<{ config: PunchConfig; logger: Logger } | undefined> {
  const { loadPunchConfig } = await import('./config.ts');
  let config;
  try {
    config = loadPunchConfig({ file: typeof values['config'] === 'string' ? values['config'] : undefined });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`punch: configuration error:\n${err.message}\n`);
    process.exitCode = 2;
    return undefined;
  }
  const logger = createLogger({ service, level: config.logLevel, pretty: process.env['LOG_PRETTY'] === '1' });
  return { config, logger };
}

async function serve(values: Record<string, unknown>): Promise<void> {
  // Loaded here, not at the top: `punch agent` (a device restart) starts without the broker's modules.
  const [
    { defaultBaseUrl, isLoopbackHost, warnsPlainHttp },
    { SessionStoreError },
    { createPunchServer },
    { isLoopbackBase, loopbackBaseNote },
  ] = await Promise.all([
    import('./config.ts'),
    import('./io/sqlite-store.ts'),
    import('./server.ts'),
    import('./io/join-steps.ts'),
  ]);
  const loaded = await configAndLogger(values, 'punch');
  if (!loaded) return;
  const { config, logger } = loaded;
  let secret = config.secret;
  if (secret === undefined && values['demo'] === true) {
    const file = resolve(DEMO_SECRET_FILE);
    const demo = demoSecret(file);
    secret = demo.secret;
    logger.warn(
      { file },
      demo.created
        ? 'demo mode: created a random PUNCH_SECRET in this file (mode 0600); set PUNCH_SECRET in production'
        : 'demo mode: using the PUNCH_SECRET stored in this file; set PUNCH_SECRET in production',
    );
  }
  if (secret === undefined) {
    process.stderr.write(
      'punch: PUNCH_SECRET is not set. It is the HMAC key that signs every access token, so the broker ' +
        'refuses to start without it. Set PUNCH_SECRET to a random string of at least 32 (advised 64+) ' +
        'characters, e.g. `export PUNCH_SECRET=$(openssl rand -base64 48)`, or run `punch serve --demo` ' +
        `to keep a generated one in ${DEMO_SECRET_FILE}.\n`,
    );
    process.exitCode = 2;
    return;
  }
  if (secret.length < 32) {
    process.stderr.write(
      'punch: PUNCH_SECRET must be at least 32 characters (advised 64+); refusing to start.\n',
    );
    process.exitCode = 2;
    return;
  }
  if (secret.length < 64) logger.warn('PUNCH_SECRET is shorter than the advised 64 characters');
  if (!config.limits.rateLimits)
    logger.warn('per-client rate limits are OFF (PUNCH_RATE_LIMITING=off); benchmarks only');
  let tls: { cert: Buffer; key: Buffer } | undefined;
  if (config.tls.cert !== undefined && config.tls.key !== undefined) {
    try {
      tls = { cert: readFileSync(config.tls.cert), key: readFileSync(config.tls.key) };
    } catch (err) {
      process.stderr.write(
        `punch: cannot read PUNCH_TLS_CERT/PUNCH_TLS_KEY (${(err as Error).message}); refusing to start.\n`,
      );
      process.exitCode = 2;
      return;
    }
  }
  let server: PunchServer | undefined;
  let url: string;
  try {
    server = createPunchServer({
      config: { ...config, secret },
      logger,
      ...(tls ? { tls } : {}),
      // docs/multi-instance.md "Failures": an owner that lost its lease can no longer save anything; it
      // exits (code 1) so that its supervisor restarts it as a relay to the new owner.
      onOwnerLost: () => {
        logger.fatal('this instance lost the owner lease to another instance; exiting to restart as a relay');
        void server?.close().finally(() => process.exit(1));
        setTimeout(() => process.exit(1), 5_000).unref();
      },
    });
    const running = server;
    new Shutdown({ logger }).install().add('broker', () => running.close());
    url = await server.listen();
  } catch (err) {
    if (!(err instanceof SessionStoreError)) throw err;
    // A store that cannot be opened or read: one clear line naming the file and what to do, no stack.
    process.stderr.write(`punch: ${err.message}\n`);
    await server?.close().catch(() => undefined);
    process.exitCode = 2;
    return;
  }
  logger.info(
    {
      url,
      store: config.redis.url ? 'redis' : 'sqlite',
      db: config.redis.url ? null : config.db,
      instance: server.cluster?.id ?? null,
      owner: server.cluster ? server.cluster.isOwner : null,
      baseUrl: config.baseUrl ?? null,
      trustProxy: config.trustProxy,
      tls: tls !== undefined,
      sessions: server.broker.liveSessions,
    },
    'punch broker listening',
  );
  if (warnsPlainHttp(config.host, tls !== undefined)) {
    logger.warn(
      { host: config.host },
      'serving plain HTTP on a non-loopback address: tokens and the passphrases in /connect travel in clear ' +
        'text. Put a TLS reverse proxy in front (and set PUNCH_TRUST_PROXY), or set PUNCH_TLS_CERT and PUNCH_TLS_KEY',
    );
  }
  // Links handed out under a loopback base URL reach only this machine (the quick start's 127.0.0.1): say so,
  // and how to set it; a warning when the broker listens for other machines that would get such links.
  const base =
    config.baseUrl?.replace(/\/+$/, '') ??
    defaultBaseUrl(config.host, Number(new URL(url).port), tls ? 'https' : 'http');
  if (isLoopbackBase(base)) {
    const level = isLoopbackHost(config.host) ? 'info' : 'warn';
    logger[level]({ baseUrl: base, setting: 'PUNCH_BASE_URL' }, loopbackBaseNote(base));
  }
}

/** `punch relay`: the opaque relay as a process of its own (docs/relay.md "Deploying a separate relay"). */
async function relay(values: Record<string, unknown>): Promise<void> {
  const { startRelayProcess } = await import('./io/relay/relay-process.ts');
  const loaded = await configAndLogger(values, 'punch-relay');
  if (!loaded) return;
  const { config, logger } = loaded;
  let running;
  try {
    running = await startRelayProcess(config, logger);
  } catch (err) {
    process.stderr.write(`punch relay: ${(err as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  const r = running;
  new Shutdown({ logger }).install().add('relay', () => r.close());
  logger.info(
    {
      relay: r.id,
      address: config.relay.publicAddress,
      host: config.relay.host,
      ports: config.relay.ports,
      capacity: config.relay.maxAllocations,
    },
    'punch relay registered',
  );
}

await runCli('punch', 'SRT session broker (sessions, tokens, connection strings)', {
  serve: {
    summary: 'Start the broker (configuration from PUNCH_* environment variables)',
    options: {
      config: { type: 'string', description: 'JSON or YAML config file (environment overrides it)' },
      demo: {
        type: 'boolean',
        description: `Without PUNCH_SECRET, keep a random secret in ${DEMO_SECRET_FILE}`,
      },
    },
    run: ({ values }) => serve(values),
  },
  agent: AGENT_COMMAND,
  relay: {
    summary: 'Run the opaque SRT relay on its own; brokers reach it through Redis (PUNCH_REDIS_URL)',
    options: {
      config: { type: 'string', description: 'JSON or YAML config file (environment overrides it)' },
    },
    run: ({ values }) => relay(values),
  },
});
