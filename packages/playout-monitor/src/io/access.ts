/**
 * Who may reach the HTTP app and the WebSocket, and who may change anything (docs/SECURITY.md):
 *
 * - Host allow-list (against DNS rebinding, where a foreign web page points its own name at this
 *   address): every request and every WebSocket upgrade must carry a `Host` header naming the listen
 *   address, a loopback name when listening on loopback, an address of this machine when listening on
 *   all interfaces, or one of `settings.allowedHosts`. Anything else gets 421 Misdirected Request
 *   (RFC 9110 section 15.5.20) before any route runs.
 * - Admin token: mutations need `Authorization: Bearer <token>` (compared in constant time). Without a
 *   configured token (`PLAYOUT_MONITOR_ADMIN_TOKEN`) one is generated at first start and kept in
 *   `<data dir>/admin-token` (mode 0600); `PLAYOUT_MONITOR_AUTH=off` turns the check off explicitly (a
 *   closed network only).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { homedir, hostname, networkInterfaces } from 'node:os';
import { join } from 'node:path';

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

function isLoopback(address: string): boolean {
  return address === 'localhost' || address === '::1' || /^127\./.test(address);
}

function isWildcard(address: string): boolean {
  return address === '0.0.0.0' || address === '::' || address === '';
}

/** The host names (lower case, no port, IPv6 without brackets) the HTTP app answers to. */
export function allowedHostNames(listenAddress: string, configured: readonly string[] = []): Set<string> {
  const names = new Set<string>(configured.map((n) => n.toLowerCase()));
  names.add(listenAddress.toLowerCase());
  if (isLoopback(listenAddress) || isWildcard(listenAddress)) for (const n of LOOPBACK_NAMES) names.add(n);
  if (isWildcard(listenAddress)) {
    names.add(hostname().toLowerCase());
    for (const list of Object.values(networkInterfaces()))
      for (const a of list ?? []) names.add(a.address.toLowerCase());
  }
  return names;
}

/** The host part of a Host header value (RFC 9110 section 7.2): `name[:port]` or `[v6][:port]`. */
export function hostOf(header: string | undefined): string | undefined {
  if (header === undefined || header.length === 0 || header.length > 300) return undefined;
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end > 0 ? h.slice(1, end) : undefined;
  }
  const colon = h.indexOf(':');
  const name = colon >= 0 ? h.slice(0, colon) : h;
  if (isIP(name) === 6) return name;
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

export function hostAllowed(header: string | undefined, allowed: ReadonlySet<string>): boolean {
  const h = hostOf(header);
  return h !== undefined && allowed.has(h);
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
