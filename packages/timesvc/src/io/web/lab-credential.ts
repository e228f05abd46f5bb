import type { TimesvcConfig } from '../../config.ts';
import { verifyPassword } from './passwords.ts';

/**
 * The documented lab credential of `config/timesvc.demo.yaml` (README "Web API: the lab credential"):
 * user `admin`, password `timesvc-lab`, and its JWT secret. They work out of the box for a lab; every
 * start logs a warning while either is in use, the dashboard shows a banner, and `environment:
 * production` refuses to start with them.
 */
export const LAB_USERNAME = 'admin';
export const LAB_PASSWORD = 'timesvc-lab';
export const LAB_JWT_SECRET = 'timesvc-lab-jwt-secret-not-for-production-use';
/**
 * The demo configuration's hash of LAB_PASSWORD. A user carrying exactly this string uses the lab password
 * without deriving anything: the scrypt derivation (N = 2^17, passwords.ts) takes about a second of a
 * thread-pool thread and 128 MiB, which at every start held the service's readiness back by that second.
 */
export const LAB_PASSWORD_HASH =
  'scrypt$17$8$1$OErIOo+nXbbg3C/sIxipug==$rX+S/20TWtrd5TKZLw4AMqZkDZNCVVODtyHG995i+GE=';

/**
 * What of the lab credential a configuration shows without deriving a key (the lab JWT secret, users
 * with the demo's hash), and the users whose hash must be derived to tell (`labCredentialUse` does).
 */
export function knownLabCredentialUse(config: TimesvcConfig): { found: string[]; toVerify: number[] } {
  const found: string[] = [];
  const toVerify: number[] = [];
  if (config.web.jwt_secret === LAB_JWT_SECRET) found.push('web.jwt_secret');
  for (const [i, u] of config.web.users.entries()) {
    if (u.password_hash === LAB_PASSWORD_HASH) found.push(userEntry(config, i));
    else toVerify.push(i);
  }
  return { found, toVerify };
}

/** The users among `indices` whose hash is of the lab password (one scrypt derivation each). */
export async function verifyLabUsers(config: TimesvcConfig, indices: readonly number[]): Promise<string[]> {
  const found: string[] = [];
  for (const i of indices) {
    const u = config.web.users[i];
    if (u && (await verifyPassword(LAB_PASSWORD, u.password_hash))) found.push(userEntry(config, i));
  }
  return found;
}

/** What of the lab credential a configuration uses (checks each user's hash against the lab password). */
export async function labCredentialUse(config: TimesvcConfig): Promise<string[]> {
  const { found, toVerify } = knownLabCredentialUse(config);
  return inConfigOrder([...found, ...(await verifyLabUsers(config, toVerify))]);
}

function userEntry(config: TimesvcConfig, i: number): string {
  return `web.users[${i}] (${config.web.users[i]?.username ?? ''})`;
}

/** The JWT secret first, then the users by their index, as the configuration lists them. */
export function inConfigOrder(entries: readonly string[]): string[] {
  const index = (e: string): number => (e === 'web.jwt_secret' ? -1 : Number(/\[(\d+)\]/.exec(e)?.[1] ?? 0));
  return [...entries].sort((a, b) => index(a) - index(b));
}
