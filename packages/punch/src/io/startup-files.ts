import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { ConfigError, type Logger } from '@broadcast-ops/core';
import type { PunchConfig } from '../config.ts';

/**
 * What `serve` reads before it builds the broker (README "Configuration"): the token secret (from
 * PUNCH_SECRET, or with `--demo` a generated one kept in a file) and the TLS certificate and key. A problem is
 * the operator's to fix: a `ConfigError`, which `runService` prints as one line and exits 2.
 */
export const DEMO_SECRET_FILE = 'data/punch/secret';

/** `serve --demo`: a random secret created once, kept in a 0600 file; its value is never printed. */
function demoSecret(file: string): { secret: string; created: boolean } {
  if (existsSync(file)) return { secret: readFileSync(file, 'utf8').trim(), created: false };
  mkdirSync(dirname(file), { recursive: true });
  const secret = randomBytes(48).toString('base64url'); // 64 characters, the length the original advises
  writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return { secret, created: true };
}

/** The HMAC key of the tokens: PUNCH_SECRET, else (with `--demo`) the demo file's; refused when missing or short. */
export function brokerSecret(config: PunchConfig, demo: boolean, logger: Logger): string {
  let secret = config.secret;
  if (secret === undefined && demo) {
    const file = resolve(DEMO_SECRET_FILE);
    const kept = demoSecret(file);
    secret = kept.secret;
    logger.warn(
      { file },
      kept.created
        ? 'demo mode: created a random PUNCH_SECRET in this file (mode 0600); set PUNCH_SECRET in production'
        : 'demo mode: using the PUNCH_SECRET stored in this file; set PUNCH_SECRET in production',
    );
  }
  if (secret === undefined) {
    throw new ConfigError(
      'PUNCH_SECRET is not set. It is the HMAC key that signs every access token, so the broker ' +
        'refuses to start without it. Set PUNCH_SECRET to a random string of at least 32 (advised 64+) ' +
        'characters, e.g. `export PUNCH_SECRET=$(openssl rand -base64 48)`, or run `punch serve --demo` ' +
        `to keep a generated one in ${DEMO_SECRET_FILE}.`,
    );
  }
  if (secret.length < 32) {
    throw new ConfigError('PUNCH_SECRET must be at least 32 characters (advised 64+); refusing to start.');
  }
  if (secret.length < 64) logger.warn('PUNCH_SECRET is shorter than the advised 64 characters');
  return secret;
}

/** PUNCH_TLS_CERT and PUNCH_TLS_KEY read once at start (PEM); undefined when not configured. */
export function readTls(config: PunchConfig): { cert: Buffer; key: Buffer } | undefined {
  if (config.tls.cert === undefined || config.tls.key === undefined) return undefined;
  try {
    return { cert: readFileSync(config.tls.cert), key: readFileSync(config.tls.key) };
  } catch (err) {
    throw new ConfigError(
      `cannot read PUNCH_TLS_CERT/PUNCH_TLS_KEY (${(err as Error).message}); refusing to start.`,
    );
  }
}
