/**
 * Who may reach the HTTP app and the WebSocket, and who may change anything (docs/SECURITY.md):
 *
 * - Host (against DNS rebinding, where a foreign web page points its own name at this address): core's
 *   Host guard (the repository's docs/ARCHITECTURE.md "The HTTP edge") on every request and every WebSocket upgrade: an IP
 *   literal, `localhost`, this machine's name, the listen address, or one of `settings.allowedHosts`.
 *   Anything else gets 421 Misdirected Request (RFC 9110 section 15.5.20) before any route runs.
 * - Admin token: mutations need `Authorization: Bearer <token>` (compared in constant time). Without a
 *   configured token (`PLAYOUT_MONITOR_ADMIN_TOKEN`) one is generated at first start and kept in
 *   `<data dir>/admin-token` (mode 0600); `PLAYOUT_MONITOR_AUTH=off` turns the check off explicitly (a
 *   closed network only).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The names the Host guard accepts besides its own rule: the listen address and `settings.allowedHosts`. */
export function allowedHostNames(settings: {
  listenAddress: string;
  allowedHosts: readonly string[];
}): readonly string[] {
  return [settings.listenAddress, ...settings.allowedHosts];
}

export interface AdminTokenResult {
  /** undefined: the check is off (explicitly). */
  token: string | undefined;
  source: 'environment' | 'generated' | 'file' | 'disabled';
  file?: string;
}

/** The data directory: `PLAYOUT_MONITOR_DATA_DIR`, else `$XDG_STATE_HOME/playout-monitor`, else `~/.local/state/playout-monitor`. */
export function dataDir(env: NodeJS.ProcessEnv): string {
  return (
    env['PLAYOUT_MONITOR_DATA_DIR'] ??
    join(env['XDG_STATE_HOME'] ?? join(homedir(), '.local', 'state'), 'playout-monitor')
  );
}

/** The admin token from the environment, the data directory, or newly generated there (0600). */
export function loadAdminToken(env: NodeJS.ProcessEnv): AdminTokenResult {
  if ((env['PLAYOUT_MONITOR_AUTH'] ?? '').toLowerCase() === 'off')
    return { token: undefined, source: 'disabled' };
  const fromEnv = env['PLAYOUT_MONITOR_ADMIN_TOKEN'];
  if (fromEnv) return { token: fromEnv, source: 'environment' };
  const dir = dataDir(env);
  const file = join(dir, 'admin-token');
  if (existsSync(file)) {
    chmodSync(file, 0o600);
    const token = readFileSync(file, 'utf8').trim();
    if (token.length >= 16) return { token, source: 'file', file };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const token = randomBytes(24).toString('base64url');
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { token, source: 'generated', file };
}
