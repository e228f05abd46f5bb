// Entry point of `npx punch`: the only module that reads the environment and opens ports.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { ConfigError, Shutdown, createLogger, runCli } from '@broadcast-ops/core';
import { PunchAgent, parseJoinLink, streamOfToken } from './agent/agent.ts';
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

async function serve(values: Record<string, unknown>): Promise<void> {
  // Loaded here, not at the top: `punch agent` (a device restart) starts without the broker's modules.
  const [{ loadPunchConfig, warnsPlainHttp }, { SessionStoreError }, { createPunchServer }] =
    await Promise.all([import('./config.ts'), import('./io/sqlite-store.ts'), import('./server.ts')]);
  let config;
  try {
    config = loadPunchConfig({ file: typeof values['config'] === 'string' ? values['config'] : undefined });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`punch: configuration error:\n${err.message}\n`);
    process.exitCode = 2;
    return;
  }
  const logger = createLogger({
    service: 'punch',
    level: config.logLevel,
    pretty: process.env['LOG_PRETTY'] === '1',
  });
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
  if (!config.baseUrl && (config.host === '0.0.0.0' || config.host === '::')) {
    logger.warn('PUNCH_BASE_URL is not set: session links use localhost; set it to the public origin');
  }
}

/** The agent's last line for a `session_closed` reason (spec: admin_closed, ttl_expired, error). */
function closedText(reason: string): string {
  switch (reason) {
    case 'admin_closed':
      return 'session closed by the operator; agent done';
    case 'ttl_expired':
      return 'session reached the end of its lifetime with no media flowing; agent done';
    default:
      return `session closed by the broker (${reason}); agent done`;
  }
}

/** `punch agent`: one end of an SRT link, driven by the broker (docs/agent.md). */
async function agent(values: Record<string, unknown>): Promise<void> {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? values[k] : undefined);
  const fail = (message: string, code = 2): void => {
    process.stderr.write(`punch agent: ${message}\n`);
    process.exitCode = code;
  };
  let target: { broker: string; session: string; token: string; stream?: string | undefined };
  try {
    const link = str('link');
    if (link) target = parseJoinLink(link);
    else {
      const broker = str('broker');
      const session = str('session');
      const token = str('token') ?? process.env['PUNCH_TOKEN'];
      if (!broker || !session || !token) {
        fail('give --link <join link>, or --broker <url> --session <name> --token <token> (or PUNCH_TOKEN)');
        return;
      }
      target = { broker: broker.replace(/\/+$/, ''), session, token, stream: streamOfToken(token) };
    }
  } catch (err) {
    fail((err as Error).message);
    return;
  }
  const role = str('role');
  if (role !== 'sender' && role !== 'receiver') {
    fail('--role must be sender or receiver');
    return;
  }
  const port = Number(str('port') ?? '');
  if (!Number.isInteger(port) || port < 1024 || port > 65535) {
    fail('--port must be the local UDP port for SRT, 1024-65535');
    return;
  }
  const media = role === 'sender' ? str('input') : str('output');
  if (!media || !/^(udp:\/\/[^\s]+:\d+|file:.+|-)$/.test(media)) {
    fail(
      role === 'sender'
        ? '--input must be udp://127.0.0.1:<port> (e.g. from ffmpeg), file:<path> or - (stdin)'
        : '--output must be udp://<host>:<port>, file:<path> or - (stdout)',
    );
    return;
  }
  const healthS = Number(str('health') ?? '2');
  if (!(healthS >= 1 && healthS <= 5)) {
    fail('--health must be 1-5 seconds');
    return;
  }
  // Logs go to stderr: stdout may carry the media.
  const logger = createLogger({
    service: 'punch-agent',
    level: process.env['LOG_LEVEL'] ?? 'info',
    destination: { write: (s: string) => process.stderr.write(s) },
  });
  const a = new PunchAgent({
    ...target,
    stream: str('stream') ?? target.stream,
    role,
    port,
    media,
    label: str('label'),
    logger,
    healthMs: healthS * 1000,
    ...(str('srt') ? { srtBinary: str('srt') } : {}),
  });
  const stop = (): void => {
    a.stop();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const exit = await a.start();
  if (exit.code !== 0) fail(exit.message, exit.code);
  else logger.info({ reason: exit.closeReason }, closedText(exit.closeReason));
  // Let the logger flush, then leave even if stdin is still open.
  setTimeout(() => process.exit(exit.code), 200);
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
  agent: {
    summary: 'Run one end of an SRT link: register, wait for the partner, run srt-live-transmit',
    options: {
      link: { type: 'string', description: 'Join link from the console: http(s)://host/s/<name>?t=<token>' },
      broker: { type: 'string', description: 'Broker URL (instead of --link), with --session and --token' },
      session: { type: 'string', description: 'Session name (with --broker)' },
      token: { type: 'string', description: 'Peer token (with --broker; or PUNCH_TOKEN)' },
      stream: { type: 'string', description: "Stream slot (default: the token's stream or the only one)" },
      role: { type: 'string', description: 'sender or receiver' },
      port: { type: 'string', description: 'Local UDP port for SRT (1024-65535)' },
      input: { type: 'string', description: 'Sender media: udp://127.0.0.1:<port>, file:<path> or -' },
      output: { type: 'string', description: 'Receiver media: udp://<host>:<port>, file:<path> or -' },
      label: { type: 'string', description: 'Name shown on the console' },
      health: { type: 'string', description: 'Seconds between health reports, 1-5 (default 2)' },
      srt: { type: 'string', description: 'Path of srt-live-transmit (default: from PATH)' },
    },
    run: ({ values }) => agent(values),
  },
});
