import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashes for `web.users[].password_hash`: scrypt (RFC 7914) from node:crypto with the OWASP
 * Password Storage Cheat Sheet's scrypt parameters N = 2^17, r = 8, p = 1 (README "Web API: passwords").
 * scrypt needs 128 · N · r bytes = 128 MiB at those parameters, above Node's default `maxmem` of 32 MiB,
 * so `maxmem` is raised to 256 MiB.
 *
 * Format: `scrypt$<log2 N>$<r>$<p>$<salt, base64>$<hash, base64>` (16-byte salt, 32-byte hash). The
 * parameters travel with the hash so they can be raised later; hashes weaker than N = 2^14 are refused.
 */
export const SCRYPT_PARAMS = { log2N: 17, r: 8, p: 1, saltBytes: 16, keyBytes: 32 } as const;
export const SCRYPT_MAXMEM = 256 * 1024 * 1024;
const MIN_LOG2N = 14;

function derive(password: string, salt: Buffer, log2N: number, r: number, p: number, len: number) {
  const options: ScryptOptions = { N: 2 ** log2N, r, p, maxmem: SCRYPT_MAXMEM };
  return new Promise<Buffer>((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, len, options, (err, key) => {
      if (err) reject(err);
      else resolve(key);
    });
  });
}

export async function hashPassword(
  password: string,
  params: { log2N: number; r: number; p: number; saltBytes: number; keyBytes: number } = SCRYPT_PARAMS,
): Promise<string> {
  const salt = randomBytes(params.saltBytes);
  const key = await derive(password, salt, params.log2N, params.r, params.p, params.keyBytes);
  return ['scrypt', params.log2N, params.r, params.p, salt.toString('base64'), key.toString('base64')].join(
    '$',
  );
}

interface Parsed {
  log2N: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

export function parsePasswordHash(hash: string): Parsed | undefined {
  const m = /^scrypt\$(\d{1,2})\$(\d{1,2})\$(\d{1,2})\$([A-Za-z0-9+/=]{16,})\$([A-Za-z0-9+/=]{40,})$/.exec(
    hash,
  );
  if (!m) return undefined;
  const [log2N, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (log2N < MIN_LOG2N || log2N > 20 || r < 1 || r > 32 || p < 1 || p > 16) return undefined;
  if (128 * 2 ** log2N * r > SCRYPT_MAXMEM / 1.01) return undefined;
  return { log2N, r, p, salt: Buffer.from(m[4] ?? '', 'base64'), key: Buffer.from(m[5] ?? '', 'base64') };
}

/** A hash string that `parsePasswordHash` accepts (the config schema checks users' hashes with it). */
export function isPasswordHash(hash: string): boolean {
  return parsePasswordHash(hash) !== undefined;
}

/** Constant-time comparison of the derived key with the stored one. */
export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  const parsed = parsePasswordHash(hash);
  if (!parsed) return false;
  const key = await derive(password, parsed.salt, parsed.log2N, parsed.r, parsed.p, parsed.key.length);
  return key.length === parsed.key.length && timingSafeEqual(key, parsed.key);
}
