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

/** What of the lab credential a configuration uses (checks each user's hash against the lab password). */
export async function labCredentialUse(config: TimesvcConfig): Promise<string[]> {
  const found: string[] = [];
  if (config.web.jwt_secret === LAB_JWT_SECRET) found.push('web.jwt_secret');
  for (const [i, u] of config.web.users.entries()) {
    if (await verifyPassword(LAB_PASSWORD, u.password_hash)) found.push(`web.users[${i}] (${u.username})`);
  }
  return found;
}
